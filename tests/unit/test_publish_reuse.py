"""A Gateway publish read and built beside the held generation (what a replica does for every flip) gives exactly
what a fresh read and a fresh build give, over generated stores: the operator's per-rule first numbers
(`core/model/carried.py`), the receiver's reuse of held parts (`wire/generation.py` `held_parts`) and the builder's
reuse of virtual hosts (`wire/snapshot.py` `ResourceBuilder`) change what is built, never what is served."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit import gatewayapi as golden
from tests.unit.test_translate_per_gateway import stores
from tests.unit.test_wire_gateway_routes import unpacked_routes
from trafficsplit.core.gatewayapi.translate import TranslationMemo, gateway_content, translate
from trafficsplit.core.model.carried import CarriedRules
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.generation import Generation
from trafficsplit.wire import snapshot
from trafficsplit.wire.generation import generation_from_proto, generation_to_proto, held_parts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stores(), st.data())
def test_a_publish_built_beside_the_held_one_is_the_one_built_afresh(bodies: list[dict[str, Any]], data: Any) -> None:
    memo = TranslationMemo()
    first = translate(golden.inputs_of(bodies)[0], memo)
    routes = [b for b in bodies if b["kind"] == "HTTPRoute"]
    changed = data.draw(st.sampled_from(routes))
    changed["spec"]["rules"][0]["backendRefs"][0]["weight"] += 1
    second = translate(golden.inputs_of(bodies)[0], memo)
    for gateway in sorted(first.parts):
        try:
            one = gateway_content(first, gateway, "uid").stamp(3)
            two = gateway_content(second, gateway, "uid").stamp(4)
        except SpecError:
            continue  # refused alone: nothing published
        carried = CarriedRules().carry(one)
        held_msg = generation_to_proto(one, first=carried.numbers())
        carried = carried.carry(two)
        new_msg = generation_to_proto(two, first=carried.numbers())
        held = generation_from_proto(held_msg)
        new = generation_from_proto(new_msg, held_parts(held_msg, held))
        assert new == generation_from_proto(new_msg)
        assert new.routes is not None
        # A rule kept its number exactly when its action did not change.
        kept = (
            {a.key for a in two.routes.actions if a in set(one.routes.actions)} if two.routes and one.routes else set()
        )
        assert {s.key for s in new.splits if s.first_generation == 3} == {s.key for s in new.splits if s.key in kept}
        b = snapshot.ResourceBuilder()
        b.serving(held)
        b.transition(held, new)
        got = b.serving(new, [held])
        assert unpacked_routes(got) == snapshot.serving(new, [held]).routes
        # An equal generation under another object: its table is found again through its virtual hosts.
        again = Generation(new.number, new.splits, new.routes)
        assert unpacked_routes(b.resources(again)) == snapshot.resources(again).routes
