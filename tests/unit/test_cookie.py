"""docs/spec.md §4: reading the affinity cookie (RFC 6265 edge cases, fuzzed), minting ids, rendering Set-Cookie."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trafficsplit.core.model.cookie import (
    AffinityMinter,
    CookieSettings,
    SameSite,
    is_cookie_value,
    mint_affinity_id,
    read_cookie,
    render_set_cookie,
)
from trafficsplit.core.model.errors import SpecError

OK = "0193f1c2a4b5000000000001"
HEX = set("0123456789abcdef")


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ([f"sid={OK}"], OK),
        ([f"a=1; sid={OK}; b=2"], OK),
        ([f"a=1;sid={OK};b=2"], OK),  # no spaces
        ([f"  a=1 ;   sid =  {OK}  ; b=2 "], OK),  # whitespace around pairs and values is trimmed
        ([f"a=1\t;\tsid={OK}"], OK),  # tabs are whitespace too
        (["a=1", f"sid={OK}"], OK),  # several Cookie lines
        ([f"sid={OK}", "sid=second"], OK),  # first match across lines wins
        ([f"sid={OK}; sid=second"], OK),  # duplicate names in one line: first wins
        (["sid=", f"sid={OK}"], OK),  # an empty value is skipped; a later valid duplicate counts
        (["sid="], None),  # empty value counts as absent
        ([f'sid="{OK}"'], OK),  # quoted value is unquoted
        (['sid=""'], None),  # quoted empty
        (['sid="'], None),  # a lone quote is not a cookie-octet
        ([f'sid="{OK}'], None),  # unbalanced quote
        ([f'sid=" {OK} "'], None),  # space inside quotes is not a cookie-octet
        (["sid", f"x; sid; sid={OK}"], OK),  # pairs without '=' are skipped
        (["sid"], None),
        ([f"SID={OK}"], None),  # names compare exactly
        ([f"xsid={OK}; sidx={OK}"], None),  # no substring matches
        (["sid=é-ünïcode"], None),  # non-ASCII is not cookie-octets
        (["sid=a b"], None),  # inner space
        (["sid=a,b"], None),  # comma is excluded by RFC 6265
        (["sid=a\\b"], None),  # backslash too
        (["sid=a=b"], "a=b"),  # '=' is a cookie-octet; only the first '=' splits
        (["sid=" + "x" * 256], "x" * 256),  # 256 bytes is the limit
        (["sid=" + "x" * 257], None),  # longer counts as absent: re-session
        (["a=" + "y" * 8192 + f"; sid={OK}"], OK),  # an 8 KiB Cookie line
        ([";".join(f"c{i}=v{i}" for i in range(800)) + f"; sid={OK}"], OK),
        # RFC 6265 whitespace is SP and HTAB only: a control or non-ASCII space at the edge makes the value invalid,
        # it is not "whitespace" to trim (str.strip() would trim \x1f, \x85, \xa0 and accept the rest).
        ([f"sid={OK}\x1f"], None),
        ([f"sid=\xa0{OK}"], None),
        ([f"sid={OK}\x85"], None),
        ([f"\x1csid={OK}"], None),
        ([], None),
        ([""], None),
        ([";;;"], None),
    ],
)
def test_read_cookie(lines: list[str], expected: str | None) -> None:
    assert read_cookie(lines, "sid") == expected


@given(st.lists(st.text(max_size=300), max_size=4), st.sampled_from(["sid", "a", "ts-shop"]))
def test_read_cookie_never_raises_and_returns_only_valid_values(lines: list[str], name: str) -> None:
    value = read_cookie(lines, name)
    assert value is None or is_cookie_value(value)


@given(st.lists(st.tuples(st.sampled_from(["sid", "a", "b"]), st.text(max_size=20)), max_size=6))
def test_read_cookie_returns_the_first_valid_occurrence(pairs: list[tuple[str, str]]) -> None:
    line = "; ".join(f"{k}={v}" for k, v in pairs)
    assert read_cookie([line], "sid") == reference_read_cookie([line], "sid")


def reference_read_cookie(lines: list[str], name: str) -> str | None:
    """docs/spec.md §4 read literally: split every line into pairs, first valid match wins (the core's fast path must
    agree)."""
    for line in lines:
        for pair in line.split(";"):
            key, sep, value = pair.partition("=")
            if not sep or key.strip(" \t") != name:
                continue
            value = value.strip(" \t")
            if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
                value = value[1:-1]
            if is_cookie_value(value):
                return value
    return None


@settings(max_examples=500)
@given(
    st.lists(st.text(alphabet=' \t;="sidxé\x1f,', max_size=40), max_size=3),
    st.sampled_from(["sid", "s", "id", "i d", "sid;x", "sid=", " sid", "sid\t", '"sid']),
)
def test_read_cookie_agrees_with_the_literal_reading(lines: list[str], name: str) -> None:
    assert read_cookie(lines, name) == reference_read_cookie(lines, name)


def test_a_line_repeating_the_name_still_finds_the_pair() -> None:
    # 60 KB (Envoy's default header limit) of near-misses before the real pair; bench/bench_core.py times it.
    assert read_cookie(["sid" * 20_000 + "; sid=" + OK], "sid") == OK
    assert read_cookie(["sid" * 20_000], "sid") is None


def test_mint_format() -> None:
    assert mint_affinity_id(0x0193F1C2A4B5, 1) == "0193f1c2a4b5000000000001"
    value = AffinityMinter().mint()
    assert len(value) == 24 and set(value) <= HEX


def test_minter_uses_the_injected_clock_and_start() -> None:
    m = AffinityMinter(clock_ms=lambda: 1_700_000_000_000, start=41)
    assert m.mint() == f"{1_700_000_000_000:012x}{42:012x}"
    assert m.mint() == f"{1_700_000_000_000:012x}{43:012x}"


def test_counter_wraps_within_48_bits() -> None:
    m = AffinityMinter(clock_ms=lambda: 5, start=2**48 - 1)
    assert m.mint().endswith("000000000000")


def test_a_million_mints_are_unique_in_one_process() -> None:
    m = AffinityMinter(clock_ms=lambda: 1_700_000_000_000)  # a frozen clock: uniqueness must come from the counter
    values = {m.mint() for _ in range(1_000_000)}
    assert len(values) == 1_000_000
    assert all(len(v) == 24 and set(v) <= HEX for v in list(values)[:1000])


MINT_SCRIPT = textwrap.dedent(
    """
    from trafficsplit.core.model.cookie import AffinityMinter
    m = AffinityMinter(clock_ms=lambda: 1_700_000_000_000)  # the same millisecond in both processes
    print("\\n".join(m.mint() for _ in range(1000)))
    """
)


def test_two_processes_in_the_same_millisecond_mint_different_sequences() -> None:
    env = {"PYTHONPATH": ":".join(p for p in sys.path if p)}
    procs = [
        subprocess.Popen([sys.executable, "-c", MINT_SCRIPT], stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=60)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert all(len(o) == 1000 for o in outs)
    assert not set(outs[0]) & set(outs[1])


def test_render_set_cookie_defaults_and_attributes() -> None:
    assert render_set_cookie(CookieSettings(name="sid"), OK) == f"sid={OK}; Path=/; HttpOnly; SameSite=Lax"
    full = CookieSettings(
        name="sid",
        path="/app",
        max_age=3600,
        domain="example.com",
        secure=True,
        http_only=False,
        same_site=SameSite.NONE,
    )
    assert (
        render_set_cookie(full, OK) == f"sid={OK}; Path=/app; Max-Age=3600; Domain=example.com; Secure; SameSite=None"
    )


def test_partitioned_cookie_chips() -> None:
    # CHIPS: Partitioned (third-party contexts keyed by the top-level site); browsers require Secure with it.
    chips = CookieSettings(name="sid", secure=True, same_site=SameSite.NONE, partitioned=True)
    assert render_set_cookie(chips, OK) == f"sid={OK}; Path=/; Secure; HttpOnly; SameSite=None; Partitioned"
    with pytest.raises(SpecError, match="partitioned: Partitioned requires secure"):
        CookieSettings(name="sid", partitioned=True)


def test_a_minted_value_reads_back() -> None:
    value = AffinityMinter().mint()
    set_cookie = render_set_cookie(CookieSettings(name="sid"), value)
    # A browser sends back only the name=value part of Set-Cookie.
    assert read_cookie([set_cookie.split(";")[0]], "sid") == value
