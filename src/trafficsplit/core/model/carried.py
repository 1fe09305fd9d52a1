"""Per rule of one Gateway's published generations, the first generation number that carried it as it is.

A Gateway rule's Envoy routes disclose that number (wire/gateway_routes.py `disclosed_generation`, as a TrafficSplit's
fallback routes disclose its split's), so a rule carried on unchanged keeps the bytes of its virtual host and the
publisher rebuilds only what a generation changed. The number travels as the rule split's `first_generation`
(`generation_to_proto`'s `first`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.routes import RuleAction


@dataclass(frozen=True, slots=True)
class CarriedRule:
    action: RuleAction  # as last published
    number: int  # the first generation that carried `action`


@dataclass(frozen=True, slots=True)
class CarriedRules:
    """What a Gateway's published generations carried, rule by rule (empty: nothing published yet, e.g. after a
    restart, when every rule's first number is the next generation's)."""

    rules: Mapping[str, CarriedRule] = field(default_factory=lambda: MappingProxyType({}))

    def carry(self, gen: Generation) -> CarriedRules:
        """After publishing `gen`: a rule whose action is the one last published keeps its number, any other (new or
        changed: its split, filters, timeouts, retry or mirrors) takes `gen`'s; a rule `gen` lacks is forgotten."""
        if gen.routes is None:
            return CarriedRules()
        out: dict[str, CarriedRule] = {}
        for a in gen.routes.actions:
            prev = self.rules.get(a.key)
            # The translation's memo hands back the same action for an unchanged rule: `is` settles most of them.
            out[a.key] = (
                prev if prev is not None and (prev.action is a or prev.action == a) else CarriedRule(a, gen.number)
            )
        return CarriedRules(MappingProxyType(out))

    @staticmethod
    def held(gen: Generation) -> CarriedRules:
        """What a Gateway's replicas hold (`gen`, read back from them), as a publisher that did not publish it would
        have carried it: each rule with a split at that split's first number (`gen`'s own when 0). A restarted or newly
        leading operator carries on from it, so its first publish keeps the numbers, and the virtual hosts, of the
        rules it does not change. A rule without a split discloses each generation's own number: nothing to carry."""
        if gen.routes is None:
            return CarriedRules()
        return CarriedRules(
            MappingProxyType(
                {
                    a.key: CarriedRule(a, a.split.first_generation or gen.number)
                    for a in gen.routes.actions
                    if a.split is not None
                }
            )
        )

    def numbers(self) -> dict[str, int]:
        """Per rule split key, its first number (`generation_to_proto`'s `first`)."""
        return {key: c.number for key, c in self.rules.items()}
