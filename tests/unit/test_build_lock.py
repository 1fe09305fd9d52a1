"""hack/build-controlplane.sh's `build` (which every build script sources): two runs wanting the same binary at once
build it once. make test starts the slow progressive-delivery builds in the background while the unit and
integration tiers run, and the e2e fixture asks for the same binaries when it starts the node: it must wait for the
background build, not start a second one beside it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A fake component whose "compile" takes a second and counts itself; `answers_version` runs it with --version.
SCRIPT = """
set -euo pipefail
GO=/bin/true source "$ROOT/hack/build-controlplane.sh"
build_fake() {
  local tmp="$1"
  echo built >>"$COUNT"
  sleep 1
  mkdir -p "$tmp/out"
  printf '#!/bin/sh\\nexit 0\\n' >"$tmp/out/fake"
  chmod +x "$tmp/out/fake"
}
build fake v1 build_fake
"""


@pytest.mark.skipif(shutil.which("flock") is None, reason="flock (util-linux) is not installed")
def test_two_runs_at_once_build_the_binary_once(tmp_path: Path) -> None:
    env = {**os.environ, "ROOT": str(ROOT), "TRAFFICSPLIT_CACHE": str(tmp_path / "cache"), "COUNT": str(tmp_path / "n")}
    runs = [subprocess.Popen(["bash", "-c", SCRIPT], env=env, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    logs = [r.communicate(timeout=60)[1] for r in runs]
    assert [r.returncode for r in runs] == [0, 0], logs
    assert (tmp_path / "n").read_text().splitlines() == ["built"], logs
    assert sum("fake v1: cached" in log for log in logs) == 1, logs
    assert os.access(tmp_path / "cache/bin/fake-v1/fake", os.X_OK)
