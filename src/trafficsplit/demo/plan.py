"""What the demo starts and what it tells the user, decided from the examples directory without doing any I/O.

Why a plan: every check a user can fail (no examples, an invalid split, a backend without a loopback endpoint, a busy
port) must be found BEFORE a single process starts, and the texts the demo prints (ready block, curl lines, the flip
recipe) are worth testing on their own. The examples are parsed exactly as the operator's file source parses them
(`parse_documents`) and then by the core's `parse_split`, so the demo never accepts what the operator would skip.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.persistent import StickyMode
from trafficsplit.core.model.splitspec import SplitSpec
from trafficsplit.operator.filesource import changes_log, parse_documents
from trafficsplit.operator.filesource import log as filesource_log
from trafficsplit.wire.bootstrap import Address, BootstrapOptions, bootstrap_json
from trafficsplit.wire.command import envoy_args, local_envoy

NODE_ID = "demo-gateway"
EXTPROC_SOCKET = "extproc.sock"
TOKEN_FILE = "token"
COOKIE_KEY_FILE = "cookie-keys"  # sticky.mode persistent's HMAC key, generated per run: the demo's sessions are its own
SESSION_IDLE_SECONDS = 30  # a drained backend's sessions count as gone after this idle time (1800 in a cluster)
PORTS_FILE = "extproc.ports.json"
ENVOY_CONFIG = "envoy.json"
ENVOY_ADMIN_FILE = "envoy.admin"
ENVOY_ACCESS_LOG = "envoy-access.log"
# The operator's log format (trafficsplit.operator.main): "<date> <time> LEVEL logger: message".
_LOG_LINE = re.compile(r"^\S+ \S+ (?P<level>[A-Z]+) (?P<logger>[\w.]+): (?P<message>.*)$")


@dataclass(frozen=True, slots=True)
class SampleEndpoint:
    """One loopback endpoint the demo serves itself, answering as backend `name`."""

    name: str
    host: str
    port: int
    source: str  # the example file that names it, for messages


@dataclass(frozen=True, slots=True)
class DemoSplit:
    spec: SplitSpec
    source: str  # file name inside the examples directory


@dataclass(frozen=True, slots=True)
class Examples:
    splits: tuple[DemoSplit, ...]
    endpoints: tuple[SampleEndpoint, ...]
    problems: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PortClaim:
    """A fixed port the demo will listen on, and how the user moves it if it is taken."""

    host: str
    port: int
    what: str
    change: str


def is_loopback(host: str) -> bool:
    return host == "localhost" or host.startswith("127.") or host == "::1"


def load_examples(files: Mapping[str, str]) -> Examples:
    """The TrafficSplits in `files` (name → text) and the sample endpoints they need; problems say why not."""
    problems: list[str] = []
    splits: list[DemoSplit] = []
    for source in sorted(files):
        loaded = parse_documents(files[source], source)
        problems.extend(loaded.problems)
        for obj in loaded.splits:
            try:
                splits.append(DemoSplit(parse_split(obj.namespace, obj.name, obj.spec), source))
            except SpecError as exc:  # parse_documents validated it already; kept for a changed file source
                problems.extend(f"{source} {obj.namespace}/{obj.name}: {p}" for p in exc.problems)
    if not splits and not problems:
        problems.append("no TrafficSplit found (the demo serves the *.yaml files at the top of the directory)")
    endpoints: dict[tuple[str, int], SampleEndpoint] = {}
    for s in splits:
        for b in s.spec.backends:
            if not b.endpoints:
                problems.append(
                    f"{s.source} {s.spec.key}: backend {b.name} has no `endpoints`; the demo serves only static "
                    "loopback endpoints"
                )
            for ep in b.endpoints:
                if not is_loopback(ep.address):
                    problems.append(
                        f"{s.source} {s.spec.key}: backend {b.name} endpoint {ep.address}:{ep.port} is not loopback; "
                        "the demo can only serve 127.0.0.1"
                    )
                    continue
                seen = endpoints.get((ep.address, ep.port))
                if seen is not None and seen.name != b.name:
                    problems.append(f"{s.source} {s.spec.key}: {ep.address}:{ep.port} is both {seen.name} and {b.name}")
                    continue
                endpoints.setdefault((ep.address, ep.port), SampleEndpoint(b.name, ep.address, ep.port, s.source))
    return Examples(tuple(splits), tuple(endpoints.values()), tuple(problems))


def port_claims(listen_host: str, port: int, examples: Examples, examples_arg: str) -> tuple[PortClaim, ...]:
    """Every fixed port, gateway first. Everything else (admin, publish, metrics) binds port 0 or a Unix socket."""
    claims = [PortClaim(listen_host, port, "the gateway", "--port")]
    for ep in examples.endpoints:
        claims.append(PortClaim(ep.host, ep.port, f"backend {ep.name}", f"its endpoint in {examples_arg}/{ep.source}"))
    return tuple(claims)


def duplicate_claims(claims: Sequence[PortClaim]) -> list[str]:
    seen: dict[int, PortClaim] = {}
    out = []
    for c in claims:
        if c.port in seen:
            out.append(f"port {c.port} is claimed by both {seen[c.port].what} and {c.what}")
        seen.setdefault(c.port, c)
    return out


def busy_message(busy: Sequence[PortClaim]) -> str:
    """One line naming every busy port and how to move it."""
    parts = [f"{c.host}:{c.port} ({c.what}) is already in use; change {c.change}" for c in busy]
    return "; ".join(parts)


# --- commands -------------------------------------------------------------------------------------------------------


def backends_argv(python: str, endpoints: Sequence[SampleEndpoint]) -> list[str]:
    return [python, "-m", "trafficsplit.demo.backends", *(f"{e.name}={e.host}:{e.port}" for e in endpoints)]


def extproc_argv(python: str, workdir: str) -> list[str]:
    """The processor as in a gateway pod, but every port it owns is loopback and picked by the kernel."""
    return [
        python, "-m", "trafficsplit.extproc",
        "--listen", f"unix:{workdir}/{EXTPROC_SOCKET}",
        "--publish", "127.0.0.1:0",
        "--metrics", "127.0.0.1:0",
        "--token-file", f"{workdir}/{TOKEN_FILE}",
        "--cookie-key-file", f"{workdir}/{COOKIE_KEY_FILE}",
        "--session-idle-seconds", str(SESSION_IDLE_SECONDS),  # so `Drained` comes within a demo, not in 30 min
        "--replica", NODE_ID,
        "--ports-file", f"{workdir}/{PORTS_FILE}",
        "--drain-seconds", "0",  # nobody load-balances away from a demo; stop at once
    ]  # fmt: skip


def operator_argv(python: str, workdir: str, examples_dir: str, publish_port: int, poll_interval: float) -> list[str]:
    return [
        python, "-m", "trafficsplit.operator",
        "--file-source", examples_dir,
        "--dataplane", f"{NODE_ID}=127.0.0.1:{publish_port}",
        "--token-file", f"{workdir}/{TOKEN_FILE}",
        "--poll-interval", str(poll_interval),
        "--identity", "demo-operator",
    ]  # fmt: skip


def envoy_argv(envoy: str, workdir: str) -> list[str]:
    # One worker thread: two cores are shared with the processor, the operator and the backends.
    return [envoy, *envoy_args(local_envoy(f"{workdir}/{ENVOY_CONFIG}", f"{workdir}/{ENVOY_ADMIN_FILE}"))]


def envoy_bootstrap(workdir: str, listen_host: str, port: int, message_timeout_ms: int) -> str:
    """The same bootstrap a gateway pod gets (trafficsplit.wire.bootstrap), pointed at the demo's socket."""
    local = Address(path=f"{workdir}/{EXTPROC_SOCKET}")
    return bootstrap_json(
        BootstrapOptions(
            node_id=NODE_ID,
            listen=Address(listen_host, port),
            extproc=local,
            ads=local,
            admin=Address("127.0.0.1", 0),
            message_timeout_ms=message_timeout_ms,
            # Its own file, so envoy.log keeps Envoy's messages and the per-request decisions are easy to read.
            access_log=f"{workdir}/{ENVOY_ACCESS_LOG}",
        )
    )


