"""The upstream Gateway API CRDs in charts/trafficsplit/gateway-api-crds/ are the pinned module's own files, and what
the translation reads is what they define.

hack/build-gateway-api.sh copies them from sigs.k8s.io/gateway-api@<pin> (`go mod download`); the byte comparison
runs when that module is in the Go module cache (the script puts it there) and is skipped, saying so, when it is not.
The other checks read only the committed copies.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_gatewayapi_golden import supported_paths
from trafficsplit.core.gatewayapi import httproute as h
from trafficsplit.core.gatewayapi import objects as g
from trafficsplit.core.model import filters as f
from trafficsplit.core.model import matches as v
from trafficsplit.core.model import timeouts as t
from trafficsplit.core.model.timeouts import parse_duration_ms
from trafficsplit.core.model.weights import MAX_WEIGHT

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "build-gateway-api.sh"
CRDS = ROOT / "charts" / "trafficsplit" / "gateway-api-crds"
CHANNELS = ("standard", "experimental")


def pinned_version() -> str:
    m = re.search(r"^GATEWAY_API_VERSION=(v[0-9.]+)$", SCRIPT.read_text(encoding="utf-8"), re.M)
    assert m, "hack/build-gateway-api.sh has no GATEWAY_API_VERSION pin"
    return m.group(1)


def module_cache() -> Path | None:
    if os.environ.get("GOMODCACHE"):
        return Path(os.environ["GOMODCACHE"])
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if go is None:
        return None
    out = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, timeout=60, check=False)
    return Path(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else None


def test_the_copies_are_of_the_pinned_version() -> None:
    assert (CRDS / "VERSION").read_text(encoding="utf-8").strip() == pinned_version()


@pytest.mark.parametrize("channel", CHANNELS)
def test_the_copies_are_byte_identical_to_the_module(channel: str) -> None:
    cache = module_cache()
    src = None if cache is None else cache / f"sigs.k8s.io/gateway-api@{pinned_version()}" / "config/crd" / channel
    if src is None or not src.is_dir():
        pytest.skip(
            f"sigs.k8s.io/gateway-api@{pinned_version()} is not in the Go module cache (hack/build-gateway-api.sh)"
        )
    upstream = {p.name: p.read_bytes() for p in src.glob("*.yaml") if p.name != "kustomization.yaml"}
    committed = {p.name: p.read_bytes() for p in (CRDS / channel).glob("*.yaml")}
    assert sorted(committed) == sorted(upstream)
    changed = [name for name in upstream if committed[name] != upstream[name]]
    assert changed == [], f"stale: {changed}; run hack/build-gateway-api.sh --crds"


@functools.cache
def schema(kind_file: str, channel: str = "experimental") -> Mapping[str, Any]:
    """The v1 spec schema (the experimental channel: a superset of standard). Parsed once: the HTTPRoute CRD is
    0.5 MB of YAML."""
    text = (CRDS / channel / f"gateway.networking.k8s.io_{kind_file}.yaml").read_text(encoding="utf-8")
    doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (v1,) = [v for v in doc["spec"]["versions"] if v["name"] == "v1"]
    return v1["schema"]["openAPIV3Schema"]["properties"]["spec"]  # type: ignore[no-any-return]


def schema_nodes(node: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    for name, sub in (node.get("properties") or {}).items():
        yield prefix + name, sub
        inner = sub.get("items", sub)
        yield from schema_nodes(inner, f"{prefix}{name}.")


def test_every_supported_field_is_a_field_of_the_crd() -> None:
    """A field the parser reads under a name upstream does not have would never be set by a real object."""
    route = {p for p, _ in schema_nodes(schema("httproutes"))}
    gateway = {p for p, _ in schema_nodes(schema("gateways"))}
    assert set(supported_paths(h.SUPPORTED_ROUTE_FIELDS)) - route == set()
    assert set(supported_paths(g.SUPPORTED_GATEWAY_FIELDS)) - gateway == set()
    assert set(supported_paths(g.GATEWAY_CLASS_FIELDS)) == {p for p, _ in schema_nodes(schema("gatewayclasses"))}
    assert set(supported_paths(g.REFERENCE_GRANT_FIELDS)) == {p for p, _ in schema_nodes(schema("referencegrants"))}
    assert set(supported_paths(g.LISTENER_SET_FIELDS)) - {p for p, _ in schema_nodes(schema("listenersets"))} == set()


@pytest.mark.parametrize(
    ("kind_file", "path", "key", "bound"),
    [
        ("httproutes", "parentRefs", "maxItems", h.MAX_PARENT_REFS),
        ("httproutes", "hostnames", "maxItems", h.MAX_ROUTE_HOSTNAMES),
        ("httproutes", "rules", "maxItems", v.MAX_RULES),
        ("httproutes", "rules.matches", "maxItems", v.MAX_RULE_MATCHES),
        ("httproutes", "rules.matches.headers", "maxItems", v.MAX_MATCH_HEADERS),
        ("httproutes", "rules.matches.queryParams", "maxItems", v.MAX_MATCH_QUERY_PARAMS),
        ("httproutes", "rules.filters", "maxItems", h.MAX_FILTERS),
        ("httproutes", "rules.backendRefs", "maxItems", v.MAX_BACKEND_REFS),
        ("httproutes", "rules.matches.path.value", "maxLength", v.MAX_PATH),
        ("httproutes", "rules.matches.headers.value", "maxLength", v.MAX_HEADER_VALUE),
        ("httproutes", "rules.matches.headers.name", "maxLength", v.MAX_HEADER_NAME),
        ("httproutes", "rules.matches.queryParams.value", "maxLength", v.MAX_QUERY_VALUE),
        ("httproutes", "rules.sessionPersistence.sessionName", "maxLength", h.MAX_SESSION_NAME),
        ("httproutes", "rules.backendRefs.weight", "maximum", MAX_WEIGHT),
        ("gateways", "listeners", "maxItems", v.MAX_LISTENERS),
        ("gateways", "listeners.allowedRoutes.kinds", "maxItems", g.MAX_ALLOWED_KINDS),
        ("referencegrants", "from", "maxItems", g.MAX_GRANT_ENTRIES),
        ("referencegrants", "to", "maxItems", g.MAX_GRANT_ENTRIES),
    ],
)
def test_the_parser_bounds_are_the_crd_bounds(kind_file: str, path: str, key: str, bound: int) -> None:
    nodes = dict(schema_nodes(schema(kind_file)))
    assert nodes[path][key] == bound


DURATION_FIELDS = ("rules.timeouts.request", "rules.timeouts.backendRequest", "rules.retry.backoff")


def test_the_timeouts_retry_and_mirror_bounds_are_the_crds() -> None:
    nodes = dict(schema_nodes(schema("httproutes")))
    codes = nodes["rules.retry.codes"]
    assert (codes["items"]["minimum"], codes["items"]["maximum"]) == (t.MIN_RETRY_CODE, t.MAX_RETRY_CODE)
    assert codes["x-kubernetes-list-type"] == "set"  # each code once, as RuleRetry checks
    # The CRD sets no maximum for attempts: ours (MAX_RETRY_ATTEMPTS) is above its minimum.
    assert nodes["rules.retry.attempts"]["minimum"] == 1 < t.MAX_RETRY_ATTEMPTS
    assert "maximum" not in nodes["rules.retry.attempts"]
    percent = nodes["rules.filters.requestMirror.percent"]
    assert (percent["minimum"], percent["maximum"]) == (0, f.MAX_MIRROR_PERCENT)
    denominator = nodes["rules.filters.requestMirror.fraction.denominator"]
    assert (denominator["minimum"], denominator["default"], denominator["format"]) == (1, 100, "int32")
    assert f.MAX_MIRROR_DENOMINATOR == 2**31 - 1  # int32
    assert nodes["rules.filters.requestMirror.fraction.numerator"]["minimum"] == 0
    assert nodes["rules.filters"]["maxItems"] == f.MAX_MIRRORS  # every filter of a rule may be a mirror
    for field in DURATION_FIELDS:
        assert nodes[field]["pattern"] == DURATION_PATTERN, field


DURATION_PATTERN = "^([0-9]{1,5}(h|m|s|ms)){1,4}$"


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="0123456789hms1", max_size=t.MAX_DURATION_TEXT + 4))
def test_the_duration_parser_takes_exactly_what_the_crds_pattern_does(text: str) -> None:
    assert (parse_duration_ms(text) is not None) == (re.fullmatch(DURATION_PATTERN, text) is not None)
