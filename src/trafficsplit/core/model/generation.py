"""Generations: one versioned, whole set of compiled splits, with one Gateway's route table when it serves one.

The value the operator stamps and publishes and each dataplane replica holds. It sits above both things it carries
(`compiled.CompiledSplit`, `model.routes.GatewayRoutes`) and neither of them knows it, so the model has no import
cycle (.importlinter, "the core's plan"). Built once and then only read, so the processor can swap it atomically and
a request in flight keeps the one it started with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from trafficsplit.core.model.compiled import CompiledBackend, CompiledSplit
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.host import normalize_host
from trafficsplit.core.model.limits import MAX_GENERATION, MAX_SPLITS
from trafficsplit.core.model.routes import GatewayRoutes


@dataclass(frozen=True, slots=True)
class GenerationContent:
    """What a generation carries, before it has a number: compilation's result.

    The operator compiles content on every pass and takes a number only when the content differs from what it
    published last (equal content, nothing to publish), then stamps it once: `stamp(number)` is the `Generation`
    that is validated, published and held, so what was checked is exactly what goes out.

    `routes`: a Gateway's route table (`gatewayapi.translate.gateway_content`), whose rules' splits are in `splits`
    without hosts; None for the shared gateway, which serves TrafficSplits by host only.
    """

    splits: tuple[CompiledSplit, ...] = ()
    routes: GatewayRoutes | None = None

    def stamp(self, number: int) -> Generation:
        """This content as generation `number`; raises SpecError when it is not a valid generation."""
        return Generation(number, self.splits, self.routes)


@dataclass(frozen=True)
class Generation:
    """One versioned, whole set of compiled splits. Held whole or not at all; numbers only grow.

    Checks itself (number, hosts served once, clusters used once, a split without hosts only as a rule of the route
    table, each rule's split the one in `splits`), so the operator's stamping and the dataplane's receiver refuse the
    same generations."""

    number: int
    splits: tuple[CompiledSplit, ...]
    # One Gateway's route table (HTTPRoutes), or None: a generation of TrafficSplits only.
    routes: GatewayRoutes | None = None
    by_host: Mapping[str, CompiledSplit] = field(init=False, repr=False, compare=False)
    _has_wildcards: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, CompiledSplit] = {}
        clusters: dict[str, str] = {}
        problems: list[str] = []
        rule_splits = (
            {a.key: a.split for a in self.routes.actions if a.split is not None} if self.routes is not None else {}
        )
        keys: set[str] = set()
        for i, s in enumerate(self.splits):
            if not s.hosts and rule_splits.get(s.key) != s:
                problems.append(
                    f"splits[{i}].hosts: at least one host is required (a split without hosts is a rule of the "
                    "generation's route table, and none has this split)"
                )
            if s.key in keys:
                problems.append(f"splits[{i}]: split {s.key} is listed twice")
            keys.add(s.key)
            for h in s.hosts:
                if h in index:
                    problems.append(f"host {h!r} is served by both {index[h].key} and {s.key}")
                index[h] = s
            for b in s.backends:
                if b.cluster in clusters:
                    problems.append(f"splits[{i}]: cluster {b.cluster!r} is also used by {clusters[b.cluster]}")
                clusters[b.cluster] = s.key
            if not 0 <= s.first_generation <= self.number:
                problems.append(f"splits[{i}].first_generation: {s.first_generation} is not in 0..{self.number}")
        problems += [f"routes: rule {k}'s split is not among the splits" for k in rule_splits if k not in keys]
        if not 1 <= self.number <= MAX_GENERATION:
            problems.append(f"generation number must be 1..{MAX_GENERATION} (2^53 - 1), got {self.number}")
        if len(self.splits) > MAX_SPLITS:
            problems.append(f"splits: {len(self.splits)} splits, at most {MAX_SPLITS} are allowed")
        if problems:
            raise SpecError(problems)
        object.__setattr__(self, "by_host", MappingProxyType(index))
        object.__setattr__(self, "_has_wildcards", any(h.startswith("*.") for h in index))

    @property
    def content(self) -> GenerationContent:
        return GenerationContent(self.splits, self.routes)

    def split_for(self, authority: str) -> CompiledSplit | None:
        """The split serving `authority`: an exact host first, else the longest `*.suffix` host, as Envoy's virtual
        host matching does (so a request Envoy routed to a split's virtual host finds that split here)."""
        host = normalize_host(authority)
        split = self.by_host.get(host)
        if split is not None or not self._has_wildcards:
            return split
        # From the second character: as in Envoy, `*.suffix` needs at least one character before `.suffix`.
        dot = host.find(".", 1)
        while dot != -1:
            split = self.by_host.get("*" + host[dot:])
            if split is not None:
                return split
            dot = host.find(".", dot + 1)
        return None

    def clusters(self) -> dict[str, CompiledBackend]:
        return {b.cluster: b for s in self.splits for b in s.backends}
