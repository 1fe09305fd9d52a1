#!/usr/bin/env bash
# Builds the node side of the end-to-end tier's local Kubernetes — kubelet, kube-controller-manager, kube-scheduler,
# kube-proxy, the pause binary and kube-router (its NetworkPolicy controller only) — with the same pinned release,
# wrapper-module recipe and cache as hack/build-controlplane.sh (whose functions it sources).
#
# Output: ${TRAFFICSPLIT_CACHE:-$HOME/.cache/trafficsplit}/bin/<component>-<version>/<component>
# Idempotent: a component whose binary answers --version (pause: -v) is skipped.
#
# Why kube-router: the NetworkPolicy enforcer must work with this kernel and iptables-nft. kube-network-policies
# queues packets with nftables' `queue` statement, and this kernel has no nft_queue (CONFIG_NFT_QUEUE unset);
# kube-router enforces with iptables rules and ipsets, which the kernel has (xt_set, hash:ip, hash:net).
#
# Usage: hack/build-node.sh [--print-env]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=build-controlplane.sh
source "$here/build-controlplane.sh"

KUBE_ROUTER_VERSION=v2.1.0
# The pause binary's C source ships inside the k8s.io/kubernetes module at the pinned release.
PAUSE_VERSION="$KUBE_VERSION"

PRINT_ENV=0
[[ "${1:-}" == "--print-env" ]] && PRINT_ENV=1
log() { echo "build-node: $*" >&2; }

build_kubelet() { build_kube_cmd kubelet "$@"; }
build_kube_controller_manager() { build_kube_cmd kube-controller-manager "$@"; }
build_kube_scheduler() { build_kube_cmd kube-scheduler "$@"; }
build_kube_proxy() { build_kube_cmd kube-proxy "$@"; }

# pause is C: a static binary (the sandbox image has nothing else in it), exactly as Kubernetes' build/pause Makefile.
build_pause() {
  local tmp="$1" version="$2" dir
  dir=$(cd "$tmp" && "$GO" mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -f "$dir/build/pause/linux/pause.c" ]] || { log "pause.c not found in k8s.io/kubernetes@$version"; return 1; }
  mkdir -p "$tmp/out"
  "${CC:-gcc}" -Os -Wall -Werror -static -DVERSION="$version" -o "$tmp/out/pause" "$dir/build/pause/linux/pause.c"
}

# kube-router's go.mod has no replace directives, so `go install module@version` works directly.
build_kube_router() {
  local tmp="$1" version="$2"
  mkdir -p "$tmp/out"
  (cd "$tmp" && GOBIN="$tmp/out" "$GO" install -p "$JOBS" \
    -ldflags "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$version" \
    "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$version")
}

total_start=$(date +%s)
build pause "$PAUSE_VERSION" build_pause
build kube-scheduler "$KUBE_VERSION" build_kube_scheduler
build kube-proxy "$KUBE_VERSION" build_kube_proxy
build kube-controller-manager "$KUBE_VERSION" build_kube_controller_manager
build kubelet "$KUBE_VERSION" build_kubelet
build kube-router "$KUBE_ROUTER_VERSION" build_kube_router
log "done in $(($(date +%s) - total_start))s"
echo "$BIN"

if [[ $PRINT_ENV == 1 ]]; then
  for c in kubelet kube-controller-manager kube-scheduler kube-proxy; do
    n=${c^^}
    echo "${n//-/_}=$BIN/$c-$KUBE_VERSION/$c"
  done
  echo "PAUSE=$BIN/pause-$PAUSE_VERSION/pause"
  echo "KUBE_ROUTER=$BIN/kube-router-$KUBE_ROUTER_VERSION/kube-router"
  echo "KUBE_ROUTER_VERSION=$KUBE_ROUTER_VERSION"
fi
