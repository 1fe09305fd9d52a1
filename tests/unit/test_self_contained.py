"""The repository explains itself: no file cites the notes the project was designed from (they are not in the
repository, so a reader could not follow the pointer); the behaviour contract is docs/spec.md, the Envoy facts are in
docs/dataplane.md, and every `docs/spec.md §n` pointer names a section that exists. The LICENSE is the one pyproject
declares."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP_DIRS = {".git", ".venv", "venv", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis"}
SKIP_DIRS |= {"e2e-artifacts", "node_modules", "build", "dist"}
# The design notes' names, spelled in pieces so this file does not match itself.
_NOTES = "-" + "NOTES"
SPEC, ENVOY, ARCH = "SP" + "EC", "ENVOY" + _NOTES, "ARCHI" + "TECTURE"
OTHER_NOTES = ("ECOSYSTEM" + _NOTES, "LOCAL-NODE" + _NOTES)
CITATION = re.compile(
    rf"\b{SPEC}(?:\s*§|\s+\d|\.md\b|'s\b| vector)"  # the contract by section, by file, by possessive
    + "|"
    + "|".join(re.escape(n) for n in (ENVOY, *OTHER_NOTES))
    + rf"|\b{ARCH}\.md\b"  # upper case only: docs/architecture.md is the repository's own
    + "|/work/"
    + "shared"
)


def repository_text_files() -> list[Path]:
    out = []
    for path in ROOT.rglob("*"):
        if any(part in SKIP_DIRS for part in path.relative_to(ROOT).parts) or not path.is_file():
            continue
        if path.stat().st_size > 2_000_000:
            continue
        try:
            path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        out.append(path)
    return out


def test_no_file_cites_the_design_notes() -> None:
    files = repository_text_files()
    assert len(files) > 100 and ROOT / "docs" / "spec.md" in files  # the walk found the repository
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}"
        for path in files
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if CITATION.search(line)
    ]
    assert found == [], "cite docs/spec.md or docs/dataplane.md instead:\n" + "\n".join(found)


def test_the_pattern_catches_each_form() -> None:
    spec, envoy, arch = SPEC, ENVOY, ARCH
    for cited in (f"({spec} §2)", f"({spec} 5)", f"{spec}.md", f"{spec}'s figure", f"({envoy})", f"{arch}.md, layer"):
        assert CITATION.search(cited), cited
    for fine in ("docs/spec.md §2", "SPEC_FIELDS", "docs/architecture.md", "RESULT_UNSPECIFIED"):
        assert not CITATION.search(fine), fine


def test_every_spec_section_pointer_exists() -> None:
    sections = {int(m) for m in re.findall(r"^## (\d+)\. ", (ROOT / "docs" / "spec.md").read_text(), re.M)}
    assert sections == set(range(1, 9))
    pointer = re.compile(r"docs/spec\.md §(\d+)(?:\s*[–,-]\s*§?(\d+))?")
    bad = [
        f"{path.relative_to(ROOT)}: {m.group(0)}"
        for path in repository_text_files()
        for m in pointer.finditer(path.read_text(encoding="utf-8"))
        if {int(g) for g in m.groups() if g} - sections
    ]
    assert bad == []


def test_every_dataplane_section_pointer_exists() -> None:
    # A heading is quoted without its parenthesis: "Access log" for `## Access log (docs/spec.md §6 disclosure)`.
    headings = {
        re.sub(r"\s*\(.*\)$", "", h)
        for h in re.findall(r"^#+ (.+)$", (ROOT / "docs" / "dataplane.md").read_text(), re.M)
    }
    assert "Envoy behaviour this design relies on" in headings
    quoted = re.compile(r'docs/dataplane\.md, "([^"]+)"')
    bad = [
        f"{path.relative_to(ROOT)}: {m.group(1)}"
        for path in repository_text_files()
        for m in quoted.finditer(path.read_text(encoding="utf-8").replace("\n", " "))
        if " ".join(m.group(1).split()) not in headings
    ]
    assert bad == [], bad


def test_the_license_is_the_apache_2_0_text_pyproject_declares() -> None:
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == {"text": "Apache-2.0"}
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:5] == ["Apache", "License", "Version", "2.0,", "January"]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) == 202
