#!/usr/bin/env bash
# `make kind`: a kind cluster running this repository's chart with images built from this repository, the recipe of
# tests/e2e/run-kind.sh without the tests. Creates (or reuses) the cluster, builds the images (hack/images.sh, docker
# or podman), loads them into the cluster's node, and installs the chart with the image overrides docs/helm.md lists.
# Needs kind, kubectl, helm and a Docker or Podman engine (kind runs its node in a container).
#
# Usage: hack/kind.sh
#   KIND_CLUSTER=name      default trafficsplit; an existing cluster of that name is reused
#   BUILDER=docker|podman  default: docker when it answers, else podman (then kind runs on podman too)
#   TAG=dev  RELEASE=ts  NAMESPACE=trafficsplit-system
#   GATEWAY_API=1          also the Gateway API: the experimental-channel CRDs applied (sticky HTTPRoutes need their
#                          sessionPersistence) and the chart installed with gatewayAPI.enabled (docs/quickstart.md)
#   DRY_RUN=1              print the commands instead of running them
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

CLUSTER="${KIND_CLUSTER:-trafficsplit}"
REGISTRY=localhost/trafficsplit
TAG="${TAG:-dev}"
RELEASE="${RELEASE:-ts}"
NAMESPACE="${NAMESPACE:-trafficsplit-system}"
DRY="${DRY_RUN:-0}"
GATEWAY_API="${GATEWAY_API:-0}"

run() {
  if [[ "$DRY" == 1 ]]; then
    echo "$*"
  else
    "$@"
  fi
}

if [[ -z "${BUILDER:-}" ]]; then
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    BUILDER=docker
  elif command -v podman >/dev/null; then
    BUILDER=podman
  elif [[ "$DRY" == 1 ]]; then
    BUILDER=docker
  else
    echo "kind: kind needs a Docker or Podman engine, and none answers here" >&2
    exit 2
  fi
fi
[[ "$BUILDER" == podman ]] && export KIND_EXPERIMENTAL_PROVIDER=podman
if [[ "$DRY" != 1 ]]; then
  for tool in kind kubectl helm; do
    command -v "$tool" >/dev/null || { echo "kind: $tool is not on PATH" >&2; exit 2; }
  done
fi

if [[ "$DRY" == 1 ]] || ! kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  run kind create cluster --name "$CLUSTER" --wait 180s
fi

BUILDER="$BUILDER" REGISTRY="$REGISTRY" TAG="$TAG" DRY_RUN="$DRY" bash hack/images.sh

# Through an archive, which works the same for docker and podman images.
archive=$(mktemp)
trap 'rm -f "$archive"' EXIT
for name in operator extproc envoy; do
  run "$BUILDER" save -o "$archive" "$REGISTRY/$name:$TAG"
  run kind load image-archive --name "$CLUSTER" "$archive"
done

gateway_api=()
if [[ "$GATEWAY_API" == 1 ]]; then
  run kubectl --context "kind-$CLUSTER" apply --server-side -f charts/trafficsplit/gateway-api-crds/experimental/
  run kubectl --context "kind-$CLUSTER" wait --for=condition=Established crd --all --timeout=60s
  gateway_api=(--set gatewayAPI.enabled=true)
fi

run helm upgrade --install "$RELEASE" charts/trafficsplit -n "$NAMESPACE" --create-namespace --wait --timeout 6m \
  --kube-context "kind-$CLUSTER" \
  --set "operator.image.repository=$REGISTRY/operator" --set "operator.image.tag=$TAG" \
  --set "gateway.extproc.image.repository=$REGISTRY/extproc" --set "gateway.extproc.image.tag=$TAG" \
  --set "gateway.envoy.image.repository=$REGISTRY/envoy" --set "gateway.envoy.image.tag=$TAG" "${gateway_api[@]}"

if [[ "$GATEWAY_API" == 1 ]]; then
  echo "kind: Gateway API is on. Next, docs/quickstart.md from its step 4: kubectl apply -f examples/gateway-api/quickstart.yaml" >&2
fi

cat >&2 <<EOF
kind: release $RELEASE is installed in cluster $CLUSTER (kubectl context kind-$CLUSTER). Next, as in the README:
  kubectl apply -f examples/kubernetes/
  kubectl trafficsplit status shop -n shop
Delete the cluster with: kind delete cluster --name $CLUSTER
EOF
