"""The fields of a YAML object that are not in its known fields: one walker and one wording for every parser (a
TrafficSplit's, a TrafficSplitPolicy's and a GatewayParameters' say `unknown field`, as `kubectl`'s strict field
validation does; the Gateway API readers say `not supported`, of a field upstream has and this implementation
does not)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any


def unknown_fields(value: Any, fields: Mapping[str, Any], path: str, *, word: str | None = None) -> list[str]:
    """`path.field: unknown field (did you mean 'x'?)` for every field of `value` (an object, or a list of objects)
    not in `fields`: a nested mapping is an object's fields (for a list: its items'); None is a leaf. A value of the
    wrong type is skipped, its reader reports it. `word`: what to say instead (no suggestion then)."""
    out: list[str] = []
    items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
    for i, obj in items:
        if not isinstance(obj, Mapping):
            continue
        where = path if i is None else f"{path}[{i}]"
        for key, sub in obj.items():
            if key not in fields:
                near = [] if word else difflib.get_close_matches(str(key), list(fields), n=1)
                out.append(
                    f"{where}.{key}: {word or 'unknown field'}" + (f" (did you mean {near[0]!r}?)" if near else "")
                )
            elif fields[key] is not None:
                out.extend(unknown_fields(sub, fields[key], f"{where}.{key}", word=word))
    return out
