#!/usr/bin/env bash
# Writes the Envoy bootstrap the chart ships (charts/trafficsplit/files/envoy-bootstrap.json) from the one place that
# builds it: `python -m trafficsplit.extproc --print-bootstrap` (trafficsplit.wire.bootstrap). The addresses are the
# gateway pod's fixed, pod-internal ones: the extproc's ext_proc + ADS server on 127.0.0.1:9001, Envoy's admin on
# 127.0.0.1:9901, the HTTP listener on 0.0.0.0:8080. The chart substitutes only the ext_proc message timeout, and the
# node id comes from Envoy's --service-node. tests/unit/test_chart_files.py fails when the committed file is stale.
#
# Usage: hack/gen-chart-bootstrap.sh [OUT]     (default: charts/trafficsplit/files/envoy-bootstrap.json)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="${1:-$root/charts/trafficsplit/files/envoy-bootstrap.json}"
PYTHONPATH="$root/src:$root/operator:$root/extproc${PYTHONPATH:+:$PYTHONPATH}" python3 -m trafficsplit.extproc \
  --print-bootstrap \
  --replica gateway \
  --listen 127.0.0.1:9001 \
  --envoy-listen 0.0.0.0:8080 \
  --envoy-admin 127.0.0.1:9901 >"$out.tmp"
mv "$out.tmp" "$out"
