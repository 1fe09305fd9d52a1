"""Gateway API in the operator: the watched objects kept parsed, one `Fleet` per Gateway of our class, and the
Gateway API status written after the replicas ACK.

Each pass (the engine's, so one debounce and one store serve both APIs) translates the store with the pure core
(`gatewayapi.translate.translate`) one Gateway at a time, through the plane's `TranslationMemo`: a Gateway whose
inputs (its Gateway and class, its routes and what they name) did not change is not translated again, so one tenant's
routes never slow another Gateway's change. Then, per Gateway of our class:

- its replicas are the endpoints of its publish Service (`dataplane_names.names_for`, port `publish`) in the
  operator's namespace or in the Gateway's own, as its class places it (GatewayParameters `placement`); a Gateway
  its class's caps refuse (`core.gatewayapi.caps`) gets no data plane and says `Programmed` False, NoResources;
  each Gateway has a `Fleet` of its own, so one Gateway's stuck or refusing replicas never hold back another's
  (a fleet is one worker per replica, and nothing here waits on a worker);
- its content (`ContentFor`: the route tables and rule splits it serves) is numbered from the engine's one counter
  and published only when it changed, or when a replica reports holding a higher number than this Gateway's;
- `since` keeps, per object (the Gateway, each route with a parent on it), the `metadata.generation` last translated
  and the first number that carried it: an object is *served* once every replica of the Gateway ACKed that number.

Status, written only by the leader through the status subresource (`GatewayStatusSink`): the GatewayClass at once;
the Gateway and its listeners with `Programmed` True once served (else `Unknown, Pending` saying what is awaited) and
`status.addresses` from the provisioner; each route's parent entry for one of our Gateways once served, the other
controllers' entries untouched (`core.gatewayapi.status`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from trafficsplit.core.control.resolve import ServiceInfo, SliceInfo, slices_by_service
from trafficsplit.core.control.status import EventIntent
from trafficsplit.core.gatewayapi.backend_tls import BackendTlsPolicy, parse_backend_tls_policy
from trafficsplit.core.gatewayapi.caps import over_caps
from trafficsplit.core.gatewayapi.conditions import (
    AncestorStatus,
    GatewayReason,
    GatewayStatus,
    ListenerSetStatus,
    ParentStatus,
    PolicyStatus,
    RouteReason,
)
from trafficsplit.core.gatewayapi.httproute import HTTPRoute, ParentRef, parse_httproute
from trafficsplit.core.gatewayapi.inputs import parent_gateway
from trafficsplit.core.gatewayapi.listener_sets import set_certificate_secrets
from trafficsplit.core.gatewayapi.listeners import ca_configmaps, certificate_secrets
from trafficsplit.core.gatewayapi.objects import (
    Gateway,
    GatewayClass,
    ListenerSet,
    Namespace,
    ReferenceGrant,
    parse_gateway,
    parse_gateway_class,
    parse_listener_set,
    parse_namespace,
    parse_reference_grant,
)
from trafficsplit.core.gatewayapi.parameters import GatewayParameters, Placement, parameters_or_refusal
from trafficsplit.core.gatewayapi.policy import Policy, parse_policy
from trafficsplit.core.gatewayapi.reading import CONTROLLER_NAME
from trafficsplit.core.gatewayapi.status import (
    NotProvisioned,
    class_status_body,
    gateway_status_body,
    listener_set_status_body,
    policy_ancestors,
    refused_accepted,
    route_parents,
    with_refusals,
)
from trafficsplit.core.gatewayapi.tables import (
    HeldSplits,
    TableSeed,
    continued_why,
    held_fit,
    held_tables,
    rebuilt_rule_message,
    route_served_before,
)
from trafficsplit.core.gatewayapi.translate import (
    ContentMemo,
    Inputs,
    Translation,
    TranslationMemo,
    gateway_content,
    translate,
)
from trafficsplit.core.model.assignment import SlotTable
from trafficsplit.core.model.carried import CarriedRules
from trafficsplit.core.model.compiled import CompiledSplit
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.generation import GenerationContent
from trafficsplit.core.model.routes import RuleKey
from trafficsplit.core.model.tls import CaConfigMap, TlsSecret, parse_ca_configmap, parse_tls_secret
from trafficsplit.core.model.vocabulary import EventReason, EventType
from trafficsplit.operator.certificates import CertificateTiming, NamedReader, ObjectGetter
from trafficsplit.operator.cluster import Replica, replicas_from_slices
from trafficsplit.operator.dataplane_names import PUBLISH_PORT_NAME, names_for
from trafficsplit.operator.fleet import Backoff, Fleet, Numbering
from trafficsplit.operator.metrics import BackendState, FleetState, backend_states, gateway_label
from trafficsplit.operator.provision import ProvisionError
from trafficsplit.operator.route_status_memo import RouteSeen, RouteStatusMemo
from trafficsplit.operator.store import Key, Parse, Refused, WatchStore, object_key
from trafficsplit.wire.generation import ProtoParts, generation_from_proto, generation_to_proto

log = logging.getLogger("trafficsplit.operator.gateways")

CLOSE_WAIT_SECONDS = 30.0  # how long a deleted Gateway's close waits for its ensure in flight

GATEWAY_KINDS = (
    "gatewayclass",
    "gateway",
    "httproute",
    "referencegrant",
    "namespace",
    "gatewayparameters",
    "trafficsplitpolicy",
    "backendtlspolicy",
    "listenerset",
)


def _backend_tls_version(btp: BackendTlsPolicy, ancestor: AncestorStatus) -> int:
    """What a BackendTLSPolicy's status on a Gateway follows from: its metadata.generation and its conditions there
    (a CA ConfigMap fixed or broken changes them, not the generation), so the status waits for the generation that
    first carried both."""
    return hash((btp.meta.generation, ancestor.conditions))


def _refusing(kind: str, parse: Callable[[Mapping[str, Any]], Any], keep_last: bool = False) -> Parse:
    """`parse`, with a body it refuses absent. The API server validated it against the CRD, so this is a body our
    stricter bounds refuse: it is left out (as if absent) and said once per version. `keep_last`: the object keeps its
    last accepted value instead (`Refused`), as a TrafficSplit keeps its last good form, so a Gateway's data plane and
    its cookie keys, or a served route, are not removed by an edit we cannot take; its status and an Event say why.
    Not for the kinds that grant or select (ReferenceGrants, Namespaces, classes, policies): a body refused there
    fails closed."""

    def parsed(body: Mapping[str, Any]) -> Any:
        try:
            return parse(body)
        except SpecError as exc:
            problems = "; ".join(exc.problems)[:2000]
            if keep_last:
                log.warning("%s %s/%s refused, its last accepted form is kept: %s", kind, *object_key(body), problems)
                generation = (body.get("metadata") or {}).get("generation")
                return Refused(generation if isinstance(generation, int) else 0, problems)
            log.warning("%s %s/%s left out: %s", kind, *object_key(body), problems)
            return None

    return parsed


_PARSERS: Mapping[str, Parse] = {
    "gatewayclass": _refusing("gatewayclass", parse_gateway_class),
    "gateway": _refusing("gateway", parse_gateway, keep_last=True),
    "httproute": _refusing("httproute", parse_httproute, keep_last=True),
    "referencegrant": _refusing("referencegrant", parse_reference_grant),
    "namespace": _refusing("namespace", parse_namespace),
    "gatewayparameters": parameters_or_refusal,
    "trafficsplitpolicy": _refusing("trafficsplitpolicy", parse_policy),
    # Only a body whose metadata or targets we refuse is left out; a validation we cannot serve is an Invalid policy
    # whose ports are refused (backend_tls.parse_backend_tls_policy), never cleartext.
    "backendtlspolicy": _refusing("backendtlspolicy", parse_backend_tls_policy),
    # A set whose body we refuse is left out: its listeners are not added (the Gateway's own are unaffected).
    "listenerset": _refusing("listenerset", parse_listener_set),
}
# The kinds whose status we write: what a write needs of each object is kept (`Stored`).
_STATUS_KINDS = frozenset(
    {"gatewayclass", "gateway", "httproute", "trafficsplitpolicy", "backendtlspolicy", "listenerset"}
)

# What a Gateway serves, from the translation: its route tables and rule splits (`gateway_content`).
ContentFor = Callable[[Translation, str, str], GenerationContent]


class Address(Protocol):
    @property
    def type(self) -> str: ...

    @property
    def value(self) -> str: ...


class Provisioner(Protocol):
    """The per-Gateway data plane (`provisioner.Provisioner`): created or updated for a Gateway, returning its
    `status.addresses` (raising `ProvisionError`, its `reason` for the status, for a Gateway it refuses or whose
    object names are taken); the data plane of every Gateway whose uid is not in `live` removed."""

    async def ensure(self, gateway: Gateway, parameters: GatewayParameters) -> Sequence[Address]: ...

    async def remove_absent(self, live: Iterable[str]) -> Sequence[str]: ...

    async def remove_gateway(self, gateway: Gateway) -> int: ...

    def publish_token(self, uid: str) -> str | None:
        """The Gateway's own publish token, the only one its replicas accept (None: not applied yet)."""
        ...


