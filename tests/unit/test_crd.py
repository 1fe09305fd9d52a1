"""The CRD agrees with the core's parser and with its documentation.

The API server enforces the schema, the core enforces spec.py; a bound that differs between them would let the API
accept what the operator then refuses (or the reverse). docs/crd.md must mention every spec field the schema has.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from trafficsplit.core.control.spec import SPEC_FIELDS
from trafficsplit.core.model.assignment import DIGEST_LENGTH, MAX_RUNS_TEXT, status_digest
from trafficsplit.core.model.cookie import CookieSettings
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.limits import (
    MAX_BACKEND_NAME,
    MAX_COOKIE_NAME,
    MAX_COOKIE_PATH,
    MAX_HOST,
    MAX_HOSTS,
    MAX_MATCH_VALUE,
    MAX_MATCHES,
    MAX_SERVICE,
)
from trafficsplit.core.model.rules import is_host
from trafficsplit.core.model.weights import MAX_BACKENDS, MAX_WEIGHT

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "trafficsplit.dev_trafficsplits.yaml"
DOC = ROOT / "docs" / "crd.md"


def schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    (version,) = crd["spec"]["versions"]
    s: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return s


def fields(node: dict[str, Any], path: str) -> Iterator[str]:
    for name, sub in (node.get("properties") or {}).items():
        p = f"{path}.{name}"
        yield p
        yield from fields(sub, p)
        if sub.get("type") == "array" and isinstance(sub.get("items"), dict):
            yield from fields(sub["items"], p)


def test_bounds_match_the_core() -> None:
    spec = schema()["properties"]["spec"]["properties"]
    backends = spec["backends"]
    assert backends["maxItems"] == MAX_BACKENDS
    w = backends["items"]["properties"]["weight"]
    assert (w["minimum"], w["maximum"]) == (0, MAX_WEIGHT)
    assert spec["hosts"]["maxItems"] == MAX_HOSTS
    assert spec["matches"]["maxItems"] == MAX_MATCHES
    assert spec["hosts"]["items"]["maxLength"] == MAX_HOST
    assert spec["service"]["maxLength"] == MAX_SERVICE
    assert backends["items"]["properties"]["name"]["maxLength"] == MAX_BACKEND_NAME
    cookie = spec["sticky"]["properties"]["cookie"]["properties"]
    assert cookie["name"]["maxLength"] == MAX_COOKIE_NAME
    assert cookie["path"]["maxLength"] == MAX_COOKIE_PATH
    assert cookie["domain"]["maxLength"] == MAX_HOST
    rule = spec["matches"]["items"]["properties"]
    assert rule["header"]["properties"]["value"]["maxLength"] == MAX_MATCH_VALUE
    assert rule["cookie"]["properties"]["value"]["maxLength"] == MAX_MATCH_VALUE


# The CRD's patterns are Go regular expressions (RE2: '$' is the end of the text, unlike Python's re.match), checked
# here against the core's rules on the values that matter: what the API server accepts, the core accepts.
@pytest.mark.parametrize(
    "path", ["/", "/api", "/a b", "/~!@#$%^&*()", "/\r\nx-injected: 1", "/a;b", "/caf\u00e9", "/\t", "/\x7f"]
)
def test_the_cookie_path_pattern_agrees_with_the_core(path: str) -> None:
    cookie = schema()["properties"]["spec"]["properties"]["sticky"]["properties"]["cookie"]["properties"]
    go_pattern = cookie["path"]["pattern"]
    assert go_pattern in cookie["path"]["x-kubernetes-validations"][0]["rule"]
    crd_accepts = re.fullmatch(go_pattern.removeprefix("^").removesuffix("$"), path) is not None
    try:
        CookieSettings(name="ts", path=path)
        core_accepts = True
    except SpecError:
        core_accepts = False
    assert crd_accepts == core_accepts, path


@pytest.mark.parametrize("host", ["shop.example", "*.shop.example", "shop.example\n", "shop.example.", "a" * 254])
def test_the_host_pattern_agrees_with_the_core(host: str) -> None:
    items = schema()["properties"]["spec"]["properties"]["hosts"]["items"]
    pattern = items["pattern"].removeprefix("^").removesuffix("$")
    crd_accepts = re.fullmatch(pattern, host) is not None and len(host) <= items["maxLength"]
    assert crd_accepts == is_host(host), host


def test_status_assignment_bounds_match_the_reader() -> None:
    """The API server refuses a status.assignment the operator's reader would refuse by its bounds alone (so a 90 KB
    junk `runs` never reaches the operator), and lets through everything the operator writes."""
    a = schema()["properties"]["status"]["properties"]["assignment"]["properties"]
    assert a["runs"]["maxLength"] == MAX_RUNS_TEXT
    assert a["backends"]["maxItems"] == a["weights"]["maxItems"] == MAX_BACKENDS
    assert a["backends"]["items"]["maxLength"] == MAX_BACKEND_NAME
    assert (a["weights"]["items"]["minimum"], a["weights"]["items"]["maximum"]) == (0, MAX_WEIGHT)
    assert a["digest"]["maxLength"] == DIGEST_LENGTH
    digest = re.compile(a["digest"]["pattern"])
    assert digest.search(status_digest("u", ("a",), (1,), "0x10000"))
    assert not digest.search("sha256:" + "A" * 64)


def test_defaults_match_the_core() -> None:
    cookie = schema()["properties"]["spec"]["properties"]["sticky"]["properties"]["cookie"]["properties"]
    assert cookie["httpOnly"]["default"] is True
    assert cookie["sameSite"]["default"] == "Lax"
    assert cookie["path"]["default"] == "/"


def test_every_list_and_string_is_bounded_for_cel_cost() -> None:
    def walk(node: dict[str, Any], path: str) -> Iterator[str]:
        t = node.get("type")
        if t == "array" and "maxItems" not in node:
            yield path
        if t == "string" and "maxLength" not in node and "enum" not in node and "format" not in node:
            yield path
        for name, sub in (node.get("properties") or {}).items():
            yield from walk(sub, f"{path}.{name}")
        if isinstance(node.get("items"), dict):
            yield from walk(node["items"], f"{path}[]")

    spec = schema()["properties"]["spec"]
    assert list(walk(spec, "spec")) == []
    assignment = schema()["properties"]["status"]["properties"]["assignment"]
    assert list(walk(assignment, "status.assignment")) == []


def test_docs_mention_every_spec_field() -> None:
    doc = DOC.read_text()
    paths = sorted(set(fields(schema()["properties"]["spec"], "spec")))
    # Each field's own name, in backticks, with its parent: `spec.sticky.cookie.sameSite` or a table row naming it.
    missing = [p for p in paths if f"`{p}`" not in doc]
    assert missing == [], f"docs/crd.md does not mention: {missing}"


def test_docs_mention_every_status_field_and_condition() -> None:
    doc = DOC.read_text()
    status = schema()["properties"]["status"]
    missing = [p for p in sorted(set(fields(status, "status"))) if f"`{p}`" not in doc]
    assert missing == [], missing
    for cond in ("Accepted", "ResolvedRefs", "Published"):
        assert re.search(rf"`{cond}`", doc), cond


def test_the_cores_field_set_is_the_schemas() -> None:
    """The parser refuses fields the schema does not have (the file source has no API server to do it)."""

    def tree(fields: Mapping[str, Any], path: str) -> Iterator[str]:
        for name, sub in fields.items():
            yield f"{path}.{name}"
            if sub is not None:
                yield from tree(sub, f"{path}.{name}")

    local_only = {"spec.backends.endpoints"}
    assert set(tree(SPEC_FIELDS, "spec")) - local_only == set(fields(schema()["properties"]["spec"], "spec"))
