"""A split-level rule that both split values check says the same thing from both: the spec value (`SplitSpec`, which
the YAML parser and the HTTPRoute translation build) and the compiled value (`CompiledSplit`, which the publish
receiver builds from a proto). Each rule is written once and both call it, so the messages cannot drift apart.

The rules here are the ones the two values share (endpoint points, persistent mode's cookie, the match count); the
per-field rules both reach through `trafficsplit.core.model.rules` are run through both paths in
test_rules_both_paths.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.model.compiled import CompiledBackend, CompiledMatch, CompiledSplit
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.limits import MAX_MATCHES
from trafficsplit.core.model.persistent import StickyMode
from trafficsplit.core.model.ring import MAX_POINTS
from trafficsplit.core.model.splitspec import BackendSpec, MatchKind, MatchSpec, MatchType, SplitSpec


def spec_problems(**fields: Any) -> tuple[str, ...]:
    values: dict[str, Any] = {
        "namespace": "shop",
        "name": "web",
        "hosts": ("shop.example",),
        "service": None,
        "backends": (BackendSpec(name="stable", service="stable", port=80, weight=1),),
        "cookie": None,
        "endpoint_affinity": False,
        "matches": (),
        "debug_headers": False,
    }
    with pytest.raises(SpecError) as err:
        SplitSpec(**{**values, **fields})
    return err.value.problems


def compiled_problems(**fields: Any) -> tuple[str, ...]:
    values: dict[str, Any] = {
        "namespace": "shop",
        "name": "web",
        "hosts": ("shop.example",),
        "backends": (CompiledBackend(name="stable", weight=1, cluster="shop/web/stable", service="stable", port=80),),
    }
    with pytest.raises(SpecError) as err:
        CompiledSplit(**{**values, **fields})
    return err.value.problems


def parser_problems(spec: dict[str, Any]) -> tuple[str, ...]:
    with pytest.raises(SpecError) as err:
        parse_split("shop", "web", {"hosts": ["shop.example"], "backends": [{"name": "stable", "weight": 1}], **spec})
    return err.value.problems


@pytest.mark.parametrize("points", [0, MAX_POINTS + 1])
def test_endpoint_points_out_of_range_read_the_same_from_both_values(points: int) -> None:
    from_spec = spec_problems(endpoint_points=points)
    assert from_spec == compiled_problems(endpoint_points=points)
    assert parser_problems({"sticky": {"endpointPoints": points}}) == tuple(f"spec.{q}" for q in from_spec)


def test_persistent_without_a_cookie_reads_the_same_from_both_values() -> None:
    from_spec = spec_problems(sticky_mode=StickyMode.PERSISTENT)
    assert from_spec == compiled_problems(persistent=True)
    assert parser_problems({"sticky": {"mode": "persistent"}}) == tuple(f"spec.{q}" for q in from_spec)


def test_too_many_matches_read_the_same_from_both_values() -> None:
    n = MAX_MATCHES + 1
    spec_matches = tuple(
        MatchSpec(kind=MatchKind.HEADER, name="x-beta", type=MatchType.EXACT, value="1", backend="stable")
        for _ in range(n)
    )
    compiled_matches = tuple(
        CompiledMatch(kind=MatchKind.HEADER, name="x-beta", exact="1", pattern=None, backend_index=0) for _ in range(n)
    )
    from_spec = spec_problems(matches=spec_matches)
    assert from_spec == compiled_problems(matches=compiled_matches)
    raw = [{"header": {"name": "x-beta", "value": "1"}, "backend": "stable"}] * n
    assert parser_problems({"matches": raw}) == tuple(f"spec.{q}" for q in from_spec)
