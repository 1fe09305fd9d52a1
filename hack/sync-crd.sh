#!/usr/bin/env bash
# Copies the TrafficSplit CRD into the Helm chart. crds/ is the one source; Helm only installs CRDs from the chart's
# own crds/ folder, so the chart carries a byte-for-byte copy, and tests/unit/test_chart_files.py fails when they differ.
#
# Usage: hack/sync-crd.sh          copy crds/*.yaml into charts/trafficsplit/crds/
#        hack/sync-crd.sh --check  exit 1 (and say which) when a copy differs; change nothing
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src="$root/crds"
dst="$root/charts/trafficsplit/crds"

check=0
[[ "${1:-}" == "--check" ]] && check=1

shopt -s nullglob
files=("$src"/*.yaml)
((${#files[@]})) || { echo "sync-crd: no CRDs in $src" >&2; exit 1; }

stale=0
mkdir -p "$dst"
for f in "${files[@]}"; do
  name=$(basename "$f")
  if cmp -s "$f" "$dst/$name"; then
    continue
  fi
  if ((check)); then
    echo "sync-crd: charts/trafficsplit/crds/$name differs from crds/$name (run hack/sync-crd.sh)" >&2
    stale=1
  else
    cp "$f" "$dst/$name"
    echo "sync-crd: copied crds/$name"
  fi
done
# A CRD removed from crds/ must not live on in the chart.
for f in "$dst"/*.yaml; do
  name=$(basename "$f")
  [[ -e "$src/$name" ]] && continue
  if ((check)); then
    echo "sync-crd: charts/trafficsplit/crds/$name has no source in crds/" >&2
    stale=1
  else
    rm "$f"
    echo "sync-crd: removed charts/trafficsplit/crds/$name"
  fi
done
exit "$stale"
