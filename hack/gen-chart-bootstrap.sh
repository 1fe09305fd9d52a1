#!/usr/bin/env bash
# Writes the Envoy bootstrap the chart ships (charts/trafficsplit/files/envoy-bootstrap.json) from the one place that
# builds it: `python -m trafficsplit.extproc --print-bootstrap` (trafficsplit.wire.bootstrap). The addresses are the
# gateway pod's fixed, pod-internal ones: the extproc's ext_proc + ADS server on 127.0.0.1:9001, Envoy's admin on
# 127.0.0.1:9901, the HTTP listener on 0.0.0.0:8080. The chart substitutes only the ext_proc message timeout, and the
# node id comes from Envoy's --service-node. tests/unit/test_chart_files.py fails when the committed file is stale.
# With `http` it writes the variant for gateway.extproc.transport: http (ext_proc over Envoy's experimental
# http_service, to the extproc's HTTP/1.1 server on 127.0.0.1:9005; ADS stays on 9001) into envoy-bootstrap-http.json.
#
# Usage: hack/gen-chart-bootstrap.sh [OUT] [grpc|http]
#        (default: charts/trafficsplit/files/envoy-bootstrap.json, or envoy-bootstrap-http.json for http)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
transport="${2:-grpc}"
case "$transport" in
  grpc) default_out="$root/charts/trafficsplit/files/envoy-bootstrap.json"; extra=() ;;
  http) default_out="$root/charts/trafficsplit/files/envoy-bootstrap-http.json"
        extra=(--ext-proc-transport http --ext-proc-http-listen 127.0.0.1:9005) ;;
  *) echo "transport must be grpc or http, not $transport" >&2; exit 2 ;;
esac
out="${1:-$default_out}"
PYTHONPATH="$root/src:$root/operator:$root/extproc${PYTHONPATH:+:$PYTHONPATH}" python3 -m trafficsplit.extproc \
  --print-bootstrap \
  --replica gateway \
  --listen 127.0.0.1:9001 \
  --envoy-listen 0.0.0.0:8080 \
  --envoy-admin 127.0.0.1:9901 \
  "${extra[@]}" >"$out.tmp"
mv "$out.tmp" "$out"