_LOUD = ("ERROR", "WARNING", "CRITICAL")


@dataclass
class OperatorNews:
    """The operator log lines a user editing the examples needs on the console: problems (an invalid or empty file
    is named, and its last good content keeps serving), the file source's own news (a file valid again, deleted),
    and each generation the gateway acknowledged, followed by what changed in it: per split, the weights before →
    after and the share of sessions moved, with the planner's warnings. The changes are logged when a file is read,
    before the generation carrying them is acknowledged, so they wait here for it."""

    changes: list[str] = field(default_factory=list)

    def feed(self, lines: Sequence[str]) -> list[str]:
        out = []
        for line in lines:
            m = _LOG_LINE.match(line)
            if m is None:
                continue
            level, logger, message = m.group("level"), m.group("logger"), m.group("message")
            if logger == changes_log.name:
                self.changes.append(f"warning: {message}" if level in _LOUD else message)
            elif " holds generation " in message:
                out.append(f"operator: {message}")
                out.extend(f"  {c}" for c in self.changes)
                self.changes.clear()
            elif level in _LOUD or logger == filesource_log.name:
                out.append(f"operator: {message}")
        return out


# --- what the user reads ----------------------------------------------------------------------------------------------


def first_host(spec: SplitSpec) -> str:
    """The host to show in curl lines: a concrete name, preferring one that is not plain `localhost`."""
    named = [h for h in spec.hosts if "*" not in h]
    return next((h for h in named if h != "localhost"), named[0] if named else "localhost")


