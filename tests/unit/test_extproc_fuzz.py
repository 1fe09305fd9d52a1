"""Fuzzing the processor's request handling with hostile headers (no network: `Processor.handle` on built messages).

Random and adversarial `:authority`, Cookie lines, `x-request-id` and match-rule headers, as raw bytes (what Envoy
1.40 sends) or as strings. Whatever arrives, the processor
- never raises (a raise would fail the request open, losing stickiness for nothing),
- answers a 404 or routes to a cluster the generation configured for the split that serves that host,
- emits only header values and metadata made of configuration and its own output: the one client byte sequence it
  may echo is a cookie handle that passed the core's cookie-octet check.
"""

from __future__ import annotations

import re

from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trafficsplit.core.control.compiler import compile_split
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.model.compiled import Endpoint
from trafficsplit.core.model.cookie import is_cookie_value, read_cookie, render_set_cookie
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.headervalue import is_header_value
from trafficsplit.extproc.held import HeldGeneration
from trafficsplit.extproc.metrics import Metrics
from trafficsplit.extproc.processor import Processor
from trafficsplit.wire.envoy import META_DECISION, META_ENDPOINT, META_SET_COOKIE, METADATA_NAMESPACE, ROUTING_HEADER
from trafficsplit.wire.processing import request_view

MATCHES = [
    {"header": {"name": "x-user", "value": "(a+)+$", "type": "RegularExpression"}, "backend": "canary"},
    {"header": {"name": "x-beta", "value": "yes"}, "backend": "canary"},
    {"cookie": {"name": "grp", "value": "b[0-9]+", "type": "RegularExpression"}, "backend": "canary"},
]


def _generation() -> Generation:
    sticky = parse_split(
        "ns",
        "shop",
        {
            "hosts": ["shop.example", "*.wild.example"],
            "backends": [
                {"name": "stable", "weight": 90},
                {"name": "canary", "weight": 10},
                {"name": "off", "weight": 0},
            ],
            "sticky": {"cookie": {"name": "ts", "path": "/app", "domain": ".shop.example"}, "endpointAffinity": True},
            "matches": MATCHES,
            "debugHeaders": True,
        },
    )
    plain = parse_split(
        "ns",
        "plain",
        {
            "hosts": ["plain.example"],
            "backends": [{"name": "blue", "weight": 1}, {"name": "green", "weight": 1}],
            "sticky": {"endpointAffinity": True},  # keyed by the request id, which the client may send
            "debugHeaders": True,
        },
    )
    eps = {n: [Endpoint("10.0.0.1", 80)] for n in ("stable", "canary", "off", "blue", "green")}
    return Generation(7, (compile_split(sticky, eps), compile_split(plain, eps)))


GEN = _generation()
MINTED = re.compile(r"[0-9a-f]{24}")
DISCLOSURE = re.compile(r"backend=[a-z]+; generation=7; key=(cookie|minted|request-id); path=(weighted|match|failover)")

# Byte strings with what attackers try: CR/LF/NUL, separators, quotes, obs-text, invalid UTF-8, long runs.
NASTY = st.sampled_from(
    [b"", b"\r\n", b"\r\nx-injected: 1", b"\x00", b";", b"=", b'"', b",", b" ", b"\t", b":", b".", b"\xff", b"\xc3\xa9"]
)
CHUNK = st.one_of(NASTY, st.binary(max_size=12), st.text(max_size=12).map(str.encode))
BYTES = st.lists(CHUNK, max_size=6).map(b"".join)
HOSTS = st.sampled_from(
    [b"shop.example", b"SHOP.example", b"a.wild.example", b"plain.example", b"nobody.example", b"[::1]", b""]
)
AUTHORITY = st.tuples(HOSTS, BYTES).map(lambda t: t[0] + t[1]) | BYTES
COOKIE_VALUE = st.one_of(BYTES, st.sampled_from([b"abc", b"a" * 256, b"a" * 257, b'"quoted"', b"b12"]))
COOKIE_PAIR = st.tuples(st.sampled_from([b"ts", b"grp", b"other", b" ts", b"ts "]), COOKIE_VALUE).map(
    lambda t: t[0] + b"=" + t[1]
)
COOKIE_LINE = st.lists(COOKIE_PAIR | BYTES, max_size=4).map(b"; ".join)
REQUEST_ID = BYTES | st.just(b"a" * 20 + b"!")
HEADER = st.tuples(
    st.sampled_from([":authority", "host", "cookie", "x-request-id", "x-user", "x-beta", "x-other", "X-User"]), BYTES
)


