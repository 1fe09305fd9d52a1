"""The two images run the same entry modules the tests run, as a numeric non-root user, from a slim final stage.

No Docker engine exists here, so the Dockerfiles are parsed, not built: the final stage's ENTRYPOINT + CMD must be
exactly `python -m <module>` for a module that exists in this tree with a `__main__`, and its USER must be a numeric
UID other than 0 (Kubernetes' runAsNonRoot can only verify a numeric one).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IMAGES = {
    "operator/Dockerfile": "trafficsplit.operator",
    "extproc/Dockerfile": "trafficsplit.extproc",
}
# Packages that mean a compiler or package manager would ship in the final image.
BUILD_TOOLS = re.compile(r"\b(gcc|g\+\+|build-essential|make|apt-get|apk|git|curl|wget)\b")


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def last(self, keyword: str) -> str | None:
        found = [arg for kw, arg in self.instructions if kw == keyword]
        return found[-1] if found else None


def parse_dockerfile(text: str) -> list[Stage]:
    """Stages of a Dockerfile: logical lines (continuations joined, comment lines inside them dropped, as BuildKit
    does), split at each FROM."""
    logical: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    if current:
        logical.append(current)
    stages: list[Stage] = []
    for line in logical:
        keyword, _, arg = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            words = arg.split()
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base=words[0], name=name))
        elif stages:
            stages[-1].instructions.append((keyword, arg.strip()))
    return stages


def exec_form(arg: str | None) -> list[str]:
    """An ENTRYPOINT/CMD argument as argv. Shell form runs under /bin/sh -c, which breaks signal delivery to Python
    (PID 1 would be the shell), so only the JSON exec form is accepted."""
    if arg is None:
        return []
    value = json.loads(arg)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), f"not an exec form: {arg}"
    return list(value)


def test_parser_joins_continuations_and_splits_stages() -> None:
    stages = parse_dockerfile(
        'ARG X=1\nFROM a:1 AS build\nRUN one \\\n # dropped\n two\nFROM a:1\nUSER 5:5\nENTRYPOINT ["x"]\n'
    )
    assert [(s.base, s.name) for s in stages] == [("a:1", "build"), ("a:1", None)]
    assert stages[0].instructions == [("RUN", "one  two")]
    assert stages[1].last("USER") == "5:5"
    assert exec_form(stages[1].last("ENTRYPOINT")) == ["x"]
    with pytest.raises(json.JSONDecodeError):
        exec_form("python -m x")


@pytest.mark.parametrize(("dockerfile", "module"), IMAGES.items())
def test_entry_point_is_the_module_the_tests_run(dockerfile: str, module: str) -> None:
    final = parse_dockerfile((ROOT / dockerfile).read_text())[-1]
    argv = exec_form(final.last("ENTRYPOINT")) + exec_form(final.last("CMD"))
    assert argv == ["python", "-m", module], argv
    # The module must exist here and be runnable with -m (a package needs __main__).
    assert importlib.util.find_spec(f"{module}.__main__") is not None, f"{module}.__main__ is missing"


@pytest.mark.parametrize("dockerfile", IMAGES)
def test_final_stage_runs_as_a_numeric_non_root_user(dockerfile: str) -> None:
    final = parse_dockerfile((ROOT / dockerfile).read_text())[-1]
    user = final.last("USER")
    assert user is not None, "the final stage sets no USER: it would run as root"
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0, f"USER {user}: the UID must be numeric and not 0"
    assert not gid or (gid.isdigit() and int(gid) != 0), f"USER {user}: the GID must be numeric and not 0"
    # The chart's securityContext runs the container as the same UID; the two must not drift.
    values = (ROOT / "charts/trafficsplit/values.yaml").read_text()
    assert re.search(rf"^\s*appUser: {uid}$", values, re.M), f"values.yaml securityContext.appUser is not {uid}"


@pytest.mark.parametrize("dockerfile", IMAGES)
def test_multi_stage_with_a_slim_final_stage_and_no_build_tools(dockerfile: str) -> None:
    text = (ROOT / dockerfile).read_text()
    stages = parse_dockerfile(text)
    assert len(stages) >= 2, "a single stage would ship pip's build environment"
    final = stages[-1]
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, re.M))
    base = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), final.base)
    assert "slim" in base or "distroless" in base, f"final base {base} is not a slim image"
    for kw, arg in final.instructions:
        if kw == "RUN":
            assert not BUILD_TOOLS.search(arg), f"final stage installs build tools: RUN {arg}"
        if kw == "COPY":
            words = shlex.split(arg)
            assert any(w.startswith("--from=") for w in words), f"final stage copies from the context: COPY {arg}"