class GatewayEventSink(Protocol):
    """Posts one Event about a Gateway API object (`kind`, `key`, its `uid`)."""

    async def __call__(self, kind: str, key: Key, uid: str, event: EventIntent) -> None: ...


class GatewayStatusSink(Protocol):
    """Writes one object's whole `status` through the status subresource, conditional on `resource_version` (a
    conflict is retried on the next pass, from the newer object)."""

    async def __call__(self, kind: str, key: Key, resource_version: str, status: Mapping[str, Any]) -> None: ...


@dataclass(frozen=True, slots=True)
class Stored:
    """What a status write needs of the object as last seen: which object it is (a name deleted and created again is
    another object), its version and its status."""

    uid: str
    resource_version: str
    status: Mapping[str, Any]


# One Gateway's rules its replicas refused alone: route (`namespace/name`) → rule index → (replica, message) pairs.
RefusedRules = Mapping[str, Mapping[int, tuple[tuple[str, str], ...]]]


@dataclass(kw_only=True)
class GatewayStore(WatchStore):
    """What the Gateway API plane's watches have seen, parsed (a body refused is absent), and for the kinds whose
    status we write, the object as last seen (`stored`)."""

    parsers: ClassVar[Mapping[str, Parse]] = _PARSERS
    classes: dict[Key, GatewayClass] = field(default_factory=dict)
    gateways: dict[Key, Gateway] = field(default_factory=dict)
    routes: dict[Key, HTTPRoute] = field(default_factory=dict)
    grants: dict[Key, ReferenceGrant] = field(default_factory=dict)
    namespaces: dict[Key, Namespace] = field(default_factory=dict)
    # GatewayParameters by name: the value, or why its body was refused (a GatewayClass naming it says so)
    parameters: dict[Key, GatewayParameters | str] = field(default_factory=dict)
    # The Secrets our HTTPS listeners' certificateRefs name, read by name (certificates.py): not watched, so a
    # Secret no listener of ours names never reaches this memory.
    secrets: dict[Key, TlsSecret] = field(default_factory=dict)
    # The ConfigMaps their ports' client validations name (CA bundles), read by name likewise.
    configmaps: dict[Key, CaConfigMap] = field(default_factory=dict)
    # TrafficSplitPolicies: what a TrafficSplit says beyond weights, attached to HTTPRoutes (core/gatewayapi/policy.py).
    policies: dict[Key, Policy] = field(default_factory=dict)
    # BackendTLSPolicies: TLS to the Services our routes send to (core/gatewayapi/backend_tls.py).
    backend_tls: dict[Key, BackendTlsPolicy] = field(default_factory=dict)
    # ListenerSets: listeners added to the Gateways they name (core/gatewayapi/listener_sets.py).
    listener_sets: dict[Key, ListenerSet] = field(default_factory=dict)
    stored: dict[tuple[str, Key], Stored] = field(default_factory=dict)
    # (kind, key) → why its current body was refused while its last accepted value is kept (`Refused`)
    refused: dict[tuple[str, Key], Refused] = field(default_factory=dict)

    def table(self, kind: str) -> dict[Key, Any]:
        tables: dict[str, dict[Key, Any]] = {
            "gatewayclass": self.classes,
            "gateway": self.gateways,
            "httproute": self.routes,
            "referencegrant": self.grants,
            "namespace": self.namespaces,
            "gatewayparameters": self.parameters,
            "trafficsplitpolicy": self.policies,
            "backendtlspolicy": self.backend_tls,
            "listenerset": self.listener_sets,
        }
        return tables[kind]

    def refusal(self, kind: str, key: Key, refused: Refused | None) -> None:
        if refused is None:
            self.refused.pop((kind, key), None)
        else:
            self.refused[(kind, key)] = refused

    def seen(self, kind: str, key: Key, body: Mapping[str, Any] | None) -> None:
        """Keep what a status write needs of the kinds whose status we write."""
        if kind not in _STATUS_KINDS:
            return
        if body is None:
            self.stored.pop((kind, key), None)
            return
        meta = body.get("metadata") or {}
        status = body.get("status")
        self.stored[(kind, key)] = Stored(
            uid=str(meta.get("uid") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
            status=status if isinstance(status, Mapping) else {},
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RebuiltTable:
    """A rule's `assignment: minimal` table this leadership rebuilt: its AssignmentRebuilt Warning, still to post."""

    route: Key
    split: str  # the rule's split key
    message: str


@dataclass(kw_only=True)
class GatewayPublishing:
    """One Gateway's fleet and what this leadership published to it."""

    fleet: Fleet
    created: float  # event-loop time: numbering waits (bounded) for every replica to answer once
    uid: str = ""  # the Gateway's metadata.uid: one deleted and created again under its name is another Gateway
    replicas: tuple[Replica, ...] | None = None  # as last given to the fleet
    number: int = 0
    content: GenerationContent | None = None
    backends: tuple[BackendState, ...] = ()  # the metrics' view of `content`'s splits, built once per content
    refused: str | None = None  # why its current content could not be numbered (a status message)
    since: dict[str, tuple[int, int]] = field(default_factory=dict)  # object → (metadata.generation, first number)
    carried: CarriedRules = field(default_factory=CarriedRules)  # each published rule's first number (its routes')
    proto: ProtoParts = field(default_factory=ProtoParts)  # the messages its last payload was built from
    provisioned: tuple[int, GatewayParameters] | None = None  # the Gateway generation and parameters last ensured
    provisioning: asyncio.Task[None] | None = None
    ensured_at: float = 0.0  # event-loop time of the last successful ensure (re-ensured every reprovision_seconds)
    # The last ensure failed: why (the status says it), for which (generation, parameters), and when to try again
    # (fleet.Backoff: a Gateway that keeps failing is tried every half-minute at most, not on every pass).
    unprovisioned: NotProvisioned | None = None
    failed_for: tuple[int, GatewayParameters] | None = None
    retry_at: float = 0.0
    provision_backoff: Backoff = field(default_factory=Backoff)
    addresses: tuple[Mapping[str, str], ...] | None = None
    # The splits of the generation its replicas hold (their GetHeld replies), read once per held number: where a
    # restarted or newly leading operator continues `assignment: minimal` slot tables from.
    held: HeldSplits = field(default_factory=HeldSplits)

    # The same generation's rules with their first numbers, which this leadership's first publish carries on.
    held_rules: CarriedRules = field(default_factory=CarriedRules)

    def held_splits(self) -> HeldSplits:
        msg = self.fleet.held_generation
        if msg is not None and msg.number != self.held.number:
            try:
                gen = generation_from_proto(msg)
                splits, rules = gen.splits, CarriedRules.held(gen)
            except SpecError:  # a replica of another version, a corrupted reply: nothing rather than a guess
                splits, rules = (), CarriedRules()
            self.held, self.held_rules = HeldSplits(msg.number, tuple(splits)), rules
        return self.held

    def served(self, number: int) -> bool:
        return number > 0 and self.fleet.acked_by_all() >= number

    def waiting(self, number: int | None, publish_service: Key) -> str:
        acks = self.fleet.acks()
        if not acks:
            return f"no replica of the data plane yet (Service {publish_service[0]}/{publish_service[1]} lists none)"
        if self.refused is not None:
            return f"not published: {self.refused}"
        if number is None or number == 0:
            return "not published yet"
        behind = sorted(a.name for a in acks if a.acked < number)
        return f"waiting for {len(behind)} of {len(acks)} replicas to acknowledge generation {number}: " + ", ".join(
            behind[:10]
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewaySettings:
    origin: str
    namespace: str  # the operator's: where ControllerNamespace data planes (and their publish Services) live
    # Where a Gateway's data plane lives when its class's parameters do not say (the provisioner's settings), and
    # the replicas a data plane runs when they do not say (for the caps).
    placement: Placement = Placement.CONTROLLER_NAMESPACE
    default_replicas: int = 2
    probe_timeout: float = 3.0
    port_name: str = PUBLISH_PORT_NAME
    # Every Gateway's data plane is ensured again this often even when nothing changed: the cookie keys' rotation is
    # a function of the time (provision.cookie_keys_step), and a hand-deleted object comes back.
    reprovision_seconds: float = 300.0
    # How often the listeners' Secrets are read again (certificates.py).
    certificates: CertificateTiming = field(default_factory=CertificateTiming)


class GatewayPlane:
    def __init__(
        self,
        settings: GatewaySettings,
        make_fleet: Callable[[str], Fleet],
        poke: Callable[[], None],
        *,
        content_for: ContentFor = gateway_content,
        provisioner: Provisioner | None = None,
        status_sink: GatewayStatusSink | None = None,
        event_sink: GatewayEventSink | None = None,
        secret_getter: ObjectGetter | None = None,
        configmap_getter: ObjectGetter | None = None,
    ) -> None:
        self.settings = settings
        self.store = GatewayStore()
        self._make_fleet = make_fleet
        self._poke = poke
        self._content_for = content_for
        self._provisioner = provisioner
        self._sink = status_sink
        self._events = event_sink
        timing = settings.certificates
        self._certificates = (
            NamedReader(secret_getter, self.store.secrets, parse_tls_secret, poke, timing, kind="Secret")
            if secret_getter is not None
            else None
        )
        self._cas = (
            NamedReader(configmap_getter, self.store.configmaps, parse_ca_configmap, poke, timing, kind="ConfigMap")
            if configmap_getter is not None
            else None
        )
        self._gateways: dict[Key, GatewayPublishing] = {}
        self._removals: set[asyncio.Task[None]] = set()  # deleted Gateways' data planes being removed
        # what was last written to each object, by uid: a route deleted and created again under its name within the
        # second would otherwise match the old one's body and never get a status
        self._written: dict[tuple[str, Key], tuple[str, Mapping[str, Any]]] = {}
        # What each route's status last followed from, once that status was in place: a pass that changed none of it
        # skips the route.
        self._route_status = RouteStatusMemo()
        self._cleaned = False
        self.translation: Translation | None = None
        # Each Gateway's translation by the inputs it read: a change on one Gateway translates that Gateway alone, and
        # one patched route among 1,000 builds one rule's split.
        self.memo = TranslationMemo()
        self.contents = ContentMemo()  # and each Gateway's content by its part: built again only when that changed
        self.referenced: frozenset[Key] = frozenset()  # Services the routes name, and the publish Services
        # `assignment: minimal` rules' slot tables as this leadership published them (split key → table): each weight
        # change advances the table last published. A rule this leadership has not published yet continues the table
        # its Gateway's replicas hold (`_seeds`, when it fits), else it is rebuilt and an Event says so.
        self._kept: dict[str, SlotTable] = {}
        self._seeds: dict[str, TableSeed] = {}  # split key → the held table that fits, else why not
        self._rebuilt: list[RebuiltTable] = []  # AssignmentRebuilt Events still to post
        self._refusals_said: dict[tuple[str, Key], int] = {}  # the refused generation each Refused Event was for
        self._rng = random.Random()  # provisioning backoff jitter
        self._over_caps: dict[Key, str] = {}  # Gateways their class's caps refuse → why (this pass's)
        self._set_gateways: dict[str, str] = {}  # the ListenerSets of our Gateways → theirs (this pass's)

    def fleet_states(self) -> tuple[tuple[str, FleetState], ...]:
        """Each Gateway's fleet as the operator's metrics report it, by `gateway` label (metrics.gateway_label): the
        number its replicas should hold, their ACKs, the rules they refused alone, the backends it published. Nothing
        is held back per split here: a Gateway's content is translated whole, and one that cannot be numbered keeps
        what its replicas hold while its status says why."""
        return tuple(
            (
                gateway_label(*key),
                FleetState(
                    generation=p.number,
                    acks=p.fleet.acks(),
                    refused_splits=sum(len(v) for v in p.fleet.refusals().values()),
                    backends=p.backends,
                ),
            )
            for key, p in sorted(self._gateways.items())
        )

    def fleet(self, key: Key) -> Fleet | None:
        p = self._gateways.get(key)
        return p.fleet if p is not None else None

    def publishing(self, key: Key) -> GatewayPublishing | None:
        return self._gateways.get(key)

    def _parameters(self, key: Key) -> GatewayParameters | None:
        gw = self.store.gateways.get(key)
        t = self.translation
        if gw is None or t is None:
            return None
        return next((c.parameters for c in t.classes if c.name == gw.class_name), None)

    def _placement(self, key: Key) -> Placement:
        params = self._parameters(key)
        return (params.placement if params is not None else None) or self.settings.placement

    def _publish_service(self, key: Key) -> Key:
        names = names_for(key[0], key[1], self._placement(key), self.settings.namespace)
        return (names.namespace, names.publish)

    def _guard_token(self, p: GatewayPublishing) -> None:
        """A provisioned data plane accepts only its Gateway's own token, and one in the Gateway's namespace runs pods
        its tenant may change: its fleet never sends the installation's shared token, only the Gateway's own (set
        once an ensure applied it; until then none, and the replicas refuse the call)."""
        if self._provisioner is not None and p.fleet.token is None:
            p.fleet.token = self._provisioner.publish_token(p.uid) or ""

    def replicas(self, key: Key, slices: Mapping[Key, SliceInfo]) -> tuple[Replica, ...]:
        ns, svc = self._publish_service(key)
        return replicas_from_slices(
            (s for s in slices.values() if s.namespace == ns and s.service == svc), self.settings.port_name
        )

    def highest_held(self) -> int:
        return max((p.fleet.highest_held for p in self._gateways.values()), default=0)

    def numbers(self) -> int:
        return max((p.number for p in self._gateways.values()), default=0)

    async def read_certificates(self) -> None:
        """Before a translation: the Secrets our Gateways' HTTPS listeners may use and the ConfigMaps of their ports'
        client validations, read by name (certificates.py)."""
        s = self.store
        ours = {c.meta.name for c in s.classes.values() if c.ours}
        gateways = [g for g in s.gateways.values() if g.class_name in ours]
        grants = tuple(s.grants.values())
        if self._certificates is not None:
            names = {f"{g.meta.namespace}/{g.meta.name}" for g in gateways}
            sets = [ls for ls in s.listener_sets.values() if ls.gateway in names]
            await self._certificates.read(certificate_secrets(gateways, grants) | set_certificate_secrets(sets, grants))
        if self._cas is not None:
            # and the BackendTLSPolicies' CA bundles (each in its policy's namespace, at most 8 per policy)
            tls_cas = {k for btp in s.backend_tls.values() for k in btp.configmaps()}
            await self._cas.read(ca_configmaps(gateways, grants) | tls_cas)

    def translate(self, services: Mapping[Key, ServiceInfo], slices: Mapping[Key, SliceInfo]) -> Translation:
        s = self.store
        t = translate(
            Inputs(
                classes=tuple(s.classes.values()),
                gateways=tuple(s.gateways.values()),
                routes=tuple(s.routes.values()),
                grants=tuple(s.grants.values()),
                namespaces=tuple(s.namespaces.values()),
                parameters={name: p for (_, name), p in s.parameters.items()},
                secrets=s.secrets,
                configmaps=s.configmaps,
                services=services,
                slices=slices_by_service(slices.values()),
                policies=tuple(s.policies.values()),
                backend_tls=tuple(s.backend_tls.values()),
                listener_sets=tuple(s.listener_sets.values()),
                # `assignment: minimal` rules: the table each had, which the new weights advance (this leadership's,
                # else the one the Gateway's replicas hold: docs/gateway-api.md "Policy")
                tables=self._tables(),
            ),
            self.memo,
        )
        self.translation = t
        # a mirror's Service as much as a backend's: its endpoints are in the generation too
        refs = {k for route in s.routes.values() for k in route.service_refs()}
        refs.update(self._publish_service(k) for k in s.gateways)
        self.referenced = frozenset(refs)
        return t

    def _tables(self) -> dict[str, SlotTable]:
        """The tables the rules' weights advance: the one this leadership last published, else the one a Gateway's
        replicas hold when it fits the route (core `held_fit`)."""
        routes = self.store.routes
        for gone in [k for k in self._kept if _route_of(k) not in routes]:
            del self._kept[gone]  # a route deleted: one created again under its name starts anew
        held = held_tables(p.held_splits() for p in self._gateways.values())
        self._seeds = {}
        for key, h in held.items():
            rkey = _route_of(key)
            route = routes.get(rkey) if rkey is not None else None
            if key in self._kept or rkey is None or route is None:
                continue
            self._seeds[key] = held_fit(
                h, route_generation=route.meta.generation, served_before=self._served_before(rkey)
            )
        seeded = {k: seed.table for k, seed in self._seeds.items() if seed.table is not None}
        return {**seeded, **self._kept}

    def _served_before(self, route: Key) -> bool:
        st = self.store.stored.get(("httproute", route))
        return st is not None and route_served_before(st.status)

    def _keep_tables(self, key: Key, splits: Iterable[CompiledSplit]) -> None:
        """A Gateway's generation was published: its rules' tables are this leadership's from now on. A table this
        leadership publishes for the first time either continues the replicas' copy or was rebuilt: a rebuild of a
        route served before is logged and an AssignmentRebuilt Warning goes on the route."""
        for s in splits:
            if s.table is None:
                self._kept.pop(s.key, None)  # hash now: a switch back to minimal starts a new table
                continue
            if s.key not in self._kept:
                self._first_table(key, s, s.table)
            self._kept[s.key] = s.table

    def _first_table(self, gateway: Key, split: CompiledSplit, table: SlotTable) -> None:
        rule = RuleKey.parse(split.key)
        if rule is None:
            return  # a Gateway's splits are its rules' (the generation checks it)
        rkey = (rule.namespace, rule.name)
        seed = self._seeds.get(split.key) or held_fit(None, route_generation=0, served_before=self._served_before(rkey))
        why = seed.why
        if seed.table is not None:
            why = continued_why(seed.table, table)
            if not why:
                log.info(
                    "Gateway %s/%s: %s: slot table continued from the generation the replicas hold", *gateway, split.key
                )
                return
        if not why:
            return  # a rule never served: its first table, nothing lost
        message = rebuilt_rule_message(rule.rule, why, split.weights)
        log.warning(
            "Gateway %s/%s: HTTPRoute %s: %s: %s",
            *gateway,
            rule.route,
            EventReason.ASSIGNMENT_REBUILT,
            message,
        )
        self._rebuilt.append(RebuiltTable(route=rkey, split=split.key, message=message))

    # --- one pass (leader only) --------------------------------------------------------------------------------------

    async def run_pass(
        self,
        translation: Translation,
        slices: Mapping[Key, SliceInfo],
        numbering: Numbering,
        now: str,
    ) -> None:
        ours = {_key(g.gateway): g for g in translation.gateways}
        self._set_gateways = {ls.key: ls.gateway for ls in translation.listener_sets}
        params = {c.name: c.parameters for c in translation.classes if c.parameters is not None}
        members = (gw for k in ours if (gw := self.store.gateways.get(k)) is not None)
        self._over_caps = {k: c.message for k, c in over_caps(members, params, self.settings.default_replicas).items()}
        # A Gateway deleted and created again under its name between two passes is another Gateway (another uid):
        # the old one's fleet and data plane go, or the new one would find its objects' names taken.
        for gone in [k for k, p in self._gateways.items() if k not in ours or p.uid != self._uid(k)]:
            await self._close(gone)
        loop = asyncio.get_running_loop()
        routes_on: dict[Key, list[str]] = {}  # each Gateway's routes (with a parent on it), once for every Gateway
        for rs in translation.routes:
            for gk in dict.fromkeys(self._parent_gateway(ps.parent) for ps in rs.parents):
                if gk is not None:
                    routes_on.setdefault(gk, []).append(rs.route)
        for key in ours:
            p = self._gateways.get(key)
            if p is None:
                p = self._gateways[key] = GatewayPublishing(
                    fleet=self._make_fleet(gateway_label(*key)), created=loop.time(), uid=self._uid(key)
                )
                loop.call_later(self.settings.probe_timeout, self._poke)
            self._guard_token(p)
            replicas = self.replicas(key, slices)
            if replicas and not p.replicas:
                # Its first replicas (the Service listed none): numbering and the slot tables wait, bounded, for
                # what they hold, as for a fleet just created.
                p.created = loop.time()
                loop.call_later(self.settings.probe_timeout, self._poke)
            if replicas != p.replicas:  # set_replicas reports a change, which asks for another pass
                p.replicas = replicas
                await p.fleet.set_replicas(replicas)
            self._provision(key, p, translation)
            self._publish(key, p, translation, numbering, loop.time())
            self._carry(key, p, translation, routes_on.get(key, ()))
        await self._post_rebuilt()
        await self._post_refusals()
        if self._provisioner is not None and not self._cleaned:
            # Once per leadership: what a Gateway deleted while no operator led left behind.
            with _logged("removing the data planes of deleted Gateways"):
                await self._provisioner.remove_absent(self._live_uids())
                self._cleaned = True
        if self._sink is not None:
            await self._write_status(translation, ours, now)

    def _publish(self, key: Key, p: GatewayPublishing, t: Translation, numbering: Numbering, now: float) -> None:
        fleet = p.fleet
        if not fleet.acks():
            return  # no replica to publish to: a generation now could not carry what the replicas come back holding
        if not fleet.all_known() and now < p.created + self.settings.probe_timeout:
            return  # numbering continues above what its replicas hold: wait (bounded) until each answered once
        try:
            # A table that breaks a bound of the model (its content) or the generation's (stamp) is this Gateway's
            # alone: it keeps what its replicas hold and its status says why; the other Gateways are published.
            content = self.contents.content(t, f"{key[0]}/{key[1]}", p.uid, self._content_for)
            if content == p.content and fleet.highest_held <= p.number:
                return
            number = numbering.next(max(p.number, fleet.highest_held))
            gen = content.stamp(number)
        except SpecError as exc:
            refused = "; ".join(exc.problems)[:1000]
            if refused != p.refused:
                log.error("Gateway %s/%s: not published: %s", *key, refused)
            p.refused = refused
            return
        numbering.took(number)
        if p.number == 0:
            # This leadership's first publish here: carry on the numbers the replicas hold (as its predecessor would).
            p.held_splits()
            p.carried = p.held_rules
        p.number, p.content, p.refused = number, content, None
        p.backends = backend_states(content.splits)
        self._keep_tables(key, gen.splits)
        log.info("Gateway %s/%s: generation %d: %d splits", *key, number, len(gen.splits))
        p.carried = p.carried.carry(gen)
        fleet.set_target(generation_to_proto(gen, self.settings.origin, p.carried.numbers(), p.proto))

    def _carry(self, key: Key, p: GatewayPublishing, t: Translation, routes: Iterable[str]) -> None:
        """Record, for the Gateway and each of its `routes` (those with a parent on it), the first number carrying
        its current metadata.generation (the current number when its content did not change)."""
        if p.number == 0 or p.refused is not None:
            return
        gw = self.store.gateways.get(key)
        objects: dict[str, int] = {}
        if gw is not None:
            objects["gateway"] = gw.meta.generation
        for r in routes:
            route = self.store.routes.get(_key(r))
            if route is not None:
                objects[f"route:{r}"] = route.meta.generation
        gateway = f"{key[0]}/{key[1]}"
        for ps in t.policies:
            pol = self.store.policies.get(_key(ps.policy))
            if pol is not None and any(a.gateway == gateway for a in ps.ancestors):
                objects[f"policy:{ps.policy}"] = pol.meta.generation
        for ps in t.backend_tls:
            btp = self.store.backend_tls.get(_key(ps.policy))
            here = next((a for a in ps.ancestors if a.gateway == gateway), None)
            if btp is not None and here is not None:
                objects[f"backendtls:{ps.policy}"] = _backend_tls_version(btp, here)
        for ls in t.listener_sets:
            held = self.store.listener_sets.get(_key(ls.key))
            if held is not None and ls.gateway == gateway:
                objects[f"listenerset:{ls.key}"] = held.meta.generation
        for obj, generation in objects.items():
            if p.since.get(obj, (None, 0))[0] != generation:
                p.since[obj] = (generation, p.number)
        for gone in [o for o in p.since if o not in objects]:
            del p.since[gone]

    def _provision(self, key: Key, p: GatewayPublishing, t: Translation) -> None:
        """Ensure the Gateway's data plane when the Gateway or its class's parameters changed; a class refused
        (InvalidParameters: no parameters) provisions nothing new, and what exists keeps running. Its Gateways say
        so: the translation makes them `Accepted: False, InvalidParameters` and `Programmed: False, Invalid`, naming
        the class's refusal (core `classes.refused_by_class`), until the parameters are fixed and ensured here."""
        gw = self.store.gateways.get(key)
        if self._provisioner is None or gw is None or p.provisioning is not None:
            return
        params = next((c.parameters for c in t.classes if c.name == gw.class_name), None)
        if (cap := self._over_caps.get(key)) is not None:
            # Over its class's caps: no data plane (one it had is removed), and the status says which cap.
            p.unprovisioned = NotProvisioned(GatewayReason.NO_RESOURCES, cap)
            p.failed_for = None
            if p.provisioned is not None:
                p.provisioned, p.addresses = None, None
                p.provisioning = asyncio.create_task(self._remove(p, gw), name=f"unprovision:{key[0]}/{key[1]}")
            return
        if (
            p.unprovisioned is not None
            and p.unprovisioned.reason == GatewayReason.NO_RESOURCES
            and p.failed_for is None
        ):
            p.unprovisioned = None  # admitted now (an older Gateway went, or the cap rose)
        now = asyncio.get_running_loop().time()
        fresh = now < p.ensured_at + self.settings.reprovision_seconds
        if params is None or (p.provisioned == (gw.meta.generation, params) and fresh):
            return
        if p.failed_for == (gw.meta.generation, params) and now < p.retry_at:
            return  # the same Gateway failed: its backoff's pass tries again (an edit tries at once)
        p.provisioning = asyncio.create_task(self._ensure(key, p, gw, params), name=f"provision:{key[0]}/{key[1]}")

    async def _remove(self, p: GatewayPublishing, gw: Gateway) -> None:
        assert self._provisioner is not None
        try:
            with _logged(f"removing the data plane of Gateway {gw.meta.key}, over its class's caps"):
                removed = await self._provisioner.remove_gateway(gw)
                log.warning("Gateway %s: over its class's caps: %d data-plane objects removed", gw.meta.key, removed)
        finally:
            p.provisioning = None
            self._poke()

    async def _ensure(self, key: Key, p: GatewayPublishing, gw: Gateway, params: GatewayParameters) -> None:
        assert self._provisioner is not None
        loop = asyncio.get_running_loop()
        tried = (gw.meta.generation, params)
        try:
            addresses = await self._provisioner.ensure(gw, params)
            # Its replicas' own token, the only one they accept.
            p.fleet.token = self._provisioner.publish_token(gw.meta.uid) or ""
            p.addresses = tuple({"type": a.type, "value": a.value} for a in addresses)
            p.provisioned, p.ensured_at = tried, loop.time()
            p.unprovisioned, p.failed_for = None, None
            p.provision_backoff.reset()
            loop.call_later(self.settings.reprovision_seconds, self._poke)  # the pass that ensures it again
        except Exception as exc:
            if p.failed_for != tried:  # another Gateway body or class: its failures start the curve again
                p.provision_backoff.reset()
            pause = p.provision_backoff.pause(self._rng)
            reason = exc.reason if isinstance(exc, ProvisionError) else GatewayReason.PROVISIONING_FAILED
            p.unprovisioned = NotProvisioned(reason, str(exc) or type(exc).__name__)
            p.failed_for, p.retry_at = tried, loop.time() + pause
            log.warning("Gateway %s/%s: data plane not provisioned (again in %.1fs): %s", *key, pause, exc)
            loop.call_later(pause, self._poke)
        finally:
            p.provisioning = None
            self._poke()  # the status says what happened

    def _uid(self, key: Key) -> str:
        gw = self.store.gateways.get(key)
        return gw.meta.uid if gw is not None else ""

    def _live_uids(self) -> frozenset[str]:
        """The uids of the Gateways of ours this plane tracks now (after a pass: exactly that pass's, each closed one
        gone and each new one added): cleanup removes the data plane of every other uid (ownership.py)."""
        return frozenset(p.uid for p in self._gateways.values() if p.uid)

    async def _close(self, key: Key) -> None:
        """The Gateway `key` gone (or another under its name): its fleet closed, its data plane removed in a task of
        its own (`_remove_data_plane`), so one Gateway's deletion stalls no other Gateway's publishing."""
        p = self._gateways.pop(key)
        log.info("Gateway %s/%s gone: its fleet is closed", *key)
        await p.fleet.close()
        p.fleet.metrics.remove()  # its series go with it: one `gateway` label per Gateway that exists
        if self._provisioner is not None:
            task = asyncio.create_task(
                self._remove_data_plane(key, p.provisioning), name=f"unprovision-gone:{key[0]}/{key[1]}"
            )
            self._removals.add(task)
            task.add_done_callback(self._removals.discard)

    async def _remove_data_plane(self, key: Key, provisioning: asyncio.Task[None] | None) -> None:
        assert self._provisioner is not None
        if provisioning is not None:
            # Waited for (bounded), not cancelled: the ensure runs in a thread a cancel does not stop, and it would
            # go on applying objects after the removal below (a Gateway admitted by its caps and deleted at once left
            # its last objects behind). Past the bound (an API server that does not answer) the removal goes on: a
            # late object is the next removal's (another Gateway's close, or the next leadership's sweep).
            _, pending = await asyncio.wait({provisioning}, timeout=CLOSE_WAIT_SECONDS)
            if pending:
                log.warning("Gateway %s/%s: its data plane's ensure still runs after %ss", *key, CLOSE_WAIT_SECONDS)
                provisioning.cancel()
        # The Gateways tracked now, not when it was deleted: one created meanwhile (and provisioned) is not swept.
        with _logged(f"removing the data plane of Gateway {key[0]}/{key[1]}"):
            await self._provisioner.remove_absent(self._live_uids())

    async def close(self) -> None:
        """Leadership lost or the process stops: every fleet closed (the data planes keep serving)."""
        for task in list(self._removals):
            # A removal's `live` would be this plane's Gateways, none once closed: the next leadership's sweep
            # removes what a deleted Gateway left.
            task.cancel()
        for key in list(self._gateways):
            p = self._gateways.pop(key)
            if p.provisioning is not None:
                p.provisioning.cancel()
            await p.fleet.close()
            # A standby counts nothing for a fleet, and a Gateway deleted before this process leads again must not
            # leave series behind; the next leadership's fleet counts from 0 (a counter reset to Prometheus).
            p.fleet.metrics.remove()
        self._cleaned = False
        self._written.clear()
        if self._certificates is not None:
            await self._certificates.close()
        if self._cas is not None:
            await self._cas.close()
        # The next leadership reads the tables again from the replicas (another leader may have advanced them).
        self._kept.clear()
        self._seeds.clear()
        self._rebuilt.clear()

    # --- status ------------------------------------------------------------------------------------------------------

    def _route_served(self, route: str, generation: int, ref: ParentRef) -> bool:
        """Whether the Gateway `ref` names (or the Gateway of the ListenerSet it names) serves `route` at its
        metadata.generation `generation`."""
        gk = self._parent_gateway(ref)
        return gk is not None and self._served(gk, f"route:{route}", generation)

    def _parent_gateway(self, ref: ParentRef) -> Key | None:
        """The Gateway a route's parentRef reaches: the one it names, or the one of the ListenerSet it names (as the
        last translation took the sets)."""
        gateway = parent_gateway(ref, self._set_gateways)
        return None if gateway is None else _key(gateway)

    def _served(self, key: Key, obj: str, generation: int) -> bool:
        p = self._gateways.get(key)
        s = p.since.get(obj) if p is not None else None
        return p is not None and s is not None and s[0] == generation and p.served(s[1])

    def _stored(self, kind: str, key: Key) -> Stored | None:
        return self.store.stored.get((kind, key)) if self._sink is not None else None

    async def _write_status(self, t: Translation, ours: Mapping[Key, GatewayStatus], now: str) -> None:
        for cs in t.classes:
            key = ("", cs.name)
            if (st := self._stored("gatewayclass", key)) is not None:
                await self._write("gatewayclass", key, st, {**st.status, **class_status_body(cs, st.status, now)})
        for key, gs in ours.items():
            gw = self.store.gateways.get(key)
            p = self._gateways.get(key)
            st = self._stored("gateway", key)
            if gw is None or p is None or st is None:
                continue
            ready = self._served(key, "gateway", gw.meta.generation)
            since = p.since.get("gateway")
            pending = p.waiting(since[1] if since else None, self._publish_service(key))
            body = gateway_status_body(
                gs,
                ready=ready,
                pending=pending,
                addresses=p.addresses,
                stored=st.status,
                now=now,
                refused=p.refused,
                unprovisioned=p.unprovisioned,
            )
            if (refusal := self.store.refused.get(("gateway", key))) is not None:
                body["conditions"] = refused_accepted(
                    body["conditions"],
                    stored=st.status.get("conditions"),
                    generation=refusal.generation,
                    problems=refusal.problems,
                    reason=GatewayReason.INVALID,
                    now=now,
                )
            await self._write("gateway", key, st, {**st.status, **body})
        for ls in t.listener_sets:
            await self._write_listener_set(ls, now)
        refused = self._refused_by_route()
        self._route_status.keep_only(self.store.routes)
        for rs in t.routes:
            rkey = _key(rs.route)
            route = self.store.routes.get(rkey)
            st = self._stored("httproute", rkey)
            if route is None or st is None:
                continue
            generation = route.meta.generation
            refusal = self.store.refused.get(("httproute", rkey))
            ours_ = tuple(self._refused_rules(ps, rs.route, generation, refused) for ps in rs.parents)
            served = functools.partial(self._route_served, rs.route, generation)
            seen = RouteSeen(
                uid=st.uid,
                resource_version=st.resource_version,
                refusal=refusal,
                parents=ours_,
                served=tuple(served(ps.parent) for ps in ours_),
            )
            if self._route_status.unchanged(rkey, seen):
                continue  # nothing its status follows from changed since it was found in place or written
            parents = route_parents(
                stored=st.status.get("parents"), ours=ours_, route_namespace=rkey[0], served=served, now=now
            )
            if refusal is not None:
                parents = _refused_parents(parents, st.status.get("parents"), refusal, now)
            # nothing of ours yet and nothing stored: no empty write
            write = {**st.status, "parents": parents} if parents or st.status.get("parents") else None
            if write is None or await self._write("httproute", rkey, st, write):
                self._route_status.record(rkey, seen)
        for ps in t.policies:
            pol = self.store.policies.get(_key(ps.policy))
            if pol is not None:
                await self._write_ancestors("trafficsplitpolicy", ps, functools.partial(self._policy_served, pol), now)
        for ps in t.backend_tls:
            btp = self.store.backend_tls.get(_key(ps.policy))
            if btp is not None:
                await self._write_ancestors(
                    "backendtlspolicy", ps, functools.partial(self._backend_tls_served, btp), now
                )

    async def _write_listener_set(self, ls: ListenerSetStatus, now: str) -> None:
        """A ListenerSet's status: its conditions and listeners', Programmed once its Gateway's replicas ACKed the
        generation carrying the set as it is (`_carry`)."""
        key, gk = _key(ls.key), _key(ls.gateway)
        held, p, st = self.store.listener_sets.get(key), self._gateways.get(gk), self._stored("listenerset", key)
        if held is None or p is None or st is None:
            return
        since = p.since.get(f"listenerset:{ls.key}")
        body = listener_set_status_body(
            ls,
            ready=self._served(gk, f"listenerset:{ls.key}", held.meta.generation),
            pending=p.waiting(since[1] if since else None, self._publish_service(gk)),
            stored=st.status,
            now=now,
            refused=p.refused,
            unprovisioned=p.unprovisioned,
        )
        await self._write("listenerset", key, st, {**st.status, **body})

    async def _write_ancestors(
        self, kind: str, ps: PolicyStatus, served: Callable[[AncestorStatus], bool], now: str
    ) -> None:
        """A policy's `status.ancestors` (`policy_ancestors`: ours for each ancestor `served`, others' as stored)."""
        key = _key(ps.policy)
        st = self._stored(kind, key)
        if st is None:
            return
        ancestors = policy_ancestors(stored=st.status.get("ancestors"), ours=ps.ancestors, served=served, now=now)
        if ancestors or st.status.get("ancestors"):
            await self._write(kind, key, st, {**st.status, "ancestors": ancestors})

    def _backend_tls_served(self, btp: BackendTlsPolicy, ancestor: AncestorStatus) -> bool:
        """An ancestor Gateway serves a BackendTLSPolicy once its replicas ACKed the generation carrying the policy's
        metadata.generation and its conditions (`_backend_tls_version`)."""
        if ancestor.gateway is None:
            return True
        return self._served(_key(ancestor.gateway), f"backendtls:{btp.key}", _backend_tls_version(btp, ancestor))

    def _policy_served(self, pol: Policy, ancestor: AncestorStatus) -> bool:
        """An ancestor Gateway serves the policy once its replicas ACKed the generation carrying the policy's
        metadata.generation and each target route's attached there (a route change can change the policy's
        standing); an ancestor that is no Gateway (a target route that does not exist) waits for nothing."""
        if ancestor.gateway is None:
            return True
        gk = _key(ancestor.gateway)
        if not self._served(gk, f"policy:{pol.key}", pol.meta.generation):
            return False
        p = self._gateways.get(gk)
        for t in pol.targets:
            r = f"{pol.meta.namespace}/{t.name}"
            route = self.store.routes.get(_key(r))
            attached = route is not None and p is not None and f"route:{r}" in p.since
            if attached and route is not None and not self._served(gk, f"route:{r}", route.meta.generation):
                return False
        return True

    def _refused_by_route(self) -> dict[Key, RefusedRules]:
        """Per Gateway, per route (`namespace/name`), the rules its replicas refused alone (`Fleet.refusals`, keyed
        by split key `namespace/route.rule-<i>`) and by whom: read once per status pass, not once per route."""
        out: dict[Key, dict[str, dict[int, tuple[tuple[str, str], ...]]]] = {}
        for gk, p in self._gateways.items():
            for split, by in p.fleet.refusals().items():
                rule = RuleKey.parse(split)
                if rule is not None:
                    out.setdefault(gk, {}).setdefault(rule.route, {})[rule.rule] = by
        return dict(out)

    def _refused_rules(
        self,
        ps: ParentStatus,
        route: str,
        generation: int,
        refused: Mapping[Key, RefusedRules],
    ) -> ParentStatus:
        """The parent with the rules its Gateway's replicas refused alone (`_refused_by_route`) named."""
        gk = self._parent_gateway(ps.parent)
        rules = refused.get(gk, {}).get(route) if gk is not None else None
        return with_refusals(ps, rules, generation) if rules else ps

    async def _write(self, kind: str, key: Key, stored: Stored, body: Mapping[str, Any]) -> bool:
        """Write `body` unless the object has it, or it is what was last written to this object (the watch event of
        our own write may not have arrived yet). False: not written, the next pass tries again."""
        if self._sink is None:
            return False
        if body == stored.status or self._written.get((kind, key)) == (stored.uid, body):
            return True
        try:
            await self._sink(kind, key, stored.resource_version, body)
        except Exception as exc:  # a conflict or an outage: the next pass (the watch brings the newer object) retries
            log.warning("status of %s %s not written: %s", kind, "/".join(x for x in key if x), exc)
            return False
        self._written[(kind, key)] = (stored.uid, body)
        return True

    async def _post_refusals(self) -> None:
        """A Refused Warning for each Gateway or HTTPRoute whose current body was refused, once per generation."""
        for gone in [k for k in self._refusals_said if k not in self.store.refused]:
            del self._refusals_said[gone]
        for (kind, key), refusal in self.store.refused.items():
            st = self.store.stored.get((kind, key))
            if self._events is None or st is None or self._refusals_said.get((kind, key)) == refusal.generation:
                continue
            self._refusals_said[(kind, key)] = refusal.generation
            try:
                await self._events(kind, key, st.uid, _refusal_event(kind, refusal))
            except Exception as exc:  # said in the log already; an Event is not retried
                log.warning("Refused Event of %s %s/%s not posted: %s", kind, *key, exc)

    async def _post_rebuilt(self) -> None:
        """The AssignmentRebuilt Warnings of this pass, each once (the log line was written when it happened)."""
        pending, self._rebuilt = self._rebuilt, []
        for rebuilt in pending:
            st = self.store.stored.get(("httproute", rebuilt.route))
            if self._events is None or st is None:
                continue
            event = EventIntent(EventType.WARNING, EventReason.ASSIGNMENT_REBUILT, rebuilt.message)
            try:
                await self._events("httproute", rebuilt.route, st.uid, event)
            except Exception as exc:  # said in the log already; an Event is not retried
                log.warning("AssignmentRebuilt Event of %s not posted: %s", rebuilt.split, exc)


def _refusal_event(kind: str, refusal: Refused) -> EventIntent:
    return EventIntent(
        EventType.WARNING,
        EventReason.REFUSED,
        f"generation {refusal.generation} is not accepted, the last accepted {kind} is still served: "
        f"{refusal.problems}"[:1024],
    )


def _refused_parents(parents: list[dict[str, Any]], stored: Any, refusal: Refused, now: str) -> list[dict[str, Any]]:
    """Our entries of a route whose current body was refused: each parent's `Accepted` False at that generation
    (`refused_accepted`); other controllers' entries as they are."""
    before = [p for p in stored if isinstance(p, Mapping)] if isinstance(stored, list) else []
    out: list[dict[str, Any]] = []
    for entry in parents:
        if entry.get("controllerName") == CONTROLLER_NAME:
            prev = next((b for b in before if b.get("controllerName") == CONTROLLER_NAME
                         and b.get("parentRef") == entry.get("parentRef")), {})  # fmt: skip
            entry = {
                **entry,
                "conditions": refused_accepted(
                    entry.get("conditions") or [],
                    stored=prev.get("conditions"),
                    generation=refusal.generation,
                    problems=refusal.problems,
                    reason=RouteReason.UNSUPPORTED_VALUE,
                    now=now,
                ),
            }
        out.append(entry)
    return out


def _route_of(split_key: str) -> Key | None:
    """The route of a rule's split key (None: the key is no rule's)."""
    rule = RuleKey.parse(split_key)
    return None if rule is None else (rule.namespace, rule.name)


def _key(text: str) -> Key:
    ns, sep, name = text.partition("/")
    return (ns, name) if sep else ("", ns)


@contextlib.contextmanager
def _logged(what: str) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        log.warning("%s failed: %s", what, exc)
