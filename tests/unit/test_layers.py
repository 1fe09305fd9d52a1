"""The pure core stays pure: every import in src/trafficsplit/core/**/*.py must be on an allow-list.

import-linter (.importlinter: the core's purity, the core's plan inside it, the layers core < v1alpha1 < wire < shells,
the shells' independence) checks the import graph; this test checks the source text itself, so a lazy import inside
a function, `__import__`, or a builtin like `open` cannot slip past either. An allow-list, not a deny-list: a new
dependency of the core is a decision someone must write down here.
"""

from __future__ import annotations

import ast
import configparser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "src" / "trafficsplit" / "core"

# Standard-library modules that do no I/O of their own (time: the minting clock; secrets: the minter's random start;
# hmac, hashlib, base64: the persistent cookie's seal), and re2 (google-re2: the RE2 matching engine, pure
# computation; core/model/regex.py says why not `re`).
ALLOWED = frozenset(
    {
        "__future__",
        "abc",
        "base64",
        "bisect",
        "collections",
        "collections.abc",
        "dataclasses",
        "difflib",
        "enum",
        "fractions",
        "functools",
        "hashlib",
        "hmac",
        "ipaddress",  # parsing and canonical forms of IP literals (a Gateway's static addresses)
        "itertools",
        "json",  # serialisation of values only (the assignment digest's canonical form); loads/dumps, never a file
        "math",
        "operator",
        "random",
        "re",
        "re2",
        "secrets",
        "string",
        "time",
        "types",
        "typing",
    }
)
FORBIDDEN_CALLS = frozenset({"open", "__import__", "exec", "eval", "compile", "input", "breakpoint"})


def violations(source: str, filename: str = "<core>") -> list[str]:
    """Every import outside the allow-list and every call of an I/O or dynamic-code builtin, with its line."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename)):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative imports stay inside trafficsplit.core
                continue
            modules = [node.module or ""]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            found.append(f"{filename}:{node.lineno}: calls {node.func.id}()")
        for m in modules:
            if m not in ALLOWED and m != "trafficsplit.core" and not m.startswith("trafficsplit.core."):
                found.append(f"{filename}:{getattr(node, 'lineno', 0)}: imports {m}")
    return found


CORE_FILES = sorted(CORE.rglob("*.py"))


def test_core_files_are_found() -> None:
    assert {str(p.relative_to(CORE)) for p in CORE_FILES} >= {
        "model/hashing.py",
        "model/weights.py",
        "model/cookie.py",
        "decide/split.py",
        "control/plan.py",
        "model/rules.py",
        "control/resolve.py",
        "control/reconcile.py",
        "control/status.py",
        "model/vocabulary.py",
    }


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(CORE)))
def test_core_module_imports_only_pure_modules(path: Path) -> None:
    assert violations(path.read_text(encoding="utf-8"), str(path.relative_to(CORE))) == []


@pytest.mark.parametrize(
    "source",
    [
        "import socket",
        "import os.path",
        "from os import path",
        "import asyncio",
        "import kopf",
        "import grpc",
        "from kubernetes import client",
        "from trafficsplit.wire import x",
        "from trafficsplit.extproc import server",
        "def f():\n    import io\n",
        "def f():\n    return open('x')\n",
        "m = __import__('socket')",
        "import importlib",
    ],
)
def test_the_checker_catches(source: str) -> None:
    assert violations(source)


def test_the_checker_allows_the_core_itself() -> None:
    assert violations("from trafficsplit.core.model.hashing import key_hash\nimport re\nfrom . import errors") == []


def test_the_plan_is_the_packages() -> None:
    """`core-plan` names the core's packages, and `exhaustive` makes import-linter refuse a module outside them; this
    holds the folders and the contract to each other, so a new package cannot be left out of the plan either."""
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter", encoding="utf-8")
    contract = config["importlinter:contract:core-plan"]
    layers = [line.strip() for line in contract["layers"].splitlines() if line.strip()]
    assert contract["containers"].split() == ["trafficsplit.core"]
    assert contract.getboolean("exhaustive")
    assert sorted(layers) == sorted(p.name for p in CORE.iterdir() if (p / "__init__.py").is_file())
    assert {p.name for p in CORE.glob("*.py")} == {"__init__.py"}, "a module directly in the core has no layer"
