"""The Gateway API status the translation produces: the spec's condition reasons, one constructor for a condition,
and the per-object status values (GatewayClass, Gateway and its listeners, HTTPRoute parents, TrafficSplitPolicy
ancestors). Pure.

What each condition says is decided by the modules that translate each object (`gatewayapi.classes`,
`gatewayapi.listeners`, `gatewayapi.attachment`, `gatewayapi.backends`, `gatewayapi.policy_rules`,
`gatewayapi.translate`); when it is written, after the replicas ACK, is `gatewayapi.status`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from trafficsplit.core.gatewayapi.httproute import ParentRef
from trafficsplit.core.gatewayapi.objects import RouteKind
from trafficsplit.core.gatewayapi.parameters import GatewayParameters
from trafficsplit.core.gatewayapi.reading import CONTROLLER_NAME
from trafficsplit.core.model.condition import MAX_CONDITION_MESSAGE, Condition


class RouteReason(StrEnum):
    """The spec's route condition reasons this implementation sets."""

    ACCEPTED = "Accepted"
    NOT_ALLOWED_BY_LISTENERS = "NotAllowedByListeners"
    NO_MATCHING_LISTENER_HOSTNAME = "NoMatchingListenerHostname"
    NO_MATCHING_PARENT = "NoMatchingParent"
    UNSUPPORTED_VALUE = "UnsupportedValue"
    RESOLVED_REFS = "ResolvedRefs"
    REF_NOT_PERMITTED = "RefNotPermitted"
    INVALID_KIND = "InvalidKind"
    BACKEND_NOT_FOUND = "BackendNotFound"
    UNSUPPORTED_PROTOCOL = "UnsupportedProtocol"
    # Ours (the spec has none): a match of this route that an older route's identical match always takes.
    RULE_MATCH_CONFLICT = "RuleMatchConflict"


class ListenerReason(StrEnum):
    ACCEPTED = "Accepted"
    UNSUPPORTED_PROTOCOL = "UnsupportedProtocol"
    UNSUPPORTED_VALUE = "UnsupportedValue"
    RESOLVED_REFS = "ResolvedRefs"
    INVALID_CERTIFICATE_REF = "InvalidCertificateRef"
    REF_NOT_PERMITTED = "RefNotPermitted"
    # client certificate validation (spec.tls.frontend): a CA ref that does not resolve, one of another kind, none
    INVALID_CA_CERTIFICATE_REF = "InvalidCACertificateRef"
    INVALID_CA_CERTIFICATE_KIND = "InvalidCACertificateKind"
    NO_VALID_CA_CERTIFICATE = "NoValidCACertificate"
    INVALID = "Invalid"
    INVALID_ROUTE_KINDS = "InvalidRouteKinds"
    NO_CONFLICTS = "NoConflicts"
    HOSTNAME_CONFLICT = "HostnameConflict"
    PROTOCOL_CONFLICT = "ProtocolConflict"
    PENDING = "Pending"


class GatewayReason(StrEnum):
    ACCEPTED = "Accepted"
    LISTENERS_NOT_VALID = "ListenersNotValid"
    UNSUPPORTED_ADDRESS = "UnsupportedAddress"
    UNSUPPORTED_VALUE = "UnsupportedValue"
    # Accepted: the Gateway's class names parameters the operator refuses (missing, another kind, a refused body)
    INVALID_PARAMETERS = "InvalidParameters"
    PENDING = "Pending"
    INVALID = "Invalid"  # Programmed: the Gateway's current configuration cannot be served (a bound of the model)
    # Programmed: an object of the name the Gateway's data plane would have belongs to another Gateway (or to none)
    NAME_CONFLICT = "NameConflict"
    PROVISIONING_FAILED = "ProvisioningFailed"  # Programmed: the API server refused or failed a data-plane object
    # Programmed (Gateway API's own reason): the API server refused the static address the Gateway asks for
    ADDRESS_NOT_USABLE = "AddressNotUsable"
    # Programmed (Gateway API's own reason): no data plane for want of resources, a class's cap or a namespace's quota
    NO_RESOURCES = "NoResources"
    # InsecureFrontendValidationMode (Gateway API's own reason): a port's validation is AllowInsecureFallback
    CONFIGURATION_CHANGED = "ConfigurationChanged"
    # ResolvedRefs (Gateway API's own reasons): the Gateway's spec.tls.backend.clientCertificateRef
    RESOLVED_REFS = "ResolvedRefs"
    INVALID_CLIENT_CERTIFICATE_REF = "InvalidClientCertificateRef"
    REF_NOT_PERMITTED = "RefNotPermitted"


# Programmed is the data plane's to say, after its replicas ACK (the operator's gateways module): until then Unknown.
PENDING_MESSAGE = "set once every replica of the gateway's data plane acknowledges the generation carrying it"


def cond(type_: str, ok: bool | None, reason: str, message: str, generation: int) -> Condition:
    """A condition of an object at `generation`: True, False or (ok None) Unknown, its message bounded."""
    status = "Unknown" if ok is None else "True" if ok else "False"
    return Condition(
        type=type_,
        status=status,
        reason=reason,
        message=message[:MAX_CONDITION_MESSAGE],
        observed_generation=generation,
        last_transition_time=None,  # the shell's: it keeps the stored time when the status did not change
    )


@dataclass(frozen=True, slots=True)
class Standing:
    """A condition's value before it is given a type and a generation: whether it holds, why, and the message."""

    ok: bool
    reason: str
    message: str

    def condition(self, type_: str, generation: int) -> Condition:
        return cond(type_, self.ok, self.reason, self.message, generation)


@dataclass(frozen=True, slots=True)
class ParentStatus:
    parent: ParentRef
    conditions: tuple[Condition, ...]
    controller_name: str = CONTROLLER_NAME


@dataclass(frozen=True, slots=True)
class RouteStatus:
    route: str
    parents: tuple[ParentStatus, ...]


@dataclass(frozen=True, slots=True)
class ListenerStatus:
    name: str
    supported_kinds: tuple[RouteKind, ...]
    attached_routes: int
    conditions: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class GatewayStatus:
    gateway: str
    conditions: tuple[Condition, ...]
    listeners: tuple[ListenerStatus, ...]  # its own spec's listeners (a ListenerSet's are in that set's status)
    attached_listener_sets: int = 0  # the ListenerSets it took that are Accepted (`status.attachedListenerSets`)


@dataclass(frozen=True, slots=True)
class ListenerSetStatus:
    """A ListenerSet's status on the Gateway its parentRef names: its conditions and its listeners' (none when the
    Gateway does not take it)."""

    key: str  # namespace/name
    gateway: str
    conditions: tuple[Condition, ...]
    listeners: tuple[ListenerStatus, ...]


@dataclass(frozen=True, slots=True)
class ClassStatus:
    name: str
    conditions: tuple[Condition, ...]
    parameters: GatewayParameters | None = None  # what its Gateways' data planes use; None when not Accepted


@dataclass(frozen=True, slots=True)
class AncestorStatus:
    """A policy's standing with respect to one ancestor: a Gateway its target route is attached to (`gateway` is its
    `namespace/name`), or, for a target route that does not exist, that route (`gateway` None)."""

    ref: ParentRef
    conditions: tuple[Condition, ...]
    gateway: str | None
    controller_name: str = CONTROLLER_NAME


@dataclass(frozen=True, slots=True)
class PolicyStatus:
    policy: str
    ancestors: tuple[AncestorStatus, ...]
