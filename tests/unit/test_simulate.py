"""SPEC §8: the stickiness bills, checked against direct recomputation and the rules' defining properties."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trafficsplit.core.errors import SpecError
from trafficsplit.core.hashing import key_hash
from trafficsplit.core.simulate import (
    AMDAHL_REPLICAS,
    ClientRow,
    Ring,
    bind_consistent,
    expand_clients,
    parse_client_rows,
    replica_names,
    simulate,
)

MIX = parse_client_rows("major:1:2000,medium:9:400,minor:90:50")


def test_mix_counts_and_names() -> None:
    clients = expand_clients(MIX)
    assert len(clients) == 100 and sum(r for _, r in clients) == 10100
    assert clients[0] == ("major-0", 2000) and clients[1] == ("medium-0", 400) and clients[-1] == ("minor-89", 50)


def test_non_sticky_round_robin() -> None:
    sim = simulate(MIX, 3)
    ns = sim.rules["non-sticky"]
    assert ns.load == (3367, 3367, 3366)
    assert ns.load_after_add == (2525,) * 4
    assert ns.busiest == 0 and ns.busiest_drop == Fraction(3367 - 2525, 3367)
    assert sim.loss["non-sticky"].clients == 0 and sim.loss["non-sticky"].request_share == 0
    assert sim.rebinding["non-sticky"].clients == 0


def test_sticky_modulo_matches_its_definition() -> None:
    sim = simulate(MIX, 3)
    clients = expand_clients(MIX)
    load = [0, 0, 0]
    for name, r in clients:
        load[key_hash(name) % 3] += r
    assert sim.rules["sticky-modulo"].load == tuple(load)
    moved = [(n, r) for n, r in clients if key_hash(n) % 3 != key_hash(n) % 4]
    assert sim.rebinding["sticky-modulo"].clients == len(moved)
    assert sim.rebinding["sticky-modulo"].request_share == Fraction(sum(r for _, r in moved), 10100)
    lost = [r for n, r in clients if key_hash(n) % 3 == 0]
    assert sim.loss["sticky-modulo"].clients == len(lost)
    assert sim.loss["sticky-modulo"].request_share == Fraction(sum(lost), 10100)


def test_ring_lookup_is_first_node_at_or_after_the_hash_wrapping() -> None:
    replicas = replica_names(3)
    nodes = sorted((key_hash(f"{r}#{v}"), i) for i, r in enumerate(replicas) for v in range(200))
    ring = Ring(replicas)
    assert ring.lookup(nodes[0][0]) == nodes[0][1]
    assert ring.lookup(nodes[5][0] + 1) == nodes[6][1]
    assert ring.lookup(nodes[-1][0] + 1) == nodes[0][1]  # past the last node: wrap
    assert ring.lookup(0) == nodes[0][1]


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 12), st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=60, unique=True))
def test_adding_a_replica_only_moves_clients_onto_it(n: int, names: list[str]) -> None:
    before = bind_consistent(names, replica_names(n))
    after = bind_consistent(names, replica_names(n + 1))
    assert all(a in (b, n) for b, a in zip(before, after, strict=True))


def test_bills_on_the_reference_mix() -> None:
    sim = simulate(MIX, 3)
    assert sim.clients == 100 and sim.requests == 10100 and sim.replicas == ("k1", "k2", "k3")
    for rule, r in sim.rules.items():
        assert sum(r.load) == sum(r.load_after_add) == 10100, rule
        assert r.imbalance == Fraction(max(r.load) * 3, 10100)
        assert r.imbalance_after_add == Fraction(max(r.load_after_add) * 4, 10100)
    # Stickiness pins the 2000-request client: both sticky rules are less even than round robin.
    assert sim.rules["sticky-modulo"].imbalance > sim.rules["non-sticky"].imbalance
    assert sim.rules["sticky-consistent"].imbalance > sim.rules["non-sticky"].imbalance
    # The consistent ring rebinds fewer clients than modulo when a replica is added (SPEC §5's reason for the ring).
    assert sim.rebinding["sticky-consistent"].clients < sim.rebinding["sticky-modulo"].clients


def test_serial_fraction_and_amdahl() -> None:
    sim = simulate(MIX, 3)
    s = Fraction(2000, 10100)
    assert sim.serial_fraction == s
    assert [k for k, _ in sim.amdahl] == [*AMDAHL_REPLICAS, None]
    for k, bound in sim.amdahl:
        assert bound == (1 / s if k is None else 1 / (s + (1 - s) / k))
    bounds = [b for _, b in sim.amdahl]
    assert bounds == sorted(bounds) and bounds[-1] == Fraction(101, 20)


@pytest.mark.parametrize(
    ("rows", "n", "fragment"),
    [
        ((), 3, "at least one row"),
        ((ClientRow("a", 1, 1), ClientRow("a", 2, 2)), 3, "duplicate prefix 'a'"),
        ((ClientRow("a", 0, 5),), 3, "sends no requests"),
        ((ClientRow("a", -1, 5),), 3, ">= 0"),
        ((ClientRow("a", 1, 1),), 0, "replicas: must be 1.."),
    ],
)
def test_rejects(rows: tuple[ClientRow, ...], n: int, fragment: str) -> None:
    with pytest.raises(SpecError, match=fragment.replace(".", r"\.").replace("(", r"\(")):
        simulate(rows, n)


@pytest.mark.parametrize("text", ["a:1", "a:x:1", "a:1:-1", "a:1:2:3", "a:²:1", "a:1:²"])
def test_parse_rows_rejects(text: str) -> None:
    with pytest.raises(SpecError, match=r"clients\[0\]"):
        parse_client_rows(text)


def test_peak_drop_compares_the_peaks_whichever_replica_holds_them() -> None:
    # SPEC §8: 1 − (busiest load after) / (busiest load before). Sticky-modulo on the reference mix: the peak is k3's
    # 5150 before and k1's 4450 after adding k4, so the peak drops 13.59 %, though k3 itself drops 65 %.
    sim = simulate(MIX, 3)
    r = sim.rules["sticky-modulo"]
    assert r.load == (2700, 2250, 5150) and r.load_after_add == (4450, 2400, 1800, 1450)
    assert r.peak_drop == 1 - Fraction(4450, 5150)
    assert round(float(r.peak_drop) * 100, 2) == 13.59
