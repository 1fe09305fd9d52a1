"""The names of the gateway's own Envoy clusters, which no backend may take.

Here, apart from `bootstrap.py` (which builds those clusters) and `generation.py` (whose receiver refuses a backend
named like one), so that the publish conversion — which the operator imports — does not pull in Envoy's resources.
"""

from __future__ import annotations

EXTPROC_CLUSTER = "trafficsplit_extproc"
ADS_CLUSTER = "trafficsplit_ads"
# A backend named like one would be refused by Envoy only after the ACK timeout, or worse, send client traffic to the
# processor.
RESERVED_CLUSTERS = frozenset({EXTPROC_CLUSTER, ADS_CLUSTER})
