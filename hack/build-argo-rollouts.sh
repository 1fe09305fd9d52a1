#!/usr/bin/env bash
# Argo Rollouts, pinned and built from source through the Go module proxy, plus our own traffic-router plugin.
#
#   third_party/argo-rollouts/crds/*.yaml   the module's manifests/crds/ files, byte for byte (committed; a unit test
#                                           compares them with the module cache's; the integration tests apply them)
#   ${TRAFFICSPLIT_CACHE:-$HOME/.cache/trafficsplit}/bin/rollouts-controller-<version>/rollouts-controller
#   …/bin/trafficsplit-argo-rollouts-plugin-<hash>/trafficsplit-argo-rollouts-plugin
#       the plugin (plugins/argo-rollouts), cached under a hash of its sources, so an edit rebuilds it
#
# `go install github.com/argoproj/argo-rollouts/cmd/rollouts-controller@vX` is refused: the module's go.mod carries
# `replace` directives (all to other module versions). Building inside a writable copy of the downloaded module keeps
# them in force, so the binary links exactly the versions upstream releases with.
#
# Usage: hack/build-argo-rollouts.sh           copy the CRDs, build what is missing, print the bin dir
#        hack/build-argo-rollouts.sh --crds    only copy the CRDs (no compiling)
#        hack/build-argo-rollouts.sh --check   only check the committed CRDs against the module (exit 1 when stale)
#        hack/build-argo-rollouts.sh --controller   only copy the CRDs and build the controller
#        hack/build-argo-rollouts.sh --plugin  only build the plugin, print its path
#        hack/build-argo-rollouts.sh --plugin-dist DIR   the plugin for every release platform (PLUGIN_PLATFORMS:
#                                              linux/amd64, linux/arm64) as DIR/trafficsplit-argo-rollouts-plugin-
#                                              <os>-<arch>; Go's build cache makes a rebuild of unchanged sources
#                                              a link step (hack/release.sh)
#        hack/build-argo-rollouts.sh --binaries  only build the controller and the plugin (make test's background build)
#        hack/build-argo-rollouts.sh --print-env   the CRDs and the controller, then a ROLLOUTS_CONTROLLER=path line
#                                              (hack/build-images.sh puts it, unmodified, in the stock argo-rollouts
#                                              image; read by tests/support/localnode.py). The e2e tier's controller
#                                              downloads our plugin from the release (--plugin-dist), never the image.
# Builds are CPU-heavy: on a shared machine run with `nice -n 19` and TRAFFICSPLIT_BUILD_JOBS=1.
# `make test` builds both (--binaries): timings in bench/results/*-progressive-build.json and docs/argo-rollouts.md.
set -euo pipefail

ARGO_ROLLOUTS_VERSION=v1.9.1
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CRD_DIR="$ROOT/third_party/argo-rollouts/crds"
PLUGIN_SRC="$ROOT/plugins/argo-rollouts"
PLUGIN_NAME=trafficsplit-argo-rollouts-plugin

MODE="${1:-build}"
# The control plane script's cache layout, Go settings and its `build` function (temp dir, atomic move, timing).
# shellcheck source=hack/build-controlplane.sh
source "$ROOT/hack/build-controlplane.sh"
log() { echo "build-argo-rollouts: $*" >&2; }

# module_json MODULE@VERSION FIELD: download through the module proxy and print one field of `go mod download -json`.
module_json() {
  (cd "$(mktemp -d)" && "$GO" mod download -json "$1" | sed -n "s/^[[:space:]]*\"$2\": \"\\(.*\\)\",\\{0,1\\}\$/\\1/p" | head -n1)
}

# rollouts-controller answers --version; the plugin is a go-plugin (it refuses to run without the host's cookie),
# so for it "answers" means: an executable whose build information names our plugin module.
answers_version() {
  case "$(basename "$1")" in
    "$PLUGIN_NAME") [[ -x "$1" ]] && "$GO" version -m "$1" 2>/dev/null | grep -q 'trafficsplit.dev/argo-rollouts-plugin' ;;
    *) [[ -x "$1" ]] && "$1" --version >/dev/null 2>&1 ;;
  esac
}

