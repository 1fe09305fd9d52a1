#!/usr/bin/env bash
# `make release`: builds into dist/ everything a tag vX.Y.Z publishes, then checks every checksum (docs/release.md).
#
#   python   trafficsplit-X.Y.Z-py3-none-any.whl and trafficsplit-X.Y.Z.tar.gz: setuptools' PEP 517 hooks called in the
#            project's venv, without isolation (what `python -m build --no-isolation` calls, with no extra dependency
#            and no network), over a copy of the files git tracks or would track (no build/, .venv, caches)
#   krew     kubectl-trafficsplit-vX.Y.Z.tar.gz (plugins/krew/build.py, reproducible) and its manifest trafficsplit.yaml,
#            refused when the manifest's sha256 is not the archive's
#   chart    trafficsplit-X.Y.Z.tgz: `helm lint --strict`, then `helm package`, with the pinned helm
#   plugin   trafficsplit-argo-rollouts-plugin-linux-amd64 and -arm64 (hack/build-argo-rollouts.sh --plugin-dist)
#   images   trafficsplit-{operator,extproc,envoy}-X.Y.Z.oci.tar: the images hack/build-images.sh builds (or finds
#            cached) as OCI archives named ghcr.io/trafficsplit/<name>:X.Y.Z (linux/amd64; needs root and buildah)
#   then     SHA256SUMS and release-notes.md (hack/release.py finish: versions, sizes, digests, install lines), and the
#            check of SHA256SUMS, the krew manifest, each OCI archive's blobs and every sha256 the notes quote
#
# Usage: hack/release.sh [--dist DIR] [--only PARTS]   PARTS: comma-separated from python,krew,chart,plugin,images
#                                                       (default all); DIR defaults to dist/ in the repository
# Idempotent: DIR is written whole into a sibling temp dir and swapped in at the end, so a failed run leaves the last
# good one. Cached: the Go build cache makes the plugin a link step, and the OCI archives are kept under
# ${TRAFFICSPLIT_CACHE:-$HOME/.cache/trafficsplit}/release-images keyed by the image archive they come from (whose
# name is build-images.sh's hash of its inputs), so an unchanged image is a hard link. The images part builds the
# images that are missing (minutes each on a cold cache): `--only python,krew,chart,plugin` skips it.
# RELEASE_PYTHON=path uses that interpreter instead of the project's venv (hack/venv.sh test,bench, as make test).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

DIST="$root/dist"
PARTS=python,krew,chart,plugin,images
while (($#)); do
  case "$1" in
    --dist) DIST=$(realpath -m "${2:?--dist DIR}"); shift 2 ;;
    --only) PARTS="${2:?--only PARTS}"; shift 2 ;;
    *) echo "usage: hack/release.sh [--dist DIR] [--only python,krew,chart,plugin,images]" >&2; exit 2 ;;
  esac
