"""Whose a provisioned object is, decided from the objects as read: pure, so the provisioner's I/O stays a shell.

A data plane's objects are found by a name derived from the Gateway (dataplane_names.py), and a name is no proof of
ownership: an object of that name may be another Gateway's (were two names ever to meet) or made by hand. So every
provisioned object carries its Gateway's uid (`GATEWAY_UID_LABEL`), and before applying or deleting anything the
provisioner reads each object by name and goes on only when every one that exists carries this Gateway's uid. An
object without the label belongs to nobody we know: it is left alone too, and the Gateway says `Programmed: False`,
`NameConflict`, naming the object (an administrator deletes or relabels it).

Cleanup (`remove_absent`) deletes an object only when its uid names no Gateway of ours that still exists. One
exception, so an upgrade does not strand them: objects the operator made before it labelled uids (its component and
managed-by labels, no uid label) are swept as a gone Gateway's; their names were derived by the older, shorter
digest, which no Gateway's name is now, so no current data plane is ever among them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trafficsplit.core.gatewayapi.conditions import GatewayReason
from trafficsplit.operator.dataplane_names import (
    GATEWAY_NAME_ANNOTATION,
    GATEWAY_NAMESPACE_ANNOTATION,
    GATEWAY_UID_LABEL,
)
from trafficsplit.operator.provision import ProvisionError

_NAMED = 5  # objects named in a NameConflict message (the rest counted)


@dataclass(frozen=True, slots=True)
class Foreign:
    """An object of a name this Gateway's data plane needs that is not this Gateway's."""

    kind: str
    name: str
    owner: str  # "Gateway ns/name (uid U)", "uid U" or "no Gateway uid label": who it is said to belong to


class NameConflict(ProvisionError):
    """Objects of the names the Gateway's data plane needs belong to another Gateway or to none: nothing was applied
    or deleted."""

    reason: str = GatewayReason.NAME_CONFLICT

    def __init__(self, namespace: str, foreign: Sequence[Foreign]) -> None:
        self.foreign = tuple(foreign)
        named = "; ".join(f"{f.kind} {namespace}/{f.name} belongs to {f.owner}" for f in self.foreign[:_NAMED])
        more = f" (and {len(self.foreign) - _NAMED} more)" if len(self.foreign) > _NAMED else ""
        super().__init__(f"{named}{more}: nothing of the data plane applied or deleted")


def owner_uid(obj: Mapping[str, Any]) -> str:
    """The Gateway uid an object carries ("" when it carries none)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    uid = labels.get(GATEWAY_UID_LABEL)
    return uid if isinstance(uid, str) else ""


def owner_text(obj: Mapping[str, Any]) -> str:
    """Who an object says it belongs to, for a message or a log line (its annotations are only a hint)."""
    meta = obj.get("metadata") or {}
    uid = owner_uid(obj)
    annotations = meta.get("annotations") or {}
    ns, name = annotations.get(GATEWAY_NAMESPACE_ANNOTATION), annotations.get(GATEWAY_NAME_ANNOTATION)
    said = f"Gateway {ns}/{name} " if isinstance(ns, str) and isinstance(name, str) else ""
    if not uid:
        return f"{said}(no Gateway uid label)" if said else "no Gateway uid label"
    return f"{said}(uid {uid})" if said else f"uid {uid}"


def foreign(uid: str, existing: Iterable[tuple[str, Mapping[str, Any]]]) -> tuple[Foreign, ...]:
    """Of the objects read (kind, body) under the names the Gateway `uid` needs, those that are not its own. A
    Gateway without a uid owns nothing (the API server always sets one; a body without is not trusted)."""
    return tuple(
        Foreign(kind, str((obj.get("metadata") or {}).get("name") or ""), owner_text(obj))
        for kind, obj in existing
        if not uid or owner_uid(obj) != uid
    )


def orphaned(obj: Mapping[str, Any], live: frozenset[str]) -> bool:
    """A labelled data-plane object cleanup may delete: its uid names no live Gateway of ours (or it has none: made
    before uids were labelled, see the module docstring)."""
    return owner_uid(obj) not in live
