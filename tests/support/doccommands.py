"""The shell commands the user-facing text tells a new user to run, extracted so that tests check and run them
verbatim: the README's "On a cluster" block and the chart's NOTES.txt as `helm install` prints it.

Two tiers use this: tests/unit/test_doc_commands.py checks, without a cluster, that every `kubectl trafficsplit` and
`kubectl patch trafficsplit` command names a namespace, a split and backends that examples/kubernetes/ creates and
that the CLI's own rules accept; tests/e2e/test_7_readme.py runs them on a real node.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import pty
import re
import shlex
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
EXAMPLES = ROOT / "examples" / "kubernetes"
CLUSTER_SECTION = "On a cluster"
SETUP_SECTION = "Set-up on a fresh machine"
# What a NOTES.txt command line starts with (after its indentation); prose lines never start with these words.
NOTES_COMMAND_WORDS = ("kubectl ", "curl ", "export ", "trafficsplit ", "helm ")
# A NOTES.txt is a few dozen lines; anything much larger is not the chart's notes.
MAX_NOTES_CHARS = 64_000


def markdown_section(markdown: str, heading: str) -> str:
    """The text under `## heading` up to the next heading of level 1 or 2 (outside a fenced block: a shell comment
    there, `# flip: ...`, is no heading)."""
    m = re.search(rf"^## {re.escape(heading)}\s*$", markdown, flags=re.MULTILINE)
    if m is None:
        raise ValueError(f"no '## {heading}' section")
    rest = markdown[m.end() :]
    fenced, offset = False, 0
    for line in rest.splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,2} ", line):
            return rest[:offset]
        offset += len(line)
    return rest


def first_sh_block(text: str) -> list[str]:
    """The non-empty lines of the first ```sh fenced block, one command each."""
    m = re.search(r"^```sh\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
    if m is None:
        raise ValueError("no ```sh block")
    return [line.strip() for line in m.group(1).splitlines() if line.strip()]


def readme_cluster_commands(readme: Path = README) -> list[str]:
    return first_sh_block(markdown_section(readme.read_text(encoding="utf-8"), CLUSTER_SECTION))


def readme_demo_lines(readme: Path = README) -> list[str]:
    """The block after `make demo` prints ready (the set-up section's first ```sh block): curl lines, the flip as a
    comment (an edit, not a command), the plan line. hack/ci-demo.sh runs them verbatim on a fresh clone."""
    return first_sh_block(markdown_section(readme.read_text(encoding="utf-8"), SETUP_SECTION))


@dataclass(frozen=True)
class DemoFlip:
    """The README's flip comment: in `file`, set `weights` (backend -> weight); a session on `source` then lands on
    `lands_on`."""

    file: str
    weights: Mapping[str, int]
    source: str
    lands_on: str


FLIP_RE = re.compile(
    r"^# flip: in (?P<file>\S+) set (?P<a>[\w-]+) to (?P<aw>\d+) and (?P<b>[\w-]+) to (?P<bw>\d+), save; "
    r"the same session now lands on (?P<dst>[\w-]+)$"
)


def demo_flip(lines: Sequence[str]) -> DemoFlip:
    """The flip comment among the README's demo lines (ValueError when there is none, or it reads otherwise)."""
    for line in lines:
        m = FLIP_RE.match(line)
        if m is not None:
            weights = {m["a"]: int(m["aw"]), m["b"]: int(m["bw"])}
            source = next(name for name, w in weights.items() if w == 0)
            return DemoFlip(m["file"], weights, source, m["dst"])
    raise ValueError(f"no flip comment matching {FLIP_RE.pattern!r} in {list(lines)}")


def notes_commands(notes: str) -> list[str]:
    """The command lines of rendered notes: indented lines that start with a command word (see NOTES_COMMAND_WORDS)."""
    if len(notes) > MAX_NOTES_CHARS:
        raise ValueError(f"notes of {len(notes)} characters: not a NOTES.txt")
    return [
        line.strip()
        for line in notes.splitlines()
        if line.startswith("  ") and line.strip().startswith(NOTES_COMMAND_WORDS)
    ]


def words(command: str) -> list[str]:
    """A command line as the shell splits it, without its trailing comment and background `&`."""
    parts = shlex.split(command, comments=True)
    return parts[:-1] if parts and parts[-1] == "&" else parts


def option(argv: Sequence[str], *names: str) -> str | None:
    """The value of `-n X`, `--namespace X` or `--namespace=X` style options, else None."""
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if name.startswith("--") and arg.startswith(name + "="):
                return arg[len(name) + 1 :]
    return None


# --- running them as a user's shell would ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Ran:
    command: str
    returncode: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return f"$ {self.command}\n(exit {self.returncode})\n{self.stdout}\n{self.stderr}"


