"""The core's one error type: a list of problems, each naming the field it is about."""

from __future__ import annotations

from collections.abc import Sequence


class SpecError(ValueError):
    """Input the core cannot accept. `problems` holds one message per bad field; str() joins them on one line."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        super().__init__("; ".join(self.problems))

    def within(self, path: str) -> SpecError:
        """The same problems under `path`: a value's `hosts[1]: ...` becomes `spec.hosts[1]: ...`."""
        return SpecError([f"{path}{'' if p.startswith('[') else '.'}{p}" for p in self.problems])
