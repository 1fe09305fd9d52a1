"""Core generation ↔ publish proto: a round trip is lossless, and a bad proto is refused with every problem named."""

from __future__ import annotations

import pytest

from tests.unit.wire_golden import sample_generation
from trafficsplit.core.control.compiler import assemble_generation, compile_split
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.model.compiled import CompiledSplit, Endpoint
from trafficsplit.core.model.errors import SpecError
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.wire.generation import generation_from_proto, generation_to_proto, held_parts


def _gen() -> pb.Generation:
    spec = parse_split(
        "ns",
        "shop",
        {
            "hosts": ["shop.example"],
            "backends": [{"name": "stable", "weight": 95}, {"name": "canary", "weight": 5}],
            "sticky": {
                "cookie": {
                    "name": "ts",
                    "maxAge": 60,
                    "sameSite": "Strict",
                    "domain": "example",
                    "secure": True,
                    "partitioned": True,
                }
            },
            "matches": [
                {"header": {"name": "X-Beta", "value": "1"}, "backend": "canary"},
                {"cookie": {"name": "grp", "value": "b.*", "type": "RegularExpression"}, "backend": "canary"},
            ],
            "debugHeaders": True,
        },
    )
    split = compile_split(spec, {"stable": [Endpoint("10.0.0.1", 80), Endpoint("10.0.0.2", 80, ready=False)]})
    gen, _ = assemble_generation(3, [split])
    return generation_to_proto(gen, origin="test")


def _set(obj: object, field: str, value: object) -> object:
    setattr(obj, field, value)
    return obj


def _renamed(split: pb.Split) -> pb.Split:
    """The same hosts under another split name (so its clusters differ)."""
    other = pb.Split()
    other.CopyFrom(split)
    other.name = "other"
    for b in other.backends:
        b.cluster = f"ns/other/{b.name}"
    return other


def test_round_trip_is_lossless() -> None:
    msg = _gen()
    gen = generation_from_proto(msg)
    again = generation_to_proto(gen, origin="test")
    assert again == msg
    split = gen.split_for("SHOP.example:8080")
    assert split is not None and split.cookie is not None
    assert split.cookie.max_age == 60 and split.cookie.domain == "example"
    assert split.matches[0].name == "x-beta" and split.matches[1].pattern is not None
    assert [e.ready for e in split.backends[0].endpoints] == [True, False]


def test_session_cookie_has_no_max_age() -> None:
    msg = _gen()
    msg.splits[0].cookie.ClearField("max_age")
    split = generation_from_proto(msg).splits[0]
    assert split.cookie is not None and split.cookie.max_age is None


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda m: _set(m, "number", 0), "number"),
        (lambda m: [_set(b, "weight", 0) for b in m.splits[0].backends], "total weight"),
        (
            lambda m: (m.splits[0].ClearField("matches"), _set(m.splits[0].backends[1], "name", "stable")),
            "duplicate",
        ),
        (lambda m: _set(m.splits[0].backends[1], "cluster", m.splits[0].backends[0].cluster), "also used"),
        (lambda m: _set(m.splits[0].backends[1], "cluster", ""), "cluster: required"),
        (lambda m: _set(m.splits[0].matches[1], "value", "("), "regular expression"),
        (lambda m: _set(m.splits[0].matches[0], "backend", "nope"), "not one of the backends"),
        (lambda m: _set(m.splits[0].cookie, "name", "bad name"), "cookie name"),
        (lambda m: _set(m.splits[0].cookie, "same_site", "Sometimes"), "same_site"),
        (lambda m: _set(m.splits[0].backends[0].endpoints[0], "port", 0), "endpoints[0]"),
        (lambda m: m.splits[0].ClearField("hosts"), "at least one host"),
        (lambda m: m.splits.append(_renamed(m.splits[0])), "served by both"),
    ],
)
def test_bad_generations_are_refused_with_the_reason(mutate: object, expected: str) -> None:
    msg = _gen()
    mutate(msg)  # type: ignore[operator]
    with pytest.raises(SpecError) as err:
        generation_from_proto(msg)
    assert expected in str(err.value)


def test_a_held_split_carried_unchanged_is_reused_not_compiled_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The receiver's path for a publish that changes one split: the others are the held objects (so the publisher's
    resource cache hits), only the changed one is converted, and the result equals a conversion from scratch."""
    from trafficsplit.wire import generation as wire

    held_msg = generation_to_proto(sample_generation(1))
    assert len(held_msg.splits) >= 2
    held = generation_from_proto(held_msg)
    new_msg = pb.Generation()
    new_msg.CopyFrom(held_msg)
    new_msg.number = 2
    new_msg.splits[0].backends[0].weight += 1
    converted: list[str] = []
    real = wire._split_from_proto

    def counting(s: pb.Split, path: str, problems: list[str]) -> CompiledSplit | None:
        converted.append(s.name)
        return real(s, path, problems)

    monkeypatch.setattr(wire, "_split_from_proto", counting)
    got = generation_from_proto(new_msg, held_parts(held_msg, held))
    assert converted == [new_msg.splits[0].name]
    assert all(a is b for a, b in zip(got.splits[1:], held.splits[1:], strict=True))
    monkeypatch.setattr(wire, "_split_from_proto", real)
    assert got == generation_from_proto(new_msg)
