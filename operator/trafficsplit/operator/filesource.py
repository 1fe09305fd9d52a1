"""Local mode: the same compile and publish path, fed from a directory of TrafficSplit YAML instead of the API server.

Why polling: the directory is re-scanned every `interval` (0.5 s) by mtime and size, with no inotify dependency, so
it works on any filesystem and in any container. A file is the unit of validity: a file with any invalid document is
reported (log, with the core's field messages) and skipped, and its last good content keeps serving.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trafficsplit.core.errors import SpecError
from trafficsplit.core.resolve import SplitObject
from trafficsplit.core.spec import parse_split

log = logging.getLogger("trafficsplit.operator.filesource")

SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True, slots=True)
class Loaded:
    splits: tuple[SplitObject, ...]
    problems: tuple[str, ...]


def parse_documents(text: str, source: str) -> Loaded:
    """The TrafficSplits in one file, each validated by the core; problems name the file, document and field."""
    problems: list[str] = []
    splits: list[SplitObject] = []
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        return Loaded((), (f"{source}: not YAML: {exc}",))
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, Mapping) or doc.get("kind") != "TrafficSplit":
            continue  # other kinds (Services, comments-only docs) may share the directory
        meta = doc.get("metadata") or {}
        name = meta.get("name")
        ns = meta.get("namespace") or "default"
        where = f"{source}[{i}]"
        if not isinstance(name, str) or not name:
            problems.append(f"{where}: metadata.name: required")
            continue
        spec: Any = doc.get("spec") or {}
        try:
            parse_split(str(ns), name, spec)
        except SpecError as exc:
            problems.extend(f"{where} {ns}/{name}: {p}" for p in exc.problems)
            continue
        # created orders splits for host conflicts: file name, then position in the file.
        splits.append(SplitObject(str(ns), name, f"file:{source}#{i}", 1, f"{source}#{i:04d}", dict(spec), {}))
    return Loaded(tuple(splits), tuple(problems))


def scan(directory: Path) -> dict[Path, tuple[int, int]]:
    out: dict[Path, tuple[int, int]] = {}
    for p in sorted(directory.iterdir()) if directory.is_dir() else []:
        if p.suffix in SUFFIXES and p.is_file():
            st = p.stat()
            out[p] = (st.st_mtime_ns, st.st_size)
    return out


class FileSource:
    """Keeps `splits` equal to the directory's last good content; `on_change` is called when it changed."""

    def __init__(self, directory: Path, interval: float = 0.5) -> None:
        self.directory = directory
        self.interval = interval
        self._seen: dict[Path, tuple[int, int]] = {}
        self._good: dict[Path, tuple[SplitObject, ...]] = {}
        self.errors: dict[Path, tuple[str, ...]] = {}

    def reload(self) -> bool:
        """One scan; True when the set of splits may have changed."""
        now = scan(self.directory)
        if now == self._seen:
            return False
        changed = False
        for p in [p for p in self._good if p not in now]:
            del self._good[p]
            self.errors.pop(p, None)
            changed = True
        for p, stamp in now.items():
            if self._seen.get(p) == stamp:
                continue
            try:
                loaded = parse_documents(p.read_text(), p.name)
            except OSError as exc:
                loaded = Loaded((), (f"{p.name}: {exc}",))
            if loaded.problems:
                self.errors[p] = loaded.problems
                for msg in loaded.problems:
                    log.error("skipped %s", msg)
                if p in self._good:
                    log.error("%s: keeps serving its last good content", p.name)
                continue
            self.errors.pop(p, None)
            self._good[p] = loaded.splits
            changed = True
        self._seen = now
        return changed

    def splits(self) -> dict[tuple[str, str], SplitObject]:
        out: dict[tuple[str, str], SplitObject] = {}
        for p in sorted(self._good):
            for s in self._good[p]:
                if (s.namespace, s.name) in out:
                    log.warning("%s: %s is also defined in an earlier file; this one wins", p.name, s.key)
                out[(s.namespace, s.name)] = s
        return out

    async def watch(self, on_change: Any) -> None:
        while True:
            try:
                if self.reload():
                    on_change(self.splits())
            except Exception:  # keep polling: a transient read error must not stop local mode
                log.exception("file source scan failed")
            await asyncio.sleep(self.interval)
