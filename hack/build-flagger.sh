#!/usr/bin/env bash
# Flagger, pinned and built from source through the Go module proxy.
#
#   third_party/flagger/crds/crd.yaml   the module's artifacts/flagger/crd.yaml (Canary, MetricTemplate, AlertProvider),
#                                       byte for byte (committed; a unit test compares it with the module cache's)
#   third_party/flagger/rbac/account.yaml the module's artifacts/flagger/account.yaml (ServiceAccount, ClusterRole,
#                                       ClusterRoleBinding in namespace default), byte for byte
#   ${TRAFFICSPLIT_CACHE:-$HOME/.cache/trafficsplit}/bin/flagger-<version>/flagger
#
# github.com/fluxcd/flagger has no `replace` directives, so `go install …@version` builds it as released.
#
# Usage: hack/build-flagger.sh           copy the CRDs, build what is missing, print the bin dir
#        hack/build-flagger.sh --crds    only copy the CRDs (no compiling)
#        hack/build-flagger.sh --check   only check the committed CRDs against the module (exit 1 when stale)
#        hack/build-flagger.sh --print-env   build what is missing, print FLAGGER=<the binary> (hack/build-images.sh)
#        hack/build-flagger.sh --binaries    only build the binary (make test's background build: no CRD copy)
# Builds are CPU-heavy: on a shared machine run with `nice -n 19` and TRAFFICSPLIT_BUILD_JOBS=1.
# hack/test.sh starts it in the background and the e2e tier's node asks for it (cached: a warm run costs the module
# lookup, ~1 s); timings in bench/results/*-progressive-build.json and docs/flagger.md.
set -euo pipefail

FLAGGER_VERSION=v1.44.0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CRD_DIR="$ROOT/third_party/flagger/crds"
RBAC_DIR="$ROOT/third_party/flagger/rbac"

MODE="${1:-build}"
# shellcheck source=hack/build-controlplane.sh
source "$ROOT/hack/build-controlplane.sh"
log() { echo "build-flagger: $*" >&2; }

# flagger takes Go's flag package: -version prints "Flagger version X revision Y" and exits 0.
answers_version() { [[ -x "$1" ]] && "$1" -version >/dev/null 2>&1; }

module_dir() {
  local dir
  dir=$(cd "$(mktemp -d)" && "$GO" mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -d "$dir" ]] || { log "could not download $1"; return 1; }
  echo "$dir"
}

sync_crds() {
  local src="$1/artifacts/flagger/crd.yaml" check="$2"
  if [[ $check == 1 ]]; then
    cmp -s "$src" "$CRD_DIR/crd.yaml" || { log "$CRD_DIR/crd.yaml is stale"; return 1; }
    cmp -s "$1/artifacts/flagger/account.yaml" "$RBAC_DIR/account.yaml" || { log "$RBAC_DIR/account.yaml is stale"; return 1; }
    return 0
  fi
  mkdir -p "$CRD_DIR" "$RBAC_DIR"
  install -m 0644 "$src" "$CRD_DIR/crd.yaml"
  install -m 0644 "$1/artifacts/flagger/account.yaml" "$RBAC_DIR/account.yaml"
  echo "$FLAGGER_VERSION" >"$CRD_DIR/VERSION"
  log "CRDs and RBAC of $FLAGGER_VERSION copied to ${CRD_DIR#"$ROOT"/} and ${RBAC_DIR#"$ROOT"/}"
}

build_flagger() {
  local tmp="$1" version="$2"
  mkdir -p "$tmp/out"
  (cd "$tmp" && GOBIN="$tmp/out" "$GO" install -p "$JOBS" -ldflags "-s -w" "github.com/fluxcd/flagger/cmd/flagger@$version")
}

FLAGGER_DIR=$(module_dir "github.com/fluxcd/flagger@$FLAGGER_VERSION")
case "$MODE" in
  --check) sync_crds "$FLAGGER_DIR" 1 && log "CRDs match $FLAGGER_VERSION"; exit ;;
  --crds) sync_crds "$FLAGGER_DIR" 0; exit ;;
  build | --print-env) sync_crds "$FLAGGER_DIR" 0 ;;
  --binaries) ;; # make test's background build: no CRD copy (tests read those files meanwhile)
  *) log "unknown argument $MODE"; exit 2 ;;
esac

total_start=$(date +%s)
build flagger "$FLAGGER_VERSION" build_flagger
log "done in $(($(date +%s) - total_start))s"
if [[ $MODE == --print-env ]]; then echo "FLAGGER=$BIN/flagger-$FLAGGER_VERSION/flagger"; else echo "$BIN"; fi
