"""Compiled splits and generations: host index, conflicts, numbering, authority normalisation."""

from __future__ import annotations

import pytest

from trafficsplit.core.control.compiler import assemble_generation, compile_split
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.model.compiled import CompiledSplit
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.host import normalize_host


# What Envoy matches virtual hosts with (`ignore_port_in_host_matching`; the same answers through a real Envoy with
# the processor up and down: tests/integration/test_dataplane_untrusted.py): a trailing dot stays.
@pytest.mark.parametrize(
    ("authority", "host"),
    [
        ("Shop.Example.com:8080", "shop.example.com"),
        ("shop.example.com.", "shop.example.com."),
        ("[::1]:80", "[::1]"),
        ("[::1]", "[::1]"),
        ("[::1]:x", "[::1]"),
        ("shop.localhost:x.wild.test", "shop.localhost"),  # what follows the last ':' goes, number or not
        ("shop.localhost:", "shop.localhost"),
        ("shop.localhost:80:80", "shop.localhost:80"),
        ("\u212aey.example", "\u212aey.example"),  # ASCII case folding only, as Envoy: the Kelvin sign stays
    ],
)
def test_normalize_host(authority: str, host: str) -> None:
    assert normalize_host(authority) == host


def test_a_wildcard_needs_a_label_before_its_suffix() -> None:
    a = compile_split(parse_split("prod", "a", {"hosts": ["*.wild.test"], "backends": [{"name": "x", "weight": 1}]}))
    g = Generation(1, (a,))
    assert g.split_for("a.wild.test") is a and g.split_for("a.b.wild.test:80") is a
    assert g.split_for(".wild.test") is None and g.split_for("wild.test") is None


def test_generation_finds_the_split_by_authority() -> None:
    a = compile_split(parse_split("prod", "a", {"hosts": ["a.com"], "backends": [{"name": "x", "weight": 1}]}))
    g = Generation(1, (a,))
    assert g.split_for("A.com:443") is a and g.split_for("b.com") is None
    assert set(g.clusters()) == {"prod/a/x"}


def test_the_older_split_keeps_a_contested_host() -> None:
    a = compile_split(parse_split("prod", "a", {"hosts": ["a.com"], "backends": [{"name": "x", "weight": 1}]}))
    b = compile_split(parse_split("prod", "b", {"hosts": ["a.com", "b.com"], "backends": [{"name": "x", "weight": 1}]}))
    g, rejected = assemble_generation(3, [a, b])
    assert g.splits == (a,) and [r.split for r in rejected] == ["prod/b"] and rejected[0].reason == "HostConflict"


def test_generation_numbers_start_at_one() -> None:
    with pytest.raises(SpecError, match="generation number"):
        Generation(0, ())


def _split(name: str, *hosts: str) -> CompiledSplit:
    return compile_split(parse_split("prod", name, {"hosts": list(hosts), "backends": [{"name": "x", "weight": 1}]}))


def test_a_wildcard_host_serves_every_subdomain_as_envoy_routes_it() -> None:
    # Envoy's virtual host `*.example.com` takes any suffix match, so the processor must find the same split, or the
    # request Envoy routed to the split would get the gateway's 404. Exact hosts win, then the longest wildcard.
    wild, deeper, exact = (
        _split("wild", "*.example.com"),
        _split("deeper", "*.eu.example.com"),
        _split("x", "a.example.com"),
    )
    g = Generation(1, (wild, deeper, exact))
    assert g.split_for("shop.example.com:8080") is wild
    assert g.split_for("a.b.example.com") is wild
    assert g.split_for("shop.eu.example.com") is deeper
    assert g.split_for("a.example.com") is exact
    assert g.split_for("example.com") is None
    assert g.split_for("badexample.com") is None
