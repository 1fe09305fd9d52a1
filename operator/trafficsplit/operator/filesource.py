"""Local mode: the same compile and publish path, fed from a directory of TrafficSplit YAML instead of the API server.

Why polling: the directory is re-scanned every `interval` (0.5 s) by mtime and size, with no inotify dependency, so
it works on any filesystem and in any container. A file is the unit of validity: a file with any invalid document
(not UTF-8, not YAML, a bad field, an unknown field, a namespace or name the API server would refuse) is reported
(log, with the file name and the core's field messages) and skipped, its last good content keeps serving, and the
other files go on being read.

Debounce (`settle`, 1 s): a file is read only once it has not changed for `settle` seconds (its mtime that old), so a
file written in two chunks is never published half-written; a file that disappears is withdrawn only after it has
been missing for `settle` seconds, so an editor's delete-and-rewrite does not withdraw its splits. The clock is the
wall clock, as file mtimes are.

Identity: one namespace/name is defined by one file. The first file (by name) keeps it; a later document with the same
namespace/name is refused with an error naming both files.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trafficsplit.core.resolve import SplitObject
from trafficsplit.core.status import StatusResult
from trafficsplit.core.vocabulary import ConditionType, Reason

log = logging.getLogger("trafficsplit.operator.filesource")

SUFFIXES = (".yaml", ".yml")
MAX_FILE_BYTES = 1 << 20  # a TrafficSplit is a few KB; a bigger file is a mistake, not a spec


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
        where = f"{source}[{i}]"
        meta = doc.get("metadata")
        if meta is None:
            meta = {}
        if not isinstance(meta, Mapping):
            problems.append(f"{where}: metadata: expected an object, got {type(meta).__name__}")
            continue
        name = meta.get("name")
        ns = meta.get("namespace") or "default"
        if not isinstance(name, str) or not name:
            problems.append(f"{where}: metadata.name: required")
            continue
        if not isinstance(ns, str):
            problems.append(f"{where}: metadata.namespace: expected a string, got {type(ns).__name__}")
            continue
        spec: Any = doc.get("spec") or {}
        obj = SplitObject(
            namespace=ns,
            name=name,
            uid=f"file:{source}#{i}",
            generation=1,
            created=f"{source}#{i:04d}",  # orders splits for host conflicts: file name, then position in the file
            spec=dict(spec) if isinstance(spec, Mapping) else spec,  # not an object: the parser names it
            status={},
        )
        if obj.problems:  # the object parses its spec once, with the parser every source uses
            problems.extend(f"{where} {ns}/{name}: {p}" for p in obj.problems)
            continue
        splits.append(obj)
    return Loaded(tuple(splits), tuple(problems))


def read_file(path: Path) -> Loaded:
    """One file, read and parsed; every failure is a problem naming the file, never an exception."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return Loaded((), (f"{path.name}: cannot read: {exc}",))
    if len(data) > MAX_FILE_BYTES:
        return Loaded((), (f"{path.name}: {len(data)} bytes, at most {MAX_FILE_BYTES} are read",))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Loaded((), (f"{path.name}: not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start}",))
    try:
        return parse_documents(text, path.name)
    except Exception as exc:  # a parser bug must cost this file only, and say which file
        log.exception("%s: unexpected error while parsing", path.name)
        return Loaded((), (f"{path.name}: unexpected error: {type(exc).__name__}: {exc}",))


def scan(directory: Path) -> dict[Path, tuple[int, int]]:
    out: dict[Path, tuple[int, int]] = {}
    for p in sorted(directory.iterdir()) if directory.is_dir() else []:
        if p.suffix in SUFFIXES and p.is_file():
            st = p.stat()
            out[p] = (st.st_mtime_ns, st.st_size)
    return out


@dataclass
class _File:
    """What the source took from one file: the stamp it read, its last good splits, and since when it is missing."""

    stamp: tuple[int, int] | None = None
    good: tuple[SplitObject, ...] = ()
    missing_since: float | None = None
    problems: tuple[str, ...] = field(default=())


