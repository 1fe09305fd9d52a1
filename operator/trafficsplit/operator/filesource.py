"""Local mode: the same compile and publish path, fed from a directory of TrafficSplit YAML instead of the API server.

Why polling: the directory is re-scanned every `interval` (0.5 s) by a stamp (mtime, size, inode), with no inotify
dependency, so it works on any filesystem and in any container. A file is the unit of validity: a file with any
invalid document (not UTF-8, not YAML, a bad field, an unknown field, a namespace or name the API server would refuse)
is reported (log, with the file name, and line and column for YAML) and skipped, its last good content keeps serving,
and the other files go on being read.

A read the source cannot trust never withdraws a split. Files are rewritten in place all the time (`cp`, editors,
`gen > shop.yaml`), and a reader can catch one truncated, half-written, or holding only its leading comments:
- settle (1 s): a changed file is read only once its mtime is `settle` old AND its stamp held still since the previous
  scan (during an in-place rewrite ext4 can show the new size with the old mtime, which passes the mtime check alone);
- the file is stat-ed again after the read and read again if its stamp moved meanwhile (at most `READ_ATTEMPTS`);
- a file that is empty or holds only comments is *pending*: its last good splits keep serving and a log line names
  the file; only if it stays empty for `empty_grace` (60 s, `--empty-grace`) are its splits withdrawn, and the log says
  so. An unparsable file is pending for as long as it stays broken.
A split is withdrawn when its file is deleted (missing for `settle`, so an editor's delete-and-rewrite does not count),
and the log names the file. The clock is the wall clock, as file mtimes are.

Identity: one namespace/name is defined by one file. The first file (by name) keeps it; a later document with the same
namespace/name is refused with an error naming both files.

Each change of a file's good content is logged per split (`trafficsplit.operator.filesource.changes`): the weights
before → after and the share of sessions that moves, from the core's planner, with its warnings.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trafficsplit.core.control.change import describe_change
from trafficsplit.core.control.resolve import SplitObject
from trafficsplit.core.control.status import StatusResult
from trafficsplit.core.model.vocabulary import ConditionType, EventReason, EventType, Reason

log = logging.getLogger("trafficsplit.operator.filesource")
changes_log = logging.getLogger("trafficsplit.operator.filesource.changes")

SUFFIXES = (".yaml", ".yml")
MAX_FILE_BYTES = 1 << 20  # a TrafficSplit is a few KB; a bigger file is a mistake, not a spec
READ_ATTEMPTS = 3  # reads of a file that keeps changing under the reader before it waits for the next scan
DEFAULT_EMPTY_GRACE = 60.0  # seconds a file may stay empty before its splits are withdrawn (a writer takes seconds)


@dataclass(frozen=True, slots=True)
class Loaded:
    splits: tuple[SplitObject, ...]
    problems: tuple[str, ...]
    empty: bool = False  # no YAML document at all: nothing, whitespace, comments, bare `---`


@dataclass(frozen=True, slots=True)
class Stamp:
    """What says a file changed: an in-place rewrite moves mtime or size, a rename-over moves the inode."""

    mtime_ns: int
    size: int
    inode: int

    @classmethod
    def of(cls, st: os.stat_result) -> Stamp:
        return cls(st.st_mtime_ns, st.st_size, st.st_ino)


def _yaml_problem(exc: yaml.YAMLError, source: str) -> str:
    """One line (the log and the demo's console are line-based): `file:line:column: not YAML: what`."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        context = ""
        if exc.context:
            cm = exc.context_mark
            context = f"{exc.context} (line {cm.line + 1}, column {cm.column + 1}): " if cm is not None else ""
            context = context or f"{exc.context}: "
        return f"{where}: not YAML: {context}{exc.problem or ''}".rstrip(": ")
    return f"{source}: not YAML: {' '.join(str(exc).split())}"


def parse_documents(text: str, source: str) -> Loaded:
    """The TrafficSplits in one file, each validated by the core; problems name the file, document and field."""
    problems: list[str] = []
    splits: list[SplitObject] = []
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        return Loaded((), (_yaml_problem(exc, source),))
    if all(doc is None for doc in docs):
        return Loaded((), (), empty=True)
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


def read_bytes(path: Path) -> bytes:
    """At most one byte more than `MAX_FILE_BYTES`, enough to tell a file is too big."""
    with path.open("rb") as f:
        return f.read(MAX_FILE_BYTES + 1)


def read_stable(path: Path) -> tuple[bytes, Stamp] | None:
    """The file's bytes and the stamp they belong to: stat, read, stat again, and read again when the stamp moved
    (a writer was at work). None when it kept moving for `READ_ATTEMPTS` reads. OSError when it cannot be read."""
    for _ in range(READ_ATTEMPTS):
        before = Stamp.of(path.stat())
        data = read_bytes(path)
        after = Stamp.of(path.stat())
        if before == after and (len(data) == after.size or len(data) > MAX_FILE_BYTES):
            return data, after
    return None


def load_bytes(data: bytes, name: str) -> Loaded:
    """One file's bytes parsed; every failure is a problem naming the file, never an exception."""
    if len(data) > MAX_FILE_BYTES:
        return Loaded((), (f"{name}: more than {MAX_FILE_BYTES} bytes; at most {MAX_FILE_BYTES} are read",))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Loaded((), (f"{name}: not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start}",))
    try:
        return parse_documents(text, name)
    except Exception as exc:  # a parser bug must cost this file only, and say which file
        log.exception("%s: unexpected error while parsing", name)
        return Loaded((), (f"{name}: unexpected error: {type(exc).__name__}: {exc}",))


def scan(directory: Path) -> dict[Path, Stamp]:
    out: dict[Path, Stamp] = {}
    for p in sorted(directory.iterdir()) if directory.is_dir() else []:
        if p.suffix in SUFFIXES and p.is_file():
            try:
                out[p] = Stamp.of(p.stat())
            except FileNotFoundError:  # removed between the listing and the stat: missing, as on the next scan
                continue
    return out


@dataclass(kw_only=True)
class _File:
    """What the source took from one file: the stamp it last read, the stamp the previous scan saw, its last good
    splits, what is wrong with it now, and since when it is missing or empty."""

    stamp: Stamp | None = None
    seen: Stamp | None = None
    good: tuple[SplitObject, ...] = ()
    missing_since: float | None = None
    empty_since: float | None = None
    problems: tuple[str, ...] = field(default=())

    @property
    def keys(self) -> str:
        return ", ".join(s.key for s in self.good) or "nothing"


class FileSource:
    """Keeps `splits` equal to the directory's last good content; `on_change` is called when it changed."""

    def __init__(
        self,
        directory: Path,
        interval: float = 0.5,
        settle: float = 1.0,
        clock: Callable[[], float] = time.time,
        empty_grace: float = DEFAULT_EMPTY_GRACE,
    ) -> None:
        if empty_grace <= 0:
            raise ValueError(f"empty_grace: must be > 0 seconds, got {empty_grace}")
        self.directory = directory
        self.interval = interval
        self.settle = settle
        self.empty_grace = empty_grace
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
        """A file is still settling (changed, or missing, for less than `settle`), or is empty while its last good
        content serves."""
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
            if f.good:
                log.warning("%s: deleted: withdrawing %s", p.name, f.keys)
                self._log_changes(p, f.good, ())
                changed = True
        for p, stamp in stamps.items():
            first = p not in self._files
            f = self._files.setdefault(p, _File())
            seen, f.seen = f.seen, stamp
            if f.stamp == stamp:
                changed = self._empty_for_long(p, f, now) or changed
                continue
            if self.settle > 0 and (now - stamp.mtime_ns / 1e9 < self.settle or (not first and seen != stamp)):
                self._pending.add(p)  # being written, just written, or changed since the previous scan: wait
                continue
            changed = self._read(p, f, stamp, now) or changed
        if changed:
            self._resolve()
        return changed

    def _read(self, p: Path, f: _File, scanned: Stamp, now: float) -> bool:
        """Read one changed file (`scanned`: the stamp the scan saw); True when its good content changed."""
        try:
            read = read_stable(p)
        except OSError as exc:
            read, loaded = None, Loaded((), (f"{p.name}: cannot read: {exc}",))
        else:
            if read is None or (self.settle > 0 and read[1] != scanned):
                # A writer got in between the scan and the read: what was read has not settled; the next scans
                # read it once it has held still (`seen`).
                f.seen = read[1] if read is not None else None
                log.info("%s: changed while being read; read again once it holds still", p.name)
                self._pending.add(p)
                return False
            loaded = load_bytes(read[0], p.name)
        if read is not None:
            f.stamp = f.seen = read[1]
        if loaded.empty:
            entering = f.empty_since is None
            # Since the last write (its mtime), not since this read: the grace is how long the file has been empty
            # and unchanged. A file rewritten through empty states again and again is being written, never "stays".
            f.empty_since = min(now, f.stamp.mtime_ns / 1e9) if f.stamp is not None else now
            if entering:
                if f.good:
                    log.warning(
                        "%s: empty (no YAML document: nothing, or only comments): pending; its last good content "
                        "(%s) keeps serving; withdrawn if it stays empty for %gs (--empty-grace)",
                        p.name,
                        f.keys,
                        self.empty_grace,
                    )
                else:
                    log.warning("%s: empty (no YAML document: nothing, or only comments): nothing to serve", p.name)
            return self._empty_for_long(p, f, now)
        was_pending, f.empty_since = f.empty_since is not None, None
        if loaded.problems:
            f.problems = loaded.problems
            for msg in loaded.problems:
                log.error("skipped %s", msg)
            if f.good:
                log.error("%s: keeps serving its last good content (%s)", p.name, f.keys)
            return False
        if f.problems or was_pending:
            log.info("%s: valid again: serving %s", p.name, ", ".join(s.key for s in loaded.splits) or "nothing")
        f.problems = ()
        old, f.good = f.good, loaded.splits
        self._log_changes(p, old, f.good)
        return True

    def _empty_for_long(self, p: Path, f: _File, now: float) -> bool:
        """An empty file with splits still served from it: pending until `empty_grace`, then they are withdrawn."""
        if f.empty_since is None or not f.good:
            return False
        if now - f.empty_since < self.empty_grace:
            self._pending.add(p)
            return False
        log.warning("%s: empty for %gs (--empty-grace): withdrawing %s", p.name, self.empty_grace, f.keys)
        old, f.good = f.good, ()
        self._log_changes(p, old, ())
        return True

    @staticmethod
    def _log_changes(p: Path, old: tuple[SplitObject, ...], new: tuple[SplitObject, ...]) -> None:
        """Per split of the file: what changed and what it moves (the planner's figure), with its warnings."""
        before = {s.key: s.parsed for s in old}
        after = {s.key: s.parsed for s in new}
        for key in [*before, *(k for k in after if k not in before)]:
            note = describe_change(before.get(key), after.get(key))
            if note is None:
                continue
            changes_log.info("%s %s", p.name, note.summary)
            for w in note.warnings:
                changes_log.warning("%s %s", p.name, w)

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
    another split already serves, ...) says why in the log, once per change (the engine writes only changes), and
    the Events a cluster would get are log lines (e.g. `Drained` once a draining backend's sessions went idle)."""
    accepted = result.status.condition(ConditionType.ACCEPTED)
    if accepted is not None and not accepted.ok:
        log.error("%s (%s) is not served: %s: %s", obj.key, _where(obj), accepted.reason, accepted.message)
    else:
        # A replica that cannot serve this split (isolation: the others are published) is this split's to report.
        published = result.status.condition(ConditionType.PUBLISHED)
        if published is not None and published.reason in (Reason.UNSERVABLE, Reason.REFUSED):
            log.error("%s (%s) is not published: %s: %s", obj.key, _where(obj), published.reason, published.message)
    for event in result.events:
        # The fleet logs each generation a dataplane holds; a refusal was logged above from the condition.
        if event.reason in (EventReason.PUBLISHED, EventReason.UNSERVABLE, EventReason.REFUSED):
            continue
        level = logging.WARNING if event.type is EventType.WARNING else logging.INFO
        log.log(level, "%s (%s): %s: %s", obj.key, _where(obj), event.reason, event.message)
