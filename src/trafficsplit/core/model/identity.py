"""Which Gateway a provisioned data plane serves, and why it refuses a generation for any other.

A replica is told its Gateway's `namespace/name` (`--gateway`) and metadata.uid (`--gateway-uid`); a Gateway's
generation carries both in its route table (`GatewayRoutes.gateway`, `.gateway_uid`). The name keeps one Gateway's
publisher off another's replicas; the uid keeps a Gateway deleted and created again under the same name (another
object, maybe another owner) off its predecessor's replicas until the provisioner has replaced them. A replica told no
uid (rendered before the flag existed) compares the name only.
"""

from __future__ import annotations

from dataclasses import dataclass

from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.routes import key_problems
from trafficsplit.core.model.rules import uid_problems


@dataclass(frozen=True, slots=True)
class GatewayIdentity:
    key: str  # namespace/name
    uid: str = ""  # metadata.uid; empty: compare the name only

    def __post_init__(self) -> None:
        if problems := key_problems("gateway", self.key) + uid_problems("gateway uid", self.uid):
            raise SpecError(problems)

    def refusal(self, number: int, key: str | None, uid: str = "") -> str | None:
        """Why this Gateway's replica must not hold generation `number`, whose route table is for Gateway `key`
        (namespace/name) of `uid`; `key` None: the generation has no route table (a TrafficSplit generation)."""
        if key is None:
            return f"generation {number} carries no Gateway's routes; this replica serves Gateway {self.key} only"
        if key != self.key:
            return f"generation {number} is for Gateway {key[:300]!r}; this replica serves Gateway {self.key} only"
        if self.uid and uid != self.uid:
            return (
                f"generation {number} is for Gateway {key} uid {uid[:64]!r}; this replica serves uid {self.uid!r} only"
                " (a Gateway deleted and created again under its name is another Gateway)"
            )
        return None
