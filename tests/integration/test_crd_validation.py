"""The real API server validates TrafficSplits with the CRD's schema and CEL rules, naming the field.

Each invalid case is applied with kubectl against kube-apiserver + etcd; the test asserts the rejection names the
field path and says why. Valid ones are stored with the defaults applied.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support import crdtable
from tests.support.controlplane import ControlPlane
from tests.support.operator import apply, get_ts, ts_manifest

pytestmark = [pytest.mark.k8s]


def base() -> dict[str, Any]:
    return {
        "hosts": ["shop.example"],
        "backends": [
            {"name": "stable", "service": "shop-v1", "port": 80, "weight": 95},
            {"name": "canary", "service": "shop-v2", "port": 80, "weight": 5},
        ],
        "sticky": {"cookie": {"name": "ts-shop"}},
    }


def edit(fn: Any) -> dict[str, Any]:
    s = base()
    fn(s)
    return s


def _set(path: str, value: Any) -> Any:
    def f(s: dict[str, Any]) -> None:
        node: Any = s
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[int(k)] if k.isdigit() else node.setdefault(k, {})
        last = keys[-1]
        if last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value

    return f


INVALID: list[tuple[str, dict[str, Any], list[str]]] = [
    ("duplicate-names", edit(_set("backends.1.name", "stable")), ["spec.backends", "backend names must be unique"]),
    ("total-zero", edit(lambda s: [b.update(weight=0) for b in s["backends"]]),
     ["spec.backends", "the total weight must be > 0"]),
    ("negative-weight", edit(_set("backends.0.weight", -1)),
     ["spec.backends[0].weight", "should be greater than or equal to 0"]),
    ("weight-over-1e6", edit(_set("backends.1.weight", 1_000_001)),
     ["spec.backends[1].weight", "should be less than or equal to 1000000"]),
    ("65-backends", edit(lambda s: s.update(backends=[{"name": f"b{i}", "weight": 1} for i in range(65)])),
     ["spec.backends", "must have at most 64 items"]),
    ("bad-cookie-name", edit(_set("sticky.cookie.name", "ts shop;")), ["spec.sticky.cookie.name", "should match"]),
    ("samesite-none-without-secure", edit(_set("sticky.cookie.sameSite", "None")),
     ["spec.sticky.cookie.sameSite", "SameSite=None requires secure=true"]),
    ("partitioned-without-secure", edit(_set("sticky.cookie.partitioned", True)),
     ["spec.sticky.cookie.partitioned", "Partitioned requires secure=true"]),
    ("samesite-bogus", edit(_set("sticky.cookie.sameSite", "Sometimes")),
     ["spec.sticky.cookie.sameSite", "Unsupported value"]),
    ("key-header-uppercase", edit(_set("sticky.header.name", "X-User")), ["spec.sticky.header.name", "should match"]),
    ("key-header-cookie", edit(_set("sticky.header.name", "cookie")),
     ["spec.sticky.header.name", "cannot carry a sticky key"]),
    ("persistent-without-cookie", edit(lambda s: s.update(sticky={"mode": "persistent", "header": {"name": "x-u"}})),
     ["spec.sticky.mode", "sticky.mode persistent needs sticky.cookie"]),
    ("drain-with-weight", edit(lambda s: (s["sticky"].update(mode="persistent"), s["backends"][1].update(drain=True))),
     ["spec.backends[1].drain", "drain: true needs weight 0"]),
    ("drain-without-persistent", edit(lambda s: s["backends"][1].update(weight=0, drain=True)),
     ["spec.backends", "backends[].drain needs spec.sticky.mode: persistent"]),
    ("sticky-mode-bogus", edit(_set("sticky.mode", "forever")), ["spec.sticky.mode", "Unsupported value"]),
    ("assignment-bogus", edit(lambda s: s.update(assignment="ring")), ["spec.assignment", "Unsupported value"]),
    ("match-unknown-backend", edit(lambda s: s.update(matches=[{"header": {"name": "x-canary", "value": "1"},
                                                               "backend": "nope"}])),
     ["spec.matches", "must name one of spec.backends"]),
    ("match-header-and-cookie", edit(lambda s: s.update(matches=[{"header": {"name": "x", "value": "1"},
                                                                 "cookie": {"name": "c", "value": "1"},
                                                                 "backend": "canary"}])),
     ["spec.matches[0]", "give exactly one of header or cookie"]),
    ("match-neither", edit(lambda s: s.update(matches=[{"backend": "canary"}])),
     ["spec.matches[0]", "give exactly one of header or cookie"]),
    ("match-bad-type", edit(lambda s: s.update(matches=[{"header": {"name": "x", "value": "1", "type": "Glob"},
                                                        "backend": "canary"}])),
     ["spec.matches[0].header.type", "Unsupported value"]),
    ("backend-name-not-dns-label", edit(_set("backends.0.name", "Stable_1")),
     ["spec.backends[0].name", "should match"]),
    ("no-backends", edit(lambda s: s.update(backends=[])), ["spec.backends", "at least 1 items"]),
    ("no-hosts-no-service", edit(lambda s: s.pop("hosts")), ["spec.hosts", "give at least one host"]),
    ("host-with-port", edit(_set("hosts", ["shop.example:8080"])), ["spec.hosts[0]", "should match"]),
    ("port-out-of-range", edit(_set("backends.0.port", 70000)),
     ["spec.backends[0].port", "should be less than or equal to 65535"]),
    ("negative-max-age", edit(_set("sticky.cookie.maxAge", -5)),
     ["spec.sticky.cookie.maxAge", "should be greater than or equal to 0"]),
    ("cookie-path-relative", edit(_set("sticky.cookie.path", "api")), ["spec.sticky.cookie.path", "should match"]),
    # A CR/LF in an attribute would become a response header of the tenant's choosing (Set-Cookie is rendered as is).
    ("cookie-path-crlf", edit(_set("sticky.cookie.path", "/\r\nx-injected: 1")),
     ["spec.sticky.cookie.path", "printable ASCII without ';' or control characters"]),
    ("cookie-path-non-ascii", edit(_set("sticky.cookie.path", "/caf\u00e9")),
     ["spec.sticky.cookie.path", "printable ASCII"]),
    ("cookie-domain-newline", edit(_set("sticky.cookie.domain", "example.com\n")),
     ["spec.sticky.cookie.domain", "should match"]),
    ("host-newline", edit(_set("hosts", ["shop.example\nx"])), ["spec.hosts[0]", "should match"]),
    ("match-value-too-long", edit(lambda s: s.update(matches=[{"header": {"name": "x", "value": "v" * 4097},
                                                              "backend": "canary"}])),
     ["spec.matches[0].header.value", "may not be more than 4096"]),
    ("weight-not-integer", edit(_set("backends.0.weight", "95")),
     ["spec.backends[0].weight", "must be of type integer"]),
]  # fmt: skip


@pytest.mark.parametrize(("case", "spec", "expect"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_trafficsplit_is_rejected_naming_the_field(
    trafficsplit_crd: ControlPlane, namespace: str, case: str, spec: dict[str, Any], expect: list[str]
) -> None:
    crdtable.assert_refused(trafficsplit_crd, case, ts_manifest(namespace, case, spec), expect, strict=False)
    crdtable.assert_absent(trafficsplit_crd, "ts", case, namespace)


def test_invalid_table_is_large_enough() -> None:
    assert len(INVALID) >= 12


def test_valid_split_is_accepted_with_defaults(trafficsplit_crd: ControlPlane, namespace: str) -> None:
    spec = base()
    spec["matches"] = [{"cookie": {"name": "beta", "value": "yes"}, "backend": "canary"}]
    del spec["backends"][0]["port"]
    apply(trafficsplit_crd, ts_manifest(namespace, "shop", spec))
    got = get_ts(trafficsplit_crd, namespace, "shop")["spec"]
    cookie = got["sticky"]["cookie"]
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Lax" and cookie["path"] == "/"
    assert cookie["secure"] is False and got["sticky"]["endpointAffinity"] is False
    assert got["backends"][0]["port"] == 80
    assert got["matches"][0]["cookie"]["type"] == "Exact"
    assert got["debugHeaders"] is False


@pytest.mark.parametrize(
    "spec",
    [
        edit(lambda s: (s.pop("hosts"), s.update(service="shop"))),  # hosts derived from the root Service
        edit(lambda s: s["sticky"]["cookie"].update(sameSite="None", secure=True)),
        edit(lambda s: (s.update(assignment="minimal"), s["sticky"].update(mode="persistent", header={"name": "x-u"}))),
        edit(lambda s: s.update(backends=[{"name": f"b{i}", "weight": 1_000_000} for i in range(64)])),
        edit(lambda s: s.update(backends=[{"name": "only", "weight": 1}, {"name": "off", "weight": 0}])),
        edit(lambda s: (s["sticky"].update(mode="persistent"), s["backends"][0].update(weight=0, drain=True))),
        edit(
            lambda s: s.update(
                matches=[
                    {"header": {"name": "x-user", "type": "RegularExpression", "value": "^a.*"}, "backend": "canary"}
                ]
            )
        ),
    ],
    ids=[
        "service-only",
        "samesite-none-secure",
        "minimal-persistent-header",
        "64-backends-max-weights",
        "zero-weight-allowed",
        "persistent-drain",
        "regex-match",
    ],
)
def test_valid_edge_cases_are_accepted(trafficsplit_crd: ControlPlane, namespace: str, spec: dict[str, Any]) -> None:
    apply(trafficsplit_crd, ts_manifest(namespace, "edge", copy.deepcopy(spec)))
    assert get_ts(trafficsplit_crd, namespace, "edge")["spec"]["backends"]


def test_printer_columns(trafficsplit_crd: ControlPlane, namespace: str) -> None:
    apply(trafficsplit_crd, ts_manifest(namespace, "shop", base()))
    out = trafficsplit_crd.kubectl("get", "ts", "-n", namespace).stdout.splitlines()
    assert out[0].split() == ["NAME", "HOSTS", "WEIGHTS", "STICKY", "PUBLISHED", "AGE"]
    assert "ts-shop" in out[1] and "shop.example" in out[1]


def test_status_is_a_subresource(trafficsplit_crd: ControlPlane, namespace: str) -> None:
    """A spec update cannot write status (only the operator, through /status, can)."""
    m = ts_manifest(namespace, "shop", base())
    apply(trafficsplit_crd, m)
    trafficsplit_crd.kubectl(
        "patch", "ts", "shop", "-n", namespace, "--type=merge", "-p", '{"status": {"weights": "forged=1"}}'
    )
    assert "status" not in get_ts(trafficsplit_crd, namespace, "shop") or (
        get_ts(trafficsplit_crd, namespace, "shop").get("status", {}).get("weights") != "forged=1"
    )
    trafficsplit_crd.kubectl(
        "patch",
        "ts",
        "shop",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status": {"weights": "stable=95,canary=5"}}',
    )
    assert get_ts(trafficsplit_crd, namespace, "shop")["status"]["weights"] == "stable=95,canary=5"
