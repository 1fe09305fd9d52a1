"""Per-request cost of the pure core: the pick, cookie reading, and a whole decide(), for several split sizes; and a
match rule's regular expression, RE2 (what the core uses) side by side with Python's backtracking `re`.

Why: the extproc calls decide() once per request on the gateway's hot path, so its cost bounds the dataplane's
throughput. Not a test: figures are printed next to the target, never asserted (they depend on the machine and its
load; run it on an idle machine and read the best-of-N figures).

    PYTHONPATH=src python bench/bench_core.py [--repeat 7] [--out bench/results/DATE-core.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trafficsplit.core.control.compiler import compile_split
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.decide.request import Request
from trafficsplit.core.decide.split import decide
from trafficsplit.core.model.compiled import CompiledSplit, Endpoint
from trafficsplit.core.model.cookie import AffinityMinter, read_cookie
from trafficsplit.core.model.hashing import key_hash
from trafficsplit.core.model.persistent import CookieSigner
from trafficsplit.core.model.regex import Pattern
from trafficsplit.core.model.weights import MAX_BACKENDS, Weights

TARGET_NS = 5_000  # the whole per-request core work with 2 backends
KEY = "0193f1c2a4b5000000000001"
# A realistic browser Cookie line: analytics, preferences, a CSRF token, ours, a language.
COOKIE_LINE = f"_ga=GA1.2.1234567890.1700000000; theme=dark; csrftoken=Zx9cQk2LmN8pR4tV; ts-shop={KEY}; lang=en-GB"
# 100 backends is above the validated maximum (MAX_BACKENDS), so the largest case is that maximum.
SIZES = (2, 10, MAX_BACKENDS)


def ns_per_call(fn: Callable[[], object], repeat: int) -> float:
    """Best of `repeat` runs (the least disturbed by the OS), each long enough to be timed reliably."""
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    return min(timer.repeat(repeat=repeat, number=number)) / number * 1e9


def sticky_split(n: int, down: int | None = None, **extra: Any) -> CompiledSplit:
    """Every backend with one ready endpoint, except backend `down` (then the docs/spec.md §6 failover path is live);
    `extra`: more spec fields (assignment, sticky)."""
    backends = [{"name": f"b{i}", "weight": max(100 // n, 1)} for i in range(n)]
    spec = {"hosts": ["shop.example.com"], "backends": backends, "sticky": {"cookie": {"name": "ts-shop"}}, **extra}
    endpoints = {f"b{i}": [Endpoint("10.0.0.1", 80, ready=i != down)] for i in range(n)}
    return compile_split(parse_split("prod", "shop", spec), endpoints)


def no_header(_name: str) -> str | None:
    return None


def measure(n: int, repeat: int) -> dict[str, float]:
    weights = Weights.of((f"b{i}", max(100 // n, 1)) for i in range(n))
    split = sticky_split(n)
    # The backend the cookie's key lands on is down here, so every call takes the failover re-pick.
    degraded = sticky_split(n, down=split.weights.pick_index(key_hash(KEY)))
    minter = AffinityMinter()
    with_cookie = [COOKIE_LINE]
    without = ["theme=dark; lang=en-GB"]

    def cookie_pick() -> str:
        return weights.pick(read_cookie(with_cookie, "ts-shop") or "")

    def decide_cookie() -> object:
        return decide(split, Request(authority="", cookie_lines=with_cookie, request_id="r", headers={}), minter=minter)

    def decide_mint() -> object:
        return decide(split, Request(authority="", cookie_lines=without, request_id="r", headers={}), minter=minter)

    def decide_failover() -> object:
        return decide(
            degraded, Request(authority="", cookie_lines=with_cookie, request_id="r", headers={}), minter=minter
        )

    # Issue 14's opt-in modes, side by side with decide/cookie: the slot table's lookup, and the sealed cookie's
    # HMAC check (a returning session, the common request).
    minimal = sticky_split(n, assignment="minimal")
    persistent = sticky_split(n, sticky={"cookie": {"name": "ts-shop"}, "mode": "persistent"})
    signer = CookieSigner(b"k" * 32)
    sealed = [f"ts-shop={signer.seal(persistent.key, KEY, persistent.weights.names[0])}"]

    def decide_minimal() -> object:
        return decide(
            minimal, Request(authority="", cookie_lines=with_cookie, request_id="r", headers={}), minter=minter
        )

    def decide_persistent() -> object:
        return decide(
            persistent,
            Request(authority="", cookie_lines=sealed, request_id="r", headers={}),
            minter=minter,
            signer=signer,
        )

    return {
        "key_hash": ns_per_call(lambda: key_hash(KEY), repeat),
        "pick": ns_per_call(lambda: weights.pick(KEY), repeat),
        "cookie+pick": ns_per_call(cookie_pick, repeat),
        "decide/cookie": ns_per_call(decide_cookie, repeat),
        "decide/mint": ns_per_call(decide_mint, repeat),
        "decide/failover": ns_per_call(decide_failover, repeat),
        "decide/minimal": ns_per_call(decide_minimal, repeat),
        "decide/persistent": ns_per_call(decide_persistent, repeat),
    }


TYPICAL_RULE, TYPICAL_VALUE = r"(beta|canary)-user-[0-9]+", "canary-user-12345"
# The denial-of-service rule of the security review. Python's `re` doubles its time per added 'a'; 22 keeps the
# side-by-side run short (the review's 29 bytes took ~9 s), RE2 gets the full 29.
PATHOLOGICAL_RULE = r"(a+)+$"


def measure_regex(repeat: int) -> dict[str, float]:
    typical_re, typical_re2 = re.compile(TYPICAL_RULE), Pattern(TYPICAL_RULE)
    bad_re, bad_re2 = re.compile(PATHOLOGICAL_RULE), Pattern(PATHOLOGICAL_RULE)
    started = time.perf_counter()
    bad_re.fullmatch("a" * 22 + "!")
    re_pathological_ns = (time.perf_counter() - started) * 1e9
    return {
        "typical/re": ns_per_call(lambda: typical_re.fullmatch(TYPICAL_VALUE), repeat),
        "typical/re2": ns_per_call(lambda: typical_re2.fullmatch(TYPICAL_VALUE), repeat),
        "pathological/re (22 bytes)": re_pathological_ns,
        "pathological/re2 (29 bytes)": ns_per_call(lambda: bad_re2.fullmatch("a" * 28 + "!"), repeat),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="ns per call of the core's per-request work")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--out", type=Path, help="also write the figures as JSON (e.g. bench/results/DATE-core.json)")
    args = parser.parse_args()
    load_start = os.getloadavg()
    columns = (
        "key_hash",
        "pick",
        "cookie+pick",
        "decide/cookie",
        "decide/mint",
        "decide/failover",
        "decide/minimal",
        "decide/persistent",
    )
    print(f"{'backends':>8}" + "".join(f"{c:>19}" for c in columns))
    results = {n: measure(n, args.repeat) for n in SIZES}
    for n, row in results.items():
        print(f"{n:>8}" + "".join(f"{row[c]:>16.0f} ns" for c in columns))
    two = results[2]
    for case in ("decide/cookie", "decide/mint", "decide/failover"):
        verdict = "within" if two[case] <= TARGET_NS else "ABOVE"
        print(
            f"2 backends, {case}: {two[case]:.0f} ns vs target {TARGET_NS} ns ({two[case] / TARGET_NS:.2f}x, {verdict})"
        )
    rx = measure_regex(args.repeat)
    for case, ns in rx.items():
        print(f"regex {case}: {ns:,.0f} ns")
    print(f"regex typical rule: RE2 costs {rx['typical/re2'] / rx['typical/re']:.1f}x re per match")
    ratio = rx["pathological/re (22 bytes)"] / rx["pathological/re2 (29 bytes)"]
    print(f"regex pathological rule: re on 22 bytes costs {ratio:,.0f}x RE2 on 29 bytes")
    if args.out is not None:
        doc = {
            "benchmark": "core",
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "unit": "ns per call, best of --repeat",
            "repeat": args.repeat,
            "target_ns": TARGET_NS,
            "by_backends": {str(n): {c: round(v) for c, v in row.items()} for n, row in results.items()},
            "regex_ns": {case: round(ns) for case, ns in rx.items()},
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "loadavg_start": [round(x, 2) for x in load_start],
                "loadavg_end": [round(x, 2) for x in os.getloadavg()],
            },
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
