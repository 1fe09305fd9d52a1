#!/usr/bin/env bash
# Builds the real Kubernetes control plane the integration tests run against — kube-apiserver, etcd and helm — from
# source at pinned versions, using only Go and the Go module proxy (no prebuilt binaries can be downloaded here).
#
# Output: ${TRAFFICSPLIT_CACHE:-$HOME/.cache/trafficsplit}/bin/<component>-<version>/<component>
# It lives outside the repo so `git clean` keeps it and every work tree on the machine shares one copy.
#
# Idempotent: a component whose binary exists and answers `--version` is skipped, so a warm run takes about a second.
#
# Usage: hack/build-controlplane.sh            build what is missing, print the bin dir
#        hack/build-controlplane.sh --print-env   same, then print NAME=path lines (read by tests/support/controlplane.py)
#        hack/build-controlplane.sh --helm        only helm: build it if missing, print its path (hack/release.sh)
# Sourced (by hack/build-node.sh) it only defines the versions and the build functions.
set -euo pipefail

# --- pinned versions -------------------------------------------------------------------------------------------------
# kube-apiserver 1.33: within the ±1 minor skew of the machine's kubectl (1.32), so no separate kubectl is needed.
KUBE_VERSION=v1.33.13
# etcd 3.6 is supported by Kubernetes 1.33 (its client library speaks to 3.5 and 3.6 servers alike).
ETCD_VERSION=v3.6.16
HELM_VERSION=v3.20.2

CACHE="${TRAFFICSPLIT_CACHE:-$HOME/.cache/trafficsplit}"
BIN="$CACHE/bin"

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
[[ -x "$GO" ]] || { echo "build-controlplane: Go toolchain not found (set GO=/path/to/go)" >&2; exit 1; }

# Static, reproducible binaries; -p caps concurrent compile jobs at the core count so a 2-core machine stays usable.
export CGO_ENABLED=0
export GOFLAGS="-trimpath -buildvcs=false"
export GO111MODULE=on
JOBS="${TRAFFICSPLIT_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"

PRINT_ENV=0
[[ "${1:-}" == "--print-env" ]] && PRINT_ENV=1

log() { echo "build-controlplane: $*" >&2; }

