"""An HTTPRoute rule's weights as the CLI changes them: which rule (`--rule`, else the only weighted one), the merge
of `--set` into its backendRefs by their split names, the blue-green flip, and the JSON patch that writes them. Pure.

The names are the rule's split's (`gatewayapi.backends.rule_weights`: the Service's name, `NAME-<index>` when two
refs name one Service), so `--set` speaks the names the operator's status and the plan print. A ref of another kind is
not in the split (its share answers 500) and cannot be set here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trafficsplit.cli.common import UsageError, unknown_names
from trafficsplit.cli.kube import Ref
from trafficsplit.core.gatewayapi.backends import find_rule, rule_backends, split_backend_names
from trafficsplit.core.gatewayapi.httproute import HTTPRoute, RouteRule, parse_httproute
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.weights import MAX_WEIGHT

# How kubectl spells the kind in `kind/name`.
ROUTE_KINDS = frozenset({"httproute", "httproutes", "httproute.gateway.networking.k8s.io"})
MAX_RULE_TEXT = 253  # --rule: an index or a rule name (a section name, at most 253 characters)


def route_name(name: str | None) -> str | None:
    """NAME of `httproute/NAME` (any of kubectl's spellings of the kind), else None."""
    if name is None:
        return None
    kind, _, rest = name.partition("/")
    return rest if rest and kind.lower() in ROUTE_KINDS else None


def parse_route(ref: Ref, obj: Mapping[str, Any]) -> HTTPRoute:
    """The core's HTTPRoute; its problems prefixed with the route unless they name it already."""
    try:
        return parse_httproute(obj)
    except SpecError as exc:
        raise SpecError([p if p.startswith(f"{ref.namespace}/") else f"{ref}: {p}" for p in exc.problems]) from exc


def pairs_text(pairs: Sequence[tuple[str, int]]) -> str:
    """`stable=95,canary=5` without validating (a rule's weights may be ones the core refuses: all 0)."""
    return ",".join(f"{n}={w}" for n, w in pairs)


def _rule_text(r: RouteRule) -> str:
    return f"{r.index}" + (f" ({r.name})" if r.name else "") + f": {pairs_text(rule_backends(r)) or 'no Service'}"


def choose_rule(ref: Ref, route: HTTPRoute, rule: str | None) -> RouteRule:
    """`--rule` (an index or a name), else the route's only weighted rule: the one whose split has two or more
    backends, where a weight is a ratio. Errors name the rules there are, with their backends."""
    if rule is not None:
        if len(rule) > MAX_RULE_TEXT:
            raise UsageError(f"--rule: at most {MAX_RULE_TEXT} characters (an index or a rule name)")
        return find_rule(route, rule)
    weighted = [r for r in route.rules if len(rule_backends(r)) >= 2]
    if len(weighted) == 1:
        return weighted[0]
    rules = "; ".join(_rule_text(r) for r in route.rules)
    why = "no rule splits between two or more backends" if not weighted else f"{len(weighted)} rules are weighted"
    raise UsageError(f"{ref}: {why}: give --rule N (its rules: {rules})")


def check_bounds(assignments: Sequence[tuple[str, int]], option: str = "--set") -> None:
    """A backendRef weight is 0..1000000 (the Gateway API CRD's bound, the core's MAX_WEIGHT)."""
    bad = [f"{n}: weight must be 0..{MAX_WEIGHT}, got {w}" for n, w in assignments if not 0 <= w <= MAX_WEIGHT]
    if bad:
        raise UsageError(f"{option}: " + "; ".join(bad))


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleChange:
    """One rule's weights before and after, by split name (`after` may be a list the core refuses: total 0)."""

    ref: Ref
    route: HTTPRoute
    rule: RouteRule
    before: tuple[tuple[str, int], ...]
    after: tuple[tuple[str, int], ...]

    @property
    def changed(self) -> bool:
        return self.before != self.after


def rule_change(
    ref: Ref, route: HTTPRoute, rule: RouteRule, assignments: Sequence[tuple[str, int]], option: str = "--set"
) -> RuleChange:
    """The rule's weights with `assignments` merged in (the others keep theirs, the order is kept)."""
    check_bounds(assignments, option)
    before = tuple(rule_backends(rule))
    names = [n for n, _ in before]
    unknown = [n for n, _ in assignments if n not in names]
    if unknown:
        hint = "A new backendRef needs a port: add it to the route"
        raise unknown_names(option, f"{ref} rule {rule.index} has no backendRef", unknown, names, hint)
    new = dict(assignments)
    return RuleChange(
        ref=ref, route=route, rule=rule, before=before, after=tuple((n, new.get(n, w)) for n, w in before)
    )


def flipped_rule(ref: Ref, route: HTTPRoute, rule: RouteRule) -> RuleChange:
    """Blue-green on a rule: its two split backends, one at 0, trade weights (flip.py's rule for a TrafficSplit)."""
    before = tuple(rule_backends(rule))
    if len(before) != 2 or sorted(w == 0 for _, w in before) != [False, True]:
        raise UsageError(
            f"{ref} rule {rule.index}: flip needs exactly two backends with one at weight 0; it has "
            f"{pairs_text(before) or 'none'}"
        )
    (a, wa), (b, wb) = before
    return RuleChange(ref=ref, route=route, rule=rule, before=before, after=((a, wb), (b, wa)))


def weight_patch(obj: Mapping[str, Any], change: RuleChange) -> list[dict[str, Any]]:
    """The JSON patch (RFC 6902) writing the changed weights into `spec.rules[N].backendRefs[J].weight`.

    It opens with a `test` of the resourceVersion that was read, so the API server applies it only to the object the
    plan was computed from (a concurrent edit fails the patch instead of being overwritten); each changed ref also
    tests its name, so the patch says which ref it means."""
    rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv}] if rv else []
    raw_refs = obj["spec"]["rules"][change.rule.index].get("backendRefs") or []
    names = split_backend_names(change.rule.backend_refs)
    old, new = dict(change.before), dict(change.after)
    for j, raw in enumerate(raw_refs):
        if names[j] not in new or old[names[j]] == new[names[j]]:
            continue
        path = f"/spec/rules/{change.rule.index}/backendRefs/{j}"
        ops.append({"op": "test", "path": f"{path}/name", "value": raw["name"]})
        # `add` on a member replaces it and creates an absent one (a weight left to its default of 1).
        ops.append({"op": "replace" if "weight" in raw else "add", "path": f"{path}/weight", "value": new[names[j]]})
    return ops


def weight_changes(rule: int, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """What differs between two route bodies' rule `rule` weights, one line per changed backendRef."""
    lines = []
    old, new = (dict(rule_backends(parse_httproute(o).rules[rule])) for o in (before, after))
    for n, w in new.items():
        if n in old and old[n] != w:
            lines.append(f"spec.rules[{rule}].backendRefs[name={n}].weight: {old[n]} -> {w}")
    return lines