sync_crds() {
  local src="$1/manifests/crds" check="$2" f
  if [[ $check == 1 ]]; then
    diff -r --exclude=kustomization.yaml --exclude=VERSION "$src" "$CRD_DIR" >/dev/null 2>&1 || { log "$CRD_DIR is stale"; return 1; }
    return 0
  fi
  rm -rf "$CRD_DIR"
  mkdir -p "$CRD_DIR"
  for f in "$src"/*.yaml; do
    [[ "$(basename "$f")" == kustomization.yaml ]] && continue
    install -m 0644 "$f" "$CRD_DIR/"
  done
  echo "$ARGO_ROLLOUTS_VERSION" >"$CRD_DIR/VERSION"
  log "CRDs of $ARGO_ROLLOUTS_VERSION copied to ${CRD_DIR#"$ROOT"/}"
}

build_rollouts_controller() {
  local tmp="$1" version="$2" commit
  mkdir -p "$tmp/out"
  cp -R "$ARGO_DIR" "$tmp/src"
  chmod -R u+w "$tmp/src" # the module cache is read-only
  # The release's version string, the way upstream's Makefile sets it (commit from the proxy's origin record, if any).
  commit=$(module_json "github.com/argoproj/argo-rollouts@$version" Hash)
  local pkg=github.com/argoproj/argo-rollouts/utils/version
  (cd "$tmp/src" && "$GO" build -p "$JOBS" -o "$tmp/out/rollouts-controller" \
    -ldflags "-s -w -X $pkg.version=${version#v} -X $pkg.gitTag=$version -X $pkg.gitCommit=$commit -X $pkg.gitTreeState=clean" \
    ./cmd/rollouts-controller)
}

# The plugin's cache key: a hash of every source file of its module, so the cache never serves a stale plugin.
plugin_version() {
  (cd "$PLUGIN_SRC" && find . -type f \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) -print0 | sort -z |
    xargs -0 sha256sum | sha256sum | cut -c1-12)
}

build_plugin() {
  local tmp="$1"
  mkdir -p "$tmp/out"
  (cd "$PLUGIN_SRC" && "$GO" build -p "$JOBS" -ldflags "-s -w" -o "$tmp/out/$PLUGIN_NAME" .)
}

# plugin_dist DIR: one static binary per platform. The module's own build flags (CGO off, -trimpath, no VCS stamp,
# -s -w) make the bytes a function of the sources and the Go version, so the release's sha256 can be reproduced.
PLUGIN_PLATFORMS="${PLUGIN_PLATFORMS:-linux/amd64 linux/arm64}"
plugin_dist() {
  local dir="$1" platform out
  mkdir -p "$dir"
  for platform in $PLUGIN_PLATFORMS; do
    out="$dir/$PLUGIN_NAME-${platform%/*}-${platform#*/}"
    (cd "$PLUGIN_SRC" && GOOS="${platform%/*}" GOARCH="${platform#*/}" "$GO" build -p "$JOBS" -ldflags "-s -w" -o "$out.tmp" .)
    mv "$out.tmp" "$out"
    log "$platform: $out"
  done
}
if [[ "$MODE" == --plugin-dist ]]; then
  plugin_dist "${2:?usage: hack/build-argo-rollouts.sh --plugin-dist DIR}"
  exit
fi

ARGO_DIR=$(module_json "github.com/argoproj/argo-rollouts@$ARGO_ROLLOUTS_VERSION" Dir)
[[ -d "$ARGO_DIR" ]] || { log "could not download github.com/argoproj/argo-rollouts@$ARGO_ROLLOUTS_VERSION"; exit 1; }
case "$MODE" in
  --check) sync_crds "$ARGO_DIR" 1 && log "CRDs match $ARGO_ROLLOUTS_VERSION"; exit ;;
  --crds) sync_crds "$ARGO_DIR" 0; exit ;;
  --controller)
    sync_crds "$ARGO_DIR" 0
    build rollouts-controller "$ARGO_ROLLOUTS_VERSION" build_rollouts_controller
    exit
    ;;
  --plugin)
    PLUGIN_VERSION=$(plugin_version)
    build "$PLUGIN_NAME" "$PLUGIN_VERSION" build_plugin
    echo "$BIN/$PLUGIN_NAME-$PLUGIN_VERSION/$PLUGIN_NAME"
    exit
    ;;
  --binaries)
    # make test's background build: no CRD copy (tests read those files meanwhile), no output.
    build rollouts-controller "$ARGO_ROLLOUTS_VERSION" build_rollouts_controller
    PLUGIN_VERSION=$(plugin_version)
    build "$PLUGIN_NAME" "$PLUGIN_VERSION" build_plugin
    exit
    ;;
  --print-env)
    sync_crds "$ARGO_DIR" 0
    build rollouts-controller "$ARGO_ROLLOUTS_VERSION" build_rollouts_controller
    echo "ROLLOUTS_CONTROLLER=$BIN/rollouts-controller-$ARGO_ROLLOUTS_VERSION/rollouts-controller"
    exit
    ;;
  build) sync_crds "$ARGO_DIR" 0 ;;
  *) log "unknown argument $MODE"; exit 2 ;;
esac

total_start=$(date +%s)
build rollouts-controller "$ARGO_ROLLOUTS_VERSION" build_rollouts_controller
PLUGIN_VERSION=$(plugin_version)
build "$PLUGIN_NAME" "$PLUGIN_VERSION" build_plugin
log "done in $(($(date +%s) - total_start))s"
echo "$BIN"
