"""The committed generated code for protos/ must be what hack/gen-protos.sh produces now (see docs/protos.md)."""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ("publish_pb2.py", "publish_pb2.pyi", "publish_pb2_grpc.py")


def test_committed_generated_code_matches_the_proto(tmp_path: Path) -> None:
    subprocess.run(["bash", str(ROOT / "hack/gen-protos.sh"), str(tmp_path)], check=True, env=None)
    fresh = tmp_path / "trafficsplit/v1alpha1"
    committed = ROOT / "src/trafficsplit/v1alpha1"
    stale = [name for name in GENERATED if not filecmp.cmp(fresh / name, committed / name, shallow=False)]
    assert not stale, f"run hack/gen-protos.sh and commit: {stale} differ from protos/"


def test_generated_code_imports_under_the_project_namespace() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from trafficsplit.v1alpha1 import publish_pb2_grpc; print('ok')"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "src")},
    )
    assert out.stdout.strip() == "ok"
