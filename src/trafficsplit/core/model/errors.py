"""The core's one error type: a list of problems, each naming the field it is about."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class SpecError(ValueError):
    """Input the core cannot accept. `problems` holds one message per bad field; str() joins them on one line."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        super().__init__("; ".join(self.problems))

    def within(self, path: str, moved: Mapping[str, str] | None = None) -> SpecError:
        """The same problems under `path`: a value's `hosts[1]: ...` becomes `spec.hosts[1]: ...`. `moved`: fields
        whose problems go under a path of their own instead (a TrafficSplit's `name` is `metadata.name`)."""
        moved = moved or {}
        return SpecError(
            [self._moved(p, moved) or f"{path}{'' if p.startswith('[') else '.'}{p}" for p in self.problems]
        )

    @staticmethod
    def _moved(problem: str, moved: Mapping[str, str]) -> str | None:
        field, sep, message = problem.partition(": ")
        return f"{moved[field]}: {message}" if sep and field in moved else None