def user_env(base: Mapping[str, str], kubectl_bin: str | Path, helm_bin: str | Path) -> dict[str, str]:
    """A user's shell for `base` (its KUBECONFIG and helm homes): this kubectl and helm first on PATH, then the
    running Python's `trafficsplit` and `kubectl-trafficsplit` (the plugin kubectl finds on PATH), importing this
    tree's code."""
    env = dict(base)
    # A bare name (kind's runner: `kubectl` from PATH) adds no directory.
    tools = [Path(b) for b in (kubectl_bin, helm_bin) if Path(b).is_absolute()]
    path = [*(str(t.parent) for t in tools), str(Path(sys.executable).parent)]
    env["PATH"] = os.pathsep.join([*path, env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(str(ROOT / p) for p in ("src", "operator", "extproc", "."))
    return env


def run_line(command: str, env: Mapping[str, str], timeout: float, answer: str | None = None) -> Ran:
    """One command line in bash from the repository root. `answer` is typed on a pseudo-terminal given as stdin (a
    command that asks before it acts, as set-weights does, sees a terminal, as it would for a user)."""
    if answer is None:
        proc = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, env=dict(env), cwd=ROOT, timeout=timeout
        )
        return Ran(command, proc.returncode, proc.stdout, proc.stderr)
    primary, secondary = pty.openpty()
    try:
        os.write(primary, answer.encode())
        proc = subprocess.run(
            ["bash", "-c", command],
            stdin=secondary,
            capture_output=True,
            text=True,
            env=dict(env),
            cwd=ROOT,
            timeout=timeout,
        )
    finally:
        os.close(secondary)
        os.close(primary)
    return Ran(command, proc.returncode, proc.stdout, proc.stderr)


def example_deployments(directory: Path = EXAMPLES) -> list[tuple[str, str, str]]:
    """(namespace, deployment, container) of every Deployment the examples create."""
    out = []
    for path in sorted(directory.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc and doc["kind"] == "Deployment":
                for c in doc["spec"]["template"]["spec"]["containers"]:
                    out.append((doc["metadata"]["namespace"], doc["metadata"]["name"], c["name"]))
    return out


# --- what examples/kubernetes/ creates -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Examples:
    """The objects examples/kubernetes/*.yaml create, keyed by (namespace, name)."""

    splits: Mapping[tuple[str, str], Mapping[str, Any]]
    services: frozenset[tuple[str, str]]
    namespaces: frozenset[str]


def load_examples(directory: Path = EXAMPLES) -> Examples:
    splits: dict[tuple[str, str], Mapping[str, Any]] = {}
    services: set[tuple[str, str]] = set()
    namespaces: set[str] = set()
    for path in sorted(directory.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if not doc:
                continue
            meta = doc["metadata"]
            if doc["kind"] == "Namespace":
                namespaces.add(meta["name"])
            elif doc["kind"] == "Service":
                services.add((meta["namespace"], meta["name"]))
            elif doc["kind"] == "TrafficSplit":
                splits[(meta["namespace"], meta["name"])] = doc
    return Examples(splits=splits, services=frozenset(services), namespaces=frozenset(namespaces))


# --- checking a command against the examples -------------------------------------------------------------------------


def _json_patch_replace(doc: Any, ops: Iterable[Mapping[str, Any]]) -> Any:
    """The `test` and `replace` operations of an RFC 6902 patch (all a weight change needs); others are refused."""
    doc = json.loads(json.dumps(doc))
    for op in ops:
        *parents, last = [p for p in str(op["path"]).split("/")[1:]]
        node = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        key: int | str = int(last) if isinstance(node, list) else last
        if op["op"] == "test":
            if node[key] != op["value"]:
                raise ValueError(f"test {op['path']}: {node[key]!r} != {op['value']!r}")
        elif op["op"] == "replace":
            node[key] = op["value"]
        else:
            raise ValueError(f"op {op['op']!r}: only test and replace are checked here")
    return doc


def _plugin_args(argv: Sequence[str]) -> argparse.Namespace | str:
    """The kubectl plugin's arguments as its own parser reads them, or why it refuses them."""
    from trafficsplit.cli.main import build_parser

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return build_parser().parse_args(list(argv))
    except SystemExit:
        return " ".join(err.getvalue().split()) or "refused by the CLI's parser"


def split_problems(command: str, examples: Examples) -> Iterator[str]:
    """Why a `kubectl trafficsplit ...` or `kubectl patch trafficsplit ...` line would fail on the examples (nothing
    for other commands). The CLI's own functions judge the plugin's arguments, so the rules cannot differ."""
    from trafficsplit.cli.common import UsageError
    from trafficsplit.cli.flip import flipped
    from trafficsplit.cli.kplan import merge, parse_assignments, spec_backends
    from trafficsplit.cli.kube import Ref
    from trafficsplit.core.model.errors import SpecError

    argv = words(command)
    if argv[:2] == ["kubectl", "trafficsplit"]:
        parsed = _plugin_args(argv[2:])
        if isinstance(parsed, str):
            yield f"{command!r}: {parsed}"
            return
        verb, name, namespace = parsed.command, parsed.name, parsed.namespace
        assignments: str | None = getattr(parsed, "assignments", None)
    elif argv[:1] == ["kubectl"] and "patch" in argv and "trafficsplit" in argv:
        verb, name, namespace = "patch", argv[argv.index("trafficsplit") + 1], option(argv, "-n", "--namespace")
        assignments = None
    else:
        return
    if namespace is None:
        yield f"{command!r}: no -n NAMESPACE (examples/kubernetes/ is in namespace(s) {sorted(examples.namespaces)})"
        return
    doc = examples.splits.get((namespace, name))
    if doc is None:
        yield f"{command!r}: examples/kubernetes/ creates no TrafficSplit {namespace}/{name}"
        return
    ref = Ref(namespace, name)
    before = spec_backends(ref, doc)
    try:
        if verb == "flip":
            after = flipped(ref, before)
        elif verb in ("plan", "set-weights"):
            if assignments is None:
                yield f"{command!r}: no weights given"
                return
            after = merge(ref, before, parse_assignments(assignments), option="weights")
        elif verb == "patch":
            patched = _json_patch_replace(doc, json.loads(option(argv, "-p", "--patch") or "[]"))
            after = spec_backends(ref, patched)
        else:
            return
    except (UsageError, SpecError, ValueError, KeyError, IndexError) as exc:
        yield f"{command!r}: {exc}"
        return
    total_before, total_after = sum(b.weight for b in before), sum(b.weight for b in after)
    if total_after != total_before:
        # The documented advice (docs/displacement.md): a change of the total re-draws every session's slot.
        yield f"{command!r}: changes the total weight {total_before} -> {total_after}"
