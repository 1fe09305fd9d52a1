"""Disclosure (docs/spec.md §6): what every decision tells operators, as one record with bounded values.

The processor puts these fields in Envoy's dynamic metadata (namespace `trafficsplit`), the access log prints them
(docs/dataplane.md, "Access log"), and the decision metric counts `path` and `affinity_applied` as labels. A request
the processor never saw (Envoy's fallback route) gets the same field names from the route's own metadata
(`fallback_fields`), so a log reader needs one vocabulary. Clients see none of it unless the split asks for debug
headers.
"""

from __future__ import annotations

from trafficsplit.core.decide.split import Decision, DecisionPath, KeySource
from trafficsplit.core.model.compiled import CompiledSplit

BACKEND = "backend"
ENDPOINT = "endpoint"
GENERATION = "generation"
KEY_SOURCE = "key_source"
SESSION_ID_PRESENT = "session_id_present"
AFFINITY_APPLIED = "affinity_applied"
PATH = "path"
FALLBACK = "fallback"  # the path of a request Envoy routed without the processor
NATIVE = "native"  # the path of a Gateway rule with one backend and no session: Envoy alone, by design
NO_KEY = "none"


def affinity_applied(split: CompiledSplit, decision: Decision) -> bool:
    """Whether the sticky key decided the backend: a sticky split, a sticky key (a header-keyed split without a cookie
    keys a request without the header by its request id), and no match rule decided first."""
    return split.sticky and decision.key_source is not KeySource.REQUEST_ID and decision.path is not DecisionPath.MATCH


def session_id_present(decision: Decision) -> bool:
    """Whether the request carried a valid affinity cookie (an invalid one counts as absent and re-sessions:
    docs/spec.md §4)."""
    return decision.key_source is KeySource.COOKIE


def fallback_fields(generation: int, cookie_present: bool) -> dict[str, str | bool | int]:
    """The disclosure of Envoy's native fallback route: it knows only whether a VALID affinity cookie was there (the
    route matches `cookie.cookie_present_regex`, so an invalid one counts as absent, as for the processor). With one,
    Envoy hashes it to choose the backend, so the session's key decided: affinity applied (by Envoy's hash, not
    key_hash, so the backend may differ from the processor's)."""
    return {
        PATH: FALLBACK,
        KEY_SOURCE: KeySource.COOKIE.value if cookie_present else NO_KEY,
        SESSION_ID_PRESENT: cookie_present,
        AFFINITY_APPLIED: cookie_present,
        GENERATION: generation,
    }


def native_fields(generation: int) -> dict[str, str | bool | int]:
    """The disclosure of a Gateway rule's native route (one backend, no session): Envoy routed it, no key decided."""
    return {
        PATH: NATIVE,
        KEY_SOURCE: NO_KEY,
        SESSION_ID_PRESENT: False,
        AFFINITY_APPLIED: False,
        GENERATION: generation,
    }