def flip_recipe(split: DemoSplit, examples_arg: str, cli: str = "trafficsplit") -> list[str]:
    """How to move traffic by editing the example: a blue-green flip when a backend waits at weight 0, else a ramp
    of 5 that keeps the total (so only the sessions that must move are re-pinned: docs/displacement.md, docs/spec.md
    §2). Under sticky.mode persistent, the drain too: the flip with the old side marked `drain: true`. `cli` is how
    the user's shell reaches the `trafficsplit` command (`.venv/bin/trafficsplit` when it is not on PATH)."""
    backends = split.spec.backends
    path = f"{examples_arg}/{split.source}"
    if len(backends) < 2:
        return [f"edit {path}: change the weights; the demo reloads it within 2 s"]
    src = max(backends, key=lambda b: b.weight)
    idle = [b for b in backends if b.weight == 0 and b.name != src.name]
    if idle:
        dst, amount, kind = idle[0], src.weight, "flip"
    else:
        dst = min((b for b in backends if b.name != src.name), key=lambda b: b.weight)
        amount, kind = min(5, src.weight), "ramp"
    before = split.spec.weights_text()
    after = ",".join(
        f"{b.name}={b.weight - amount if b.name == src.name else b.weight + amount if b.name == dst.name else b.weight}"
        for b in backends
    )
    lines = [
        f"{kind}: edit {path}: {src.name} weight {src.weight} → {src.weight - amount}, "
        f"{dst.name} weight {dst.weight} → {dst.weight + amount}; saved changes are served within 2 s",
        f"preview who moves: {cli} plan --from {before} --to {after}",
    ]
    if split.spec.sticky_mode is StickyMode.PERSISTENT and amount == src.weight:
        lines += [
            f"drain (what `trafficsplit flip --drain` writes in a cluster): the same edit, and `drain: true` on "
            f"{src.name}: its sessions stay there until idle, new ones go to {dst.name}",
            f"preview: {cli} plan --from {before} --to {after} --drain {src.name}",
        ]
    return lines


def ready_text(
    *,
    listen_host: str,
    port: int,
    examples: Examples,
    examples_arg: str,
    workdir: str,
    admin: str,
    metrics_port: int,
    pids: Mapping[str, int],
    cli: str = "trafficsplit",
) -> str:
    """The block printed once the gateway answers; its first line is the one scripts wait for. `cli`: as in
    flip_recipe; when it is a path, a line says so and how to put it on PATH."""
    url = f"http://{listen_host}:{port}/"
    lines = [f"trafficsplit demo: ready at {url}"]
    for s in examples.splits:
        host = first_host(s.spec)
        weights = ", ".join(f"{b.name} {b.weight}" for b in s.spec.backends)
        lines.append(f"  split {s.spec.key} ({s.source}): hosts {', '.join(s.spec.hosts)}; weights {weights}")
        curl = f"curl -i -H {shlex.quote('Host: ' + host)} {url}"
        lines.append(f"  try:    {curl}")
        if s.spec.cookie is not None:
            c = s.spec.cookie.name
            if s.spec.sticky_mode is StickyMode.PERSISTENT:  # the cookie carries its backend, sealed with a key
                value = f"<24 hex>.<backend>.<seal> (sealed with {workdir}/{COOKIE_KEY_FILE})"
            else:
                value = "<24 hex>"
            lines.append(
                f"  sticky: the first answer sets the cookie {c}={value}; send it back to stay on one backend:"
            )
            lines.append(f"          {curl} -b {shlex.quote(c + '=<value from Set-Cookie>')}")
            lines.append(f"          or keep a jar: {curl} -c /tmp/jar -b /tmp/jar")
        lines.extend(f"  {line}" for line in flip_recipe(s, examples_arg, cli))
    lines.append(f"  backends: {', '.join(f'{e.name} http://{e.host}:{e.port}/' for e in examples.endpoints)}")
    lines.append(f"  envoy admin: http://{admin}/   processor metrics: http://127.0.0.1:{metrics_port}/metrics")
    if cli != "trafficsplit":
        bindir = cli.rpartition("/")[0]
        where = bindir if bindir.startswith("/") else f"$PWD/{bindir}"  # a relative entry breaks after a cd
        lines.append(f'  cli: {cli} (not on your PATH; to type just trafficsplit: export PATH="{where}:$PATH")')
    lines.append(f"  logs: {workdir}/*.log")
    lines.append("  pids: " + " ".join(f"{k}={v}" for k, v in pids.items()))
    lines.append("  stop: Ctrl-C (or SIGTERM); everything started here stops with it")
    return "\n".join(lines) + "\n"