done
wanted() { [[ ",$PARTS," == *",$1,"* ]]; }
log() { echo "release: $*" >&2; }
for part in ${PARTS//,/ }; do
  [[ " python krew chart plugin images " == *" $part "* ]] || { log "no part named $part"; exit 2; }
done

CACHE="${TRAFFICSPLIT_CACHE:-$HOME/.cache/trafficsplit}"
PY="${RELEASE_PYTHON:-$(bash hack/venv.sh test,bench | tail -n 1)/python}"
[[ "$PY" == /* ]] || PY="$root/$PY"
[[ -x "$PY" ]] || { log "no Python at $PY (hack/venv.sh failed? its log is above)"; exit 1; }
PATH="$(dirname "$PY"):$PATH" # build-images.sh finds Envoy's binary through the python3 on PATH
VERSION=$("$PY" hack/release.py version)
start=$(date +%s)

mkdir -p "$(dirname "$DIST")"
work=$(mktemp -d "$DIST.tmp.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage="$work/dist"
mkdir -p "$stage"
timed() {
  local t0=$SECONDS
  "$@"
  log "$1: $((SECONDS - t0))s"
}

# The sources as the commit (plus any edit not yet committed) has them, each file dated at the commit, so the wheel's
# entries (SOURCE_DATE_EPOCH) and the sdist's members do not depend on when this ran.
COMMIT=$(git rev-parse HEAD)
[[ -z "$(git status --porcelain)" ]] || COMMIT+=" (with uncommitted changes)"
export SOURCE_DATE_EPOCH
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)
src="$work/src"
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [[ -e "$f" || -L "$f" ]] && printf '%s\0' "$f"; done |
  tar --null --no-recursion -T - -cf - | tar -xf - -C "$src"
find "$src" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

python_part() {
  # setuptools rewrites sys.argv while it runs: the output dir is read first.
  (cd "$src" && "$PY" -c '
import sys
from setuptools import build_meta
out = sys.argv[1]
build_meta.build_sdist(out)
build_meta.build_wheel(out)
' "$stage" >"$work/python.log" 2>&1) || { cat "$work/python.log" >&2; return 1; }
}

krew_part() {
  "$PY" "$src/plugins/krew/build.py" --check
  "$PY" "$src/plugins/krew/build.py" "$stage" >/dev/null
  install -m 0644 "$src/plugins/krew/trafficsplit.yaml" "$stage/"
}

chart_part() {
  local helm
  helm="${HELM:-$(bash hack/build-controlplane.sh --helm)}"
  # A private helm home: nothing of the user's repositories or plugins takes part.
  export HELM_CACHE_HOME="$work/helm/cache" HELM_CONFIG_HOME="$work/helm/config" HELM_DATA_HOME="$work/helm/data"
  "$helm" lint --strict "$src/charts/trafficsplit" >"$work/helm.log" || { cat "$work/helm.log" >&2; return 1; }
  "$helm" package "$src/charts/trafficsplit" --destination "$stage" >/dev/null
}

plugin_part() {
  bash hack/build-argo-rollouts.sh --plugin-dist "$stage"
}

# oci_archive DOCKER_ARCHIVE REF OUT: the image re-written as an OCI archive whose index names it REF, through a
# buildah storage of its own (never build-images.sh's, so the two never wait on each other's lock).
oci_archive() {
  local from="$1" ref="$2" out="$3" store="$CACHE/release-images/buildah" id
  bah() { buildah --root "$store/root" --runroot "$store/run" --storage-driver overlay "$@"; }
  id=$(bah pull -q "docker-archive:$from")
  bah push -q "$id" "oci-archive:$out.tmp:$ref" >/dev/null
  bah rmi -f "$id" >/dev/null
  mv "$out.tmp" "$out"
}

images_part() {
  local kv name from cached lock
  kv=$(ONLY="envoy operator extproc" bash hack/build-images.sh --print-env)
  mkdir -p "$CACHE/release-images"
  exec {lock}>"$CACHE/release-images/.lock"
  flock "$lock"
  for name in operator extproc envoy; do
    from=$(sed -n "s/^${name^^}_IMAGE=//p" <<<"$kv")
    cached="$CACHE/release-images/$(basename "$from" .tar)-$VERSION.oci.tar"
    if [[ -s "$cached" ]]; then
      log "$name: cached ($cached)"
    else
      find "$CACHE/release-images" -maxdepth 1 -name "$name-*.oci.tar" -delete
      oci_archive "$from" "ghcr.io/trafficsplit/$name:$VERSION" "$cached"
    fi
    ln -f "$cached" "$stage/trafficsplit-$name-$VERSION.oci.tar" 2>/dev/null ||
      cp "$cached" "$stage/trafficsplit-$name-$VERSION.oci.tar"
  done
  exec {lock}>&-
}

for part in python krew chart plugin images; do
  if wanted "$part"; then timed "${part}_part"; fi
done
"$PY" hack/release.py finish "$stage" "$COMMIT"

rm -rf "$DIST"
mv "$stage" "$DIST"
log "$VERSION in ${DIST#"$root"/}/ in $(($(date +%s) - start))s:"
find "$DIST" -maxdepth 1 -type f -printf '  %12s  %f\n' | sort -k2 >&2
