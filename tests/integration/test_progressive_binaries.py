"""The progressive-delivery binaries hack/build-argo-rollouts.sh and hack/build-flagger.sh build are the pinned
releases and run.

Each binary is asked of its script (``--print-env``), as the e2e tier's node asks for it: cached, that costs the
module lookup; on a cold `make test` the script waits on the lock of the background build that is compiling it
(hack/build-controlplane.sh ``build``) and then finds it, so the test runs rather than skipping."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.support.controlplane import REPO_ROOT
from tests.support.localnode import print_env


def _pin(script: str, var: str) -> str:
    m = re.search(rf"^{var}=(v[0-9.]+)$", (REPO_ROOT / "hack" / script).read_text(encoding="utf-8"), re.M)
    assert m, f"hack/{script} has no {var}"
    return m.group(1)


def _binary(script: str, var: str, name: str, version: str) -> Path:
    path = Path(print_env(script)[var])
    assert path.parent.name == f"{name}-{version}", path  # the cache directory names the pinned version
    return path


def test_rollouts_controller_is_the_pinned_release() -> None:
    version = _pin("build-argo-rollouts.sh", "ARGO_ROLLOUTS_VERSION")
    path = _binary("build-argo-rollouts.sh", "ROLLOUTS_CONTROLLER", "rollouts-controller", version)
    out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == version  # the release's string: tag set, tree clean (as upstream's Makefile)


def test_flagger_is_the_pinned_release() -> None:
    version = _pin("build-flagger.sh", "FLAGGER_VERSION")
    path = _binary("build-flagger.sh", "FLAGGER", "flagger", version)
    out = subprocess.run([str(path), "-version"], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split()[:3] == ["Flagger", "version", version.removeprefix("v")]
