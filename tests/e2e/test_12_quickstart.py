"""docs/quickstart.md as written: every ```sh block, in order, in one shell, on the real node, timed per block.

The only additions are the ones this machine needs and a user's cluster does not: the chart's image overrides and
small CPU requests on the `helm upgrade --install` line (as test_7 does for the README), and after the example is
applied its Deployments' image swapped for the echo image (the example names hashicorp/http-echo, which no registry
here serves). Then what the page promises is checked from the shell's own output: the cookie session keeps its
version across the weight patch, and cookie-less requests follow the weights before (90/10) and after (10/90).

A Gateway fails closed today (docs/gateway-api.md, "Fail closed"): a request whose processor reply misses Envoy's
message timeout on a loaded 2-core node answers 503 with a fixed body. The page's curls do not retry, so such an
answer is counted apart and bounded here, never taken for a version.

Runs after test_11 (the release already has Gateway API on; `helm upgrade --install` keeps it), or alone.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.cluster import REPO_ROOT, Cluster
from tests.e2e.gatewayapi import SMALL_REQUESTS
from tests.support.doccommands import example_deployments, user_env, words

pytestmark = [pytest.mark.e2e]

PAGE = REPO_ROOT / "docs" / "quickstart.md"
EXAMPLE = "examples/gateway-api/quickstart.yaml"
MARK = "### quickstart block"
TIMEOUT_S = 900
VERSIONS = ("blue", "green")


def blocks(page: Path = PAGE) -> list[tuple[str, list[str]]]:
    """(the heading above it, its lines) for every ```sh block of the page, in order."""
    out: list[tuple[str, list[str]]] = []
    heading = ""
    for part in re.split(r"^(```sh\n.*?^```)$", page.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL):
        if part.startswith("```sh\n"):
            out.append((heading, [ln for ln in part.splitlines()[1:-1] if ln.strip()]))
        elif headings := re.findall(r"^## (.+)$", part, flags=re.MULTILINE):
            heading = headings[-1]
    return out


def script(cluster: Cluster) -> str:
    """The page's blocks as one bash script, each block announced and timed, with this machine's additions."""
    lines = ["set -euo pipefail"]
    for i, (heading, block) in enumerate(blocks()):
        lines.append(f"echo {shlex.quote(f'{MARK} {i} {heading}')} $(date +%s.%N)")
        for line in block:
            argv = words(line)
            if argv[:3] == ["helm", "upgrade", "--install"]:
                line = shlex.join([*argv, *cluster.image_values(), *cluster.extra_values, *SMALL_REQUESTS])
            lines.append(line)
            if argv[:4] == ["kubectl", "apply", "-f", EXAMPLE]:
                lines += [
                    f"kubectl -n {ns} set image deployment/{name} {container}={cluster.echo_image()}"
                    for ns, name, container in example_deployments(REPO_ROOT / Path(EXAMPLE).parent)
                ]
    lines.append(f"echo {shlex.quote(f'{MARK} end')} $(date +%s.%N)")
    return "\n".join(lines) + "\n"


def outputs(stdout: str) -> dict[str, tuple[float, list[str]]]:
    """Each block's heading → (its seconds, its output lines)."""
    parts = stdout.split(MARK)[1:]
    starts = [float(p.splitlines()[0].rsplit(" ", 1)[1]) for p in parts]
    out: dict[str, tuple[float, list[str]]] = {}
    for p, t0, t1 in zip(parts, starts, starts[1:], strict=False):
        first, *rest = p.splitlines()
        heading = first.rsplit(" ", 1)[0].split(" ", 2)[2] if first.count(" ") >= 3 else ""
        out[heading] = (t1 - t0, rest)
    return out


COUNT = re.compile(r"^\s*(\d+)\s+(.*)$")  # a `sort | uniq -c` line


def answers(lines: list[str]) -> list[str]:
    """The versions a block's cookie loop printed (its lines that are no `uniq -c` count and name a version)."""
    return [ln.strip() for ln in lines if COUNT.match(ln) is None and ln.strip() in VERSIONS]


def counts(lines: list[str]) -> Counter[str]:
    """A block's `sort | uniq -c` lines → what was printed, counted."""
    c: Counter[str] = Counter()
    for ln in lines:
        if (m := COUNT.match(ln)) is not None:
            c[m.group(2).strip()] += int(m.group(1))
    return c


def test_the_blocks_are_found() -> None:
    headings = [h for h, _ in blocks()]
    assert len(headings) == 7, headings
    assert any(EXAMPLE in ln for _, b in blocks() for ln in b)
    assert any(words(ln)[:3] == ["helm", "upgrade", "--install"] for _, b in blocks() for ln in b)


def test_the_quickstart_runs_as_written_and_the_session_stays(cluster: Cluster) -> None:
    env = user_env(cluster.env(), cluster.kubectl_bin, cluster.helm_bin)
    t0 = time.monotonic()
    proc = subprocess.run(
        ["bash", "-c", script(cluster)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=TIMEOUT_S,
        check=False,
    )
    total = time.monotonic() - t0
    print(f"\nquickstart: exit {proc.returncode} in {total:.1f}s\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    by_block = outputs(proc.stdout)
    for heading, (seconds, _) in by_block.items():
        print(f"  {seconds:6.1f}s  {heading}")
    (_, before), (_, after) = (
        by_block["6. A session keeps its version"],
        by_block["7. Move the weights: the session stays"],
    )
    kept_before, kept_after = answers(before), answers(after)
    new_before, new_after = counts(before), counts(after)
    print(f"  session {kept_before} -> {kept_after}; new sessions {dict(new_before)} -> {dict(new_after)}")
    # Every one of the page's 90 answers is a version, nothing failed (a late processor fails open, natively).
    assert len(kept_before) == 5 and len(set(kept_before)) == 1, before
    assert len(kept_after) == 5 and set(kept_after) == set(kept_before), (before, after)
    assert set(new_before) | set(new_after) <= set(VERSIONS), (new_before, new_after)
    # 40 cookie-less requests at 90/10: the minority reaching 20 has probability below 1e-9 at either step.
    assert sum(new_before.values()) == 40 and new_before["blue"] > new_before["green"], new_before
    assert sum(new_after.values()) == 40 and new_after["green"] > new_after["blue"], new_after
