"""The words a TrafficSplit's status and Events use: condition types, reasons and Event reasons, defined once.

The operator writes them, the CLI reads them (`kubectl trafficsplit status`), users match on them
(`kubectl wait --for=condition=Published`), and docs/crd.md lists them (tests/unit/test_vocabulary.py checks that
every one is documented). StrEnum members are their strings, so a value read back from the API server compares equal.
"""

from __future__ import annotations

from enum import StrEnum


class ConditionType(StrEnum):
    ACCEPTED = "Accepted"
    RESOLVED_REFS = "ResolvedRefs"
    PUBLISHED = "Published"
    DRAINED = "Drained"  # sticky.mode persistent: every weight-0 backend has no live session


class Reason(StrEnum):
    """Condition reasons (`status.conditions[].reason`)."""

    # Accepted
    ACCEPTED = "Accepted"
    INVALID = "Invalid"
    HOST_CONFLICT = "HostConflict"
    # ResolvedRefs
    RESOLVED_REFS = "ResolvedRefs"
    BACKEND_NOT_FOUND = "BackendNotFound"
    PORT_NOT_FOUND = "PortNotFound"
    ENDPOINTS_REFUSED = "EndpointsRefused"  # a backend resolved to more endpoints than core/model/limits.py allows
    # Published
    PUBLISHED = "Published"
    NOT_ACCEPTED = "NotAccepted"
    UNRESOLVED_REFS = "UnresolvedRefs"
    NOT_SERVED = "NotServed"
    PENDING = "Pending"
    HELD = "Held"
    NO_DATAPLANES = "NoDataplanes"
    NO_GATEWAY = "NoGateway"  # the installation runs no data plane for TrafficSplits (Gateway API only)
    BEHIND = "Behind"
    UNSERVABLE = "Unservable"  # a dataplane replica reports it cannot serve this split (no cookie keys): left out
    REFUSED = "Refused"  # a replica refused this split alone from a generation it accepted
    # Drained
    DRAINED = "Drained"
    SESSIONS_LIVE = "SessionsLive"
    SESSIONS_UNKNOWN = "SessionsUnknown"


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


class EventReason(StrEnum):
    PUBLISHED = "Published"
    TOTAL_WEIGHT_CHANGED = "TotalWeightChanged"
    ASSIGNMENT_REBUILT = "AssignmentRebuilt"  # spec.assignment: minimal lost its slot table's history
    DRAINED = "Drained"  # a weight-0 backend of a persistent split has no live session left
    BACKEND_NOT_FOUND = "BackendNotFound"
    PORT_NOT_FOUND = "PortNotFound"
    UNSERVABLE = "Unservable"
    REFUSED = "Refused"