# Wrapper modules and half-built outputs live in temp dirs under $BIN; they are removed however the script ends.
TMPDIRS=()
cleanup() { ((${#TMPDIRS[@]})) && rm -rf "${TMPDIRS[@]}"; return 0; }
trap cleanup EXIT

# answers_version PATH: true when the binary exists and runs. A half-written file from an interrupted build fails here.
answers_version() {
  local bin="$1"
  [[ -x "$bin" ]] || return 1
  case "$(basename "$bin")" in
    helm) "$bin" version --short >/dev/null 2>&1 ;;
    pause) "$bin" -v >/dev/null 2>&1 ;;
    *) "$bin" --version >/dev/null 2>&1 ;;
  esac
}

# build COMPONENT VERSION FUNC: runs FUNC OUTDIR into a temp dir and moves the result in place atomically, so a
# killed build never leaves a binary that looks complete.
build() {
  local name="$1" version="$2" fn="$3"
  local dir="$BIN/$name-$version" lock
  mkdir -p "$BIN"
  # Two runs wanting the same binary at once (make test's background build and the e2e fixture that needs it now)
  # take turns: the second waits for the first, then finds the binary cached. The lock goes with the fd at exit.
  exec {lock}>"$BIN/.lock-$name-$version"
  flock "$lock"
  if answers_version "$dir/$name"; then
    log "$name $version: cached ($dir)"
    exec {lock}>&-
    return 0
  fi
  log "$name $version: building …"
  local start tmp
  start=$(date +%s)
  tmp=$(mktemp -d "$BIN/.build-$name.XXXXXX")
  TMPDIRS+=("$tmp")
  "$fn" "$tmp" "$version"
  answers_version "$tmp/out/$name" || { log "$name $version: built binary does not answer --version"; return 1; }
  rm -rf "$dir"
  mv "$tmp/out" "$dir"
  rm -rf "$tmp"
  log "$name $version: built in $(($(date +%s) - start))s ($dir)"
  exec {lock}>&-
}

# --- kube-apiserver (and the node's binaries, hack/build-node.sh) ----------------------------------------------------
# `go install k8s.io/kubernetes/cmd/kube-apiserver@vX` is refused because k8s.io/kubernetes' go.mod replaces its
# staging modules (k8s.io/api, k8s.io/apiserver, …) with local ./staging paths. A wrapper module requires
# k8s.io/kubernetes and points each of those modules at its published v0.<minor>.<patch> tag instead.
# build_kube_cmd NAME TMP VERSION: builds k8s.io/kubernetes/cmd/NAME (kube-apiserver, kubelet, kube-proxy, …).
build_kube_cmd() {
  local name="$1" tmp="$2" version="$3"
  local staging_version="v0.${version#v1.}"
  local gomod
  gomod=$(cd "$tmp" && "$GO" mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  [[ -f "$gomod" ]] || { log "could not download k8s.io/kubernetes@$version"; return 1; }

  mkdir -p "$tmp/wrap" "$tmp/out"
  {
    echo "module trafficsplit.test/controlplane"
    # Same language version and GODEBUG defaults as upstream, so the binary behaves like the released one.
    grep -E '^(go|godebug) ' "$gomod"
    echo "require k8s.io/kubernetes $version"
    # Read the staging list from the published go.mod rather than hard-coding it: it changes between releases.
    sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\) => \./staging/.*#\1#p' "$gomod" |
      while read -r mod; do echo "replace $mod => $mod $staging_version"; done
  } >"$tmp/wrap/go.mod"

  local pkgver="k8s.io/component-base/version" cgover="k8s.io/client-go/pkg/version"
  local major minor ld
  major=$(echo "$version" | cut -d. -f1 | tr -d v)
  minor=$(echo "$version" | cut -d. -f2)
  ld="-s -w"
  for p in "$pkgver" "$cgover"; do
    ld+=" -X $p.gitVersion=$version -X $p.gitMajor=$major -X $p.gitMinor=$minor"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  (
    cd "$tmp/wrap"
    "$GO" get "k8s.io/kubernetes/cmd/$name@$version"
    "$GO" build -p "$JOBS" -ldflags "$ld" -o "$tmp/out/$name" "k8s.io/kubernetes/cmd/$name"
  )
}
build_kube_apiserver() { build_kube_cmd kube-apiserver "$@"; }

# --- etcd ------------------------------------------------------------------------------------------------------------
# The etcd main package is the module root go.etcd.io/etcd/server/v3; its go.mod also carries replace directives
# (../api, ../client, …), so `go install …@version` is refused the same way and it gets a wrapper module too. Its
# sibling modules are published at the same tag, which is what the wrapper's requirement graph resolves to.
build_etcd() {
  local tmp="$1" version="$2"
  mkdir -p "$tmp/wrap" "$tmp/out"
  printf 'module trafficsplit.test/etcd\n\ngo 1.24\n' >"$tmp/wrap/go.mod"
  (
    cd "$tmp/wrap"
    "$GO" get "go.etcd.io/etcd/server/v3@$version"
    # etcd's own version string is a constant in go.etcd.io/etcd/api/v3/version, so no -X is needed for it.
    "$GO" build -p "$JOBS" -ldflags "-s -w" -o "$tmp/out/etcd" go.etcd.io/etcd/server/v3
  )
}

# --- helm ------------------------------------------------------------------------------------------------------------
build_helm() {
  local tmp="$1" version="$2"
  mkdir -p "$tmp/out"
  # Helm's default version string is only "v3.N"; set the full one the way its Makefile does.
  (cd "$tmp" && GOBIN="$tmp/out" "$GO" install -p "$JOBS" \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$version -X helm.sh/helm/v3/internal/version.gitTreeState=clean" \
    "helm.sh/helm/v3/cmd/helm@$version")
}

# Sourced: stop here, with the functions and versions defined.
[[ "${BASH_SOURCE[0]}" != "$0" ]] && return 0

if [[ "${1:-}" == "--helm" ]]; then
  build helm "$HELM_VERSION" build_helm
  echo "$BIN/helm-$HELM_VERSION/helm"
  exit 0
fi

total_start=$(date +%s)
build kube-apiserver "$KUBE_VERSION" build_kube_apiserver
build etcd "$ETCD_VERSION" build_etcd
build helm "$HELM_VERSION" build_helm
log "done in $(($(date +%s) - total_start))s"
echo "$BIN"

if [[ $PRINT_ENV == 1 ]]; then
  echo "KUBE_APISERVER=$BIN/kube-apiserver-$KUBE_VERSION/kube-apiserver"
  echo "ETCD=$BIN/etcd-$ETCD_VERSION/etcd"
  echo "HELM=$BIN/helm-$HELM_VERSION/helm"
  echo "KUBE_VERSION=$KUBE_VERSION"
  echo "ETCD_VERSION=$ETCD_VERSION"
  echo "HELM_VERSION=$HELM_VERSION"
fi
