"""Every bound the core enforces on input, in one place: the CRD (tests/unit/test_crd.py compares), the spec parser
and the publish receiver all use these, so a value one boundary accepts the others accept too.

Kubernetes already bounds its own names (a namespace is a DNS label, an object name a DNS subdomain); the others are
ours, chosen so that no single field can make Envoy's configuration or a response header unreasonably large.
"""

from __future__ import annotations

MAX_NAMESPACE = 63  # a DNS-1123 label, as Kubernetes requires of namespaces
MAX_NAME = 253  # a DNS-1123 subdomain, as Kubernetes requires of object names
MAX_BACKEND_NAME = 63  # a DNS label
MAX_SERVICE = 63  # Service names are DNS labels
MAX_HOST = 253  # a DNS name
MAX_HOSTS = 16
MAX_BACKENDS = 64
MAX_MATCHES = 32
MAX_ENDPOINTS = 10_000  # per backend: far above one Deployment's pods, far below a proto that stalls the receiver
MAX_ADDRESS = 253  # an IP literal or, in local mode, a DNS name
MAX_SPLITS = 10_000  # per generation
MAX_CLUSTER = MAX_NAMESPACE + 1 + MAX_NAME + 1 + MAX_BACKEND_NAME  # "namespace/split/backend"
MAX_COOKIE_NAME = 128
MAX_COOKIE_PATH = 1024
MAX_MATCH_NAME = 256
MAX_MATCH_VALUE = 4096
# A sticky key taken from a request header (sticky.header): longer values are ignored (the request falls back to the
# cookie), so a client cannot make the processor hash megabytes per request. The cookie value's own bound.
MAX_KEY_HEADER_VALUE = 256
MAX_ORIGIN = 256
# Generation numbers appear in TrafficSplit status and in kubectl/JSON clients, which read numbers as IEEE doubles:
# 2^53 - 1 is the largest integer they all keep exact. At one publish a millisecond it lasts 285,000 years, so
# refusing more loses nothing, and a token holder cannot push a replica to 2^64 - 1, past which no operator could
# ever number upward again.
MAX_GENERATION = 2**53 - 1
# RE2's program size (its compiled instruction count) bounds both memory and per-byte match cost. 100 is Envoy's
# default error level for safe_regex (runtime `re2.max_program_size.error_level`), so any pattern we accept Envoy
# would accept too.
MAX_REGEX_PROGRAM = 100
# How far above the generation it holds a replica takes a publish (and, holding nothing, above 0). The operator
# numbers by one from what the fleet holds, so it never comes near; 2^32 is 136 years of one publish a second. A
# token holder therefore needs 2^21 publishes to walk a replica to MAX_GENERATION, not one.
MAX_GENERATION_STEP = 2**32
# A replica's per-split refusal as the operator reads it (trust boundary): messages longer are cut.
MAX_REFUSAL_MESSAGE = 1024
