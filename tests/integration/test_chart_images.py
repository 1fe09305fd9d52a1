"""What the images install: both Dockerfiles run `pip install .`, so the wheel built from this tree must carry every
module the entry points import — across the three source roots of the `trafficsplit` namespace — and no
`trafficsplit/__init__.py` that would hide two of them. No Docker engine exists here; this builds the same wheel.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    out = tmp_path_factory.mktemp("wheel")
    # A copy of the tree keeps the build's egg-info and build/ out of the work tree.
    src = tmp_path_factory.mktemp("src")
    for rel in ("pyproject.toml", "README.md"):
        (src / rel).write_bytes((ROOT / rel).read_bytes())
    for root in ("src", "operator", "extproc"):
        for path in (ROOT / root).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and not path.name.endswith(".pyc"):
                target = src / path.relative_to(ROOT)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(path.read_bytes())
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = out.glob("trafficsplit-*.whl")
    with zipfile.ZipFile(wheel) as z:
        return set(z.namelist())


@pytest.mark.parametrize(
    "module",
    [
        "trafficsplit/operator/__main__.py",
        "trafficsplit/operator/main.py",
        "trafficsplit/extproc/__main__.py",
        "trafficsplit/extproc/server.py",
        "trafficsplit/core/decide/split.py",
        "trafficsplit/wire/bootstrap.py",
        "trafficsplit/v1alpha1/publish_pb2.py",
    ],
)
def test_wheel_carries_the_entry_points_and_what_they_import(wheel_files: set[str], module: str) -> None:
    assert module in wheel_files


def test_wheel_keeps_trafficsplit_a_namespace_package(wheel_files: set[str]) -> None:
    assert "trafficsplit/__init__.py" not in wheel_files
    # Nothing outside the project's namespace (a top-level `operator` package would shadow the standard library).
    tops = {name.split("/", 1)[0] for name in wheel_files if not name.split("/", 1)[0].endswith(".dist-info")}
    assert tops == {"trafficsplit"}, tops