class FileSource:
    """Keeps `splits` equal to the directory's last good content; `on_change` is called when it changed."""

    def __init__(
        self,
        directory: Path,
        interval: float = 0.5,
        settle: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.directory = directory
        self.interval = interval
        self.settle = settle
        self._clock = clock
        self._files: dict[Path, _File] = {}
        self._pending: set[Path] = set()
        self._splits: dict[tuple[str, str], SplitObject] = {}
        self._duplicates: dict[Path, tuple[str, ...]] = {}

    @property
    def errors(self) -> dict[Path, tuple[str, ...]]:
        """Per file, what is wrong with it now (its last good content, if any, keeps serving)."""
        out = {p: f.problems for p, f in self._files.items() if f.problems}
        for p, msgs in self._duplicates.items():
            out[p] = out.get(p, ()) + msgs
        return out

    @property
    def pending(self) -> bool:
        """A file is still settling (changed, or missing, for less than `settle`)."""
        return bool(self._pending)

    def reload(self) -> bool:
        """One scan; True when the set of splits may have changed."""
        now = self._clock()
        stamps = scan(self.directory)
        self._pending = set()
        changed = False
        for p, f in list(self._files.items()):
            if p in stamps:
                f.missing_since = None
                continue
            f.missing_since = now if f.missing_since is None else f.missing_since
            if self.settle > 0 and now - f.missing_since < self.settle:
                self._pending.add(p)
                continue
            del self._files[p]
            changed = changed or bool(f.good)
        for p, stamp in stamps.items():
            f = self._files.setdefault(p, _File())
            if f.stamp == stamp:
                continue
            if self.settle > 0 and now - stamp[0] / 1e9 < self.settle:
                self._pending.add(p)  # still being written, or just written: read it once it is quiet
                continue
            loaded = read_file(p)
            f.stamp = stamp
            if loaded.problems:
                f.problems = loaded.problems
                for msg in loaded.problems:
                    log.error("skipped %s", msg)
                if f.good:
                    log.error("%s: keeps serving its last good content", p.name)
                continue
            f.problems = ()
            f.good = loaded.splits
            changed = True
        if changed:
            self._resolve()
        return changed

    def _resolve(self) -> None:
        """One namespace/name, one file: the first file keeps it, a later one is refused naming both."""
        out: dict[tuple[str, str], SplitObject] = {}
        duplicates: dict[Path, list[str]] = {}
        for p in sorted(self._files):
            for s in self._files[p].good:
                first = out.get((s.namespace, s.name))
                if first is not None:
                    duplicates.setdefault(p, []).append(
                        f"{_where(s)} {s.key}: already defined in {_where(first)}; refused (the first file keeps it)"
                    )
                    continue
                out[(s.namespace, s.name)] = s
        new = {p: tuple(m) for p, m in duplicates.items()}
        for p, msgs in new.items():
            if self._duplicates.get(p) != msgs:
                for msg in msgs:
                    log.error("skipped %s", msg)
        self._duplicates = new
        self._splits = out

    def splits(self) -> dict[tuple[str, str], SplitObject]:
        return dict(self._splits)

    async def settled(self, timeout: float) -> None:
        """At start: wait (bounded) until no file is settling, so the first generation has every file in it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        self.reload()
        while self.pending and loop.time() < deadline:
            await asyncio.sleep(self.interval)
            self.reload()

    async def watch(self, on_change: Any) -> None:
        while True:
            try:
                if self.reload():
                    on_change(self.splits())
            except Exception:  # keep polling: a transient read error must not stop local mode
                log.exception("file source scan failed")
            await asyncio.sleep(self.interval)


def _where(s: SplitObject) -> str:
    """`shop.yaml[0]` from the object's uid (`file:shop.yaml#0`)."""
    source, _, index = s.uid.removeprefix("file:").rpartition("#")
    return f"{source}[{index}]"


async def log_status(obj: SplitObject, result: StatusResult) -> None:
    """Local mode's status sink: there is no API server to write status to, so a split that is not served (a host
    another split already serves, ...) says why in the log, once per change (the engine writes only changes)."""
    accepted = result.status.condition(ConditionType.ACCEPTED)
    if accepted is not None and not accepted.ok:
        log.error("%s (%s) is not served: %s: %s", obj.key, _where(obj), accepted.reason, accepted.message)
        return
    # A replica that cannot serve this split (isolation: the others are published) is this split's to report.
    published = result.status.condition(ConditionType.PUBLISHED)
    if published is not None and published.reason in (Reason.UNSERVABLE, Reason.REFUSED):
        log.error("%s (%s) is not published: %s: %s", obj.key, _where(obj), published.reason, published.message)
