#!/usr/bin/env bash
# Gateway API, pinned: the upstream CRDs copied into the chart, and the upstream conformance suite built, both from
# sigs.k8s.io/gateway-api at GATEWAY_API_VERSION through the Go module proxy (`go mod download`), never retyped.
#
#   charts/trafficsplit/gateway-api-crds/{standard,experimental}/*.yaml   the module's config/crd/<channel>/ files,
#                                                                          byte for byte (committed; a unit test
#                                                                          compares them with the module cache's)
#   ${TRAFFICSPLIT_CACHE:-$HOME/.cache/trafficsplit}/bin/gateway-api-conformance-<version>/gateway-api-conformance
#       the conformance test binary (`go test -c` of sigs.k8s.io/gateway-api/conformance, the package whose
#       TestConformance runs the suite; run it with -gateway-class=… -conformance-profiles=GATEWAY-HTTP …)
#   …/bin/echo-basic-<version>/echo-basic   the backend every conformance test deploys (conformance/echo-basic)
#
# The conformance module is published with `replace sigs.k8s.io/gateway-api => ../` (it is built inside the upstream
# repository), so it cannot be built from the module cache as is: it is copied to a writable temp dir and the replace
# re-pointed at the downloaded gateway-api module of the same version.
#
# Usage: hack/build-gateway-api.sh           copy the CRDs, build what is missing, print the bin dir
#        hack/build-gateway-api.sh --crds    only copy the CRDs (no compiling)
#        hack/build-gateway-api.sh --check   only check the committed CRDs against the module (exit 1 when stale)
# The run itself: hack/conformance.sh (`make conformance`) and tests/e2e/test_8_conformance.py (docs/gateway-api.md).
set -euo pipefail

GATEWAY_API_VERSION=v1.6.3
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CRD_DIR="$ROOT/charts/trafficsplit/gateway-api-crds"
CHANNELS=(standard experimental)

MODE="${1:-build}"
# The control plane script's cache layout, Go settings and its `build` function (temp dir, atomic move, timing).
# shellcheck source=hack/build-controlplane.sh
source "$ROOT/hack/build-controlplane.sh"
log() { echo "build-gateway-api: $*" >&2; }

# module_dir MODULE@VERSION: download through the module proxy and print the module's directory in the cache.
module_dir() {
  local dir
  dir=$(cd "$(mktemp -d)" && "$GO" mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -d "$dir" ]] || { log "could not download $1"; return 1; }
  echo "$dir"
}

# The binaries here answer no --version (echo-basic would start serving), so "answers" means: an executable whose
# embedded build information names the conformance module. Replaces the sourced script's check for this script only.
answers_version() {
  [[ -x "$1" ]] && "$GO" version -m "$1" 2>/dev/null | grep -q 'sigs.k8s.io/gateway-api/conformance'
}

sync_crds() {
  local gwdir="$1" check="$2" stale=0 channel f
  for channel in "${CHANNELS[@]}"; do
    local src="$gwdir/config/crd/$channel" dst="$CRD_DIR/$channel"
    if [[ $check == 1 ]]; then
      # Same file names, same bytes: diff -r reports both an extra and a changed file.
      diff -r --exclude=kustomization.yaml "$src" "$dst" >/dev/null 2>&1 || { log "$dst is stale"; stale=1; }
      continue
    fi
    rm -rf "$dst"
    mkdir -p "$dst"
    for f in "$src"/*.yaml; do
      [[ "$(basename "$f")" == kustomization.yaml ]] && continue
      install -m 0644 "$f" "$dst/"
    done
  done
  [[ $check == 1 ]] && return $stale
  echo "$GATEWAY_API_VERSION" >"$CRD_DIR/VERSION"
  log "CRDs of $GATEWAY_API_VERSION copied to ${CRD_DIR#"$ROOT"/}"
}

# conformance_source TMP: a writable copy of the conformance module with the replace re-pointed.
conformance_source() {
  local tmp="$1" cdir gwdir
  cdir=$(module_dir "sigs.k8s.io/gateway-api/conformance@$GATEWAY_API_VERSION")
  gwdir=$(module_dir "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION")
  cp -R "$cdir" "$tmp/src"
  chmod -R u+w "$tmp/src" # the module cache is read-only
  (cd "$tmp/src" && "$GO" mod edit -replace "sigs.k8s.io/gateway-api=$gwdir")
}

build_conformance() {
  local tmp="$1"
  mkdir -p "$tmp/out"
  conformance_source "$tmp"
  (cd "$tmp/src" && "$GO" test -c -p "$JOBS" -ldflags "-s -w" -o "$tmp/out/gateway-api-conformance" .)
}

build_echo_basic() {
  local tmp="$1"
  mkdir -p "$tmp/out"
  conformance_source "$tmp"
  (cd "$tmp/src" && "$GO" build -p "$JOBS" -ldflags "-s -w" -o "$tmp/out/echo-basic" ./echo-basic)
}

GWDIR=$(module_dir "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION")
case "$MODE" in
  --check) sync_crds "$GWDIR" 1 && log "CRDs match $GATEWAY_API_VERSION"; exit ;;
  --crds) sync_crds "$GWDIR" 0; exit ;;
  build) sync_crds "$GWDIR" 0 ;;
  *) log "unknown argument $MODE"; exit 2 ;;
esac

total_start=$(date +%s)
build gateway-api-conformance "$GATEWAY_API_VERSION" build_conformance
build echo-basic "$GATEWAY_API_VERSION" build_echo_basic
log "done in $(($(date +%s) - total_start))s"
echo "$BIN"
