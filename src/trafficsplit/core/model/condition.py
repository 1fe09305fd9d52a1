"""One `status.conditions[]` entry (a metav1.Condition), as every status writer of the core produces it. Pure.

A plain value of the model: the TrafficSplit status (`control.status`) and the Gateway API translation
(`gatewayapi.conditions` and the modules that translate each object) both produce conditions, and neither stands on
the other for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_CONDITION_MESSAGE = 32768  # metav1.Condition's limit


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Condition:
    """One `status.conditions[]` entry (a metav1.Condition)."""

    type: str  # a ConditionType when the operator wrote it
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str
    observed_generation: int | None
    last_transition_time: str | None

    @property
    def ok(self) -> bool:
        return self.status == "True"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": str(self.type),
            "status": self.status,
            "reason": str(self.reason),
            "message": self.message,
            "observedGeneration": self.observed_generation,
            "lastTransitionTime": self.last_transition_time,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Condition:
        return cls(
            type=str(raw.get("type") or ""),
            status=str(raw.get("status") or ""),
            reason=str(raw.get("reason") or ""),
            message=str(raw.get("message") or ""),
            observed_generation=_int(raw.get("observedGeneration")),
            last_transition_time=_str(raw.get("lastTransitionTime")),
        )