@st.composite
def requests(draw: st.DrawFn) -> ep.ProcessingRequest:
    headers: list[tuple[str, bytes]] = [(":authority", draw(AUTHORITY))]
    headers += [("cookie", line) for line in draw(st.lists(COOKIE_LINE, max_size=3))]
    if draw(st.booleans()):
        headers.append(("x-request-id", draw(REQUEST_ID)))
    headers += [("x-user", v) for v in draw(st.lists(st.sampled_from([b"aaaa", b"a" * 28 + b"!"]) | BYTES, max_size=2))]
    headers += draw(st.lists(HEADER, max_size=4))
    headers = draw(st.permutations(headers))
    as_text = draw(st.booleans())  # Envoy sends raw_value; older versions and other clients set value
    req = ep.ProcessingRequest()
    for key, value in headers:
        h = base_pb2.HeaderValue(key=key)
        if as_text:
            h.value = value.decode("utf-8", "replace")
        else:
            h.raw_value = value
        req.request_headers.headers.headers.append(h)
    return req


def _check(req: ep.ProcessingRequest, reply: ep.ProcessingResponse) -> None:
    view = request_view(req.request_headers.headers.headers)
    split = GEN.split_for(view.authority)
    if reply.HasField("immediate_response"):
        assert split is None and reply.immediate_response.status.code == 404
        assert not reply.immediate_response.headers.set_headers
        return
    assert split is not None, view.authority
    mutation = reply.request_headers.response.header_mutation
    assert not mutation.remove_headers
    emitted = {h.header.key: h.header.raw_value.decode("ascii") for h in mutation.set_headers}
    assert set(emitted) <= {ROUTING_HEADER}
    for value in emitted.values():
        assert is_header_value(value), value
    clusters = {b.cluster: b for b in split.backends}
    assert emitted[ROUTING_HEADER] in clusters  # never outside the split's configured backends
    assert clusters[emitted[ROUTING_HEADER]].name != "off"  # weight 0, and no rule names it
    meta = reply.dynamic_metadata.fields[METADATA_NAMESPACE].struct_value.fields
    decision = meta[META_DECISION].string_value
    assert DISCLOSURE.fullmatch(decision), decision
    assert f"backend={clusters[emitted[ROUTING_HEADER]].name};" in decision
    source = decision.split("key=", 1)[1].split(";", 1)[0]
    backend = clusters[emitted[ROUTING_HEADER]]
    if split.endpoint_affinity:
        # The pod is one of the backend's own ready endpoints (the core's ring), never anything a client sent.
        assert meta[META_ENDPOINT].string_value in {e.host for e in backend.ready_endpoints}
    if split.cookie is not None:
        handle = read_cookie(view.cookie_lines, split.cookie.name)
        if handle is not None:
            assert source == "cookie" and is_cookie_value(handle)
            assert META_SET_COOKIE not in meta
        else:
            set_cookie = meta[META_SET_COOKIE].string_value
            minted = set_cookie.split(";", 1)[0].split("=", 1)[1]
            assert source == "minted" and MINTED.fullmatch(minted)
            assert set_cookie == render_set_cookie(split.cookie, minted)
    else:
        assert source == "request-id" and META_SET_COOKIE not in meta


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_hostile_headers_never_raise_never_leave_the_split_and_never_echo_client_bytes(
    req: ep.ProcessingRequest,
) -> None:
    held = HeldGeneration()
    held.swap(GEN, "fuzz")
    reply = Processor(held, Metrics()).handle(req)
    _check(req, reply)


def test_the_backtracking_rule_and_a_29_byte_header_are_decided_by_re2() -> None:
    """The regex DoS input of the security review, through the processor: it is decided, and not by the rule."""
    held = HeldGeneration()
    held.swap(GEN, "fuzz")
    req = ep.ProcessingRequest()
    for key, value in ((":authority", b"shop.example"), ("x-user", b"a" * 28 + b"!"), ("cookie", b"ts=abc")):
        req.request_headers.headers.headers.append(base_pb2.HeaderValue(key=key, raw_value=value))
    reply = Processor(held, Metrics()).handle(req)
    _check(req, reply)
    assert GEN.splits[0].matches[0].pattern is not None and GEN.splits[0].matches[0].pattern.engine == "re2"
