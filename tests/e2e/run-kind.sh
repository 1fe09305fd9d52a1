#!/usr/bin/env bash
# The end-to-end tier: a real cluster (kind), the real images, the chart, sample backends, real pods.
# Needs Docker, kind, kubectl and helm on PATH; it runs in CI on a hosted runner (.github/workflows/e2e.yml). It
# cannot run on the project's development machines (no Docker engine there), and nothing there pretends it passed:
# without TRAFFICSPLIT_E2E_KUBECONFIG the tests in tests/e2e are skipped.
#
# Usage: tests/e2e/run-kind.sh [pytest args...]
#   KEEP_CLUSTER=1          leave the cluster running afterwards (default: delete it)
#   KIND_CLUSTER=name       cluster name (default trafficsplit-e2e); an existing cluster of that name is reused
#   KIND_NODE_IMAGE=image   kind node image (default: kind's own default for its version)
#   E2E_ARTIFACTS=dir       where diagnostics go on failure (default: ./e2e-artifacts)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

CLUSTER="${KIND_CLUSTER:-trafficsplit-e2e}"
TAG=e2e
RELEASE=ts
RELEASE_NS=trafficsplit-system
APP_NS=shop
NODE_PORT=30080
ARTIFACTS="${E2E_ARTIFACTS:-$root/e2e-artifacts}"
step() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

for tool in docker kind kubectl helm python3; do
  command -v "$tool" >/dev/null || { echo "run-kind: $tool is not on PATH" >&2; exit 2; }
done
docker info >/dev/null 2>&1 || { echo "run-kind: no Docker engine answers (docker info failed)" >&2; exit 2; }

KUBECONFIG_FILE=$(mktemp)
export KUBECONFIG="$KUBECONFIG_FILE"

diagnostics() {
  mkdir -p "$ARTIFACTS"
  {
    kubectl get nodes,pods,svc,endpointslices,networkpolicies,pdb -A -o wide || true
    kubectl get trafficsplits -A -o yaml || true
    kubectl get events -A --sort-by=.lastTimestamp || true
    kubectl -n "$RELEASE_NS" describe pods || true
  } >"$ARTIFACTS/cluster.txt" 2>&1
  for pod in $(kubectl -n "$RELEASE_NS" get pods -o name 2>/dev/null); do
    kubectl -n "$RELEASE_NS" logs "$pod" --all-containers --prefix >"$ARTIFACTS/$(basename "$pod").log" 2>&1 || true
  done
  echo "run-kind: diagnostics in $ARTIFACTS" >&2
}

cleanup() {
  local rc=$?
  ((rc == 0)) || diagnostics
  if [[ "${KEEP_CLUSTER:-0}" != 1 ]]; then
    kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
  else
    echo "run-kind: cluster $CLUSTER kept; kubeconfig: kind get kubeconfig --name $CLUSTER" >&2
  fi
  rm -f "$KUBECONFIG_FILE"
  exit "$rc"
}
trap cleanup EXIT

step "kind cluster $CLUSTER"
if ! kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  kind create cluster --name "$CLUSTER" --config tests/e2e/kind-config.yaml --wait 180s \
    ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"}
fi
kind get kubeconfig --name "$CLUSTER" >"$KUBECONFIG_FILE"

step "images"
docker build -f operator/Dockerfile -t "trafficsplit/operator:$TAG" .
docker build -f extproc/Dockerfile -t "trafficsplit/extproc:$TAG" .
kind load docker-image --name "$CLUSTER" "trafficsplit/operator:$TAG" "trafficsplit/extproc:$TAG"

step "sample backends"
kubectl apply -f examples/kubernetes/backends.yaml
kubectl -n "$APP_NS" wait --for=condition=Available deployment --all --timeout=180s

step "helm install"
bash hack/sync-crd.sh --check
# No --wait: a gateway pod is ready only once it holds a generation, which the operator publishes after install.
helm upgrade --install "$RELEASE" charts/trafficsplit -n "$RELEASE_NS" --create-namespace \
  --set operator.image.repository=trafficsplit/operator --set operator.image.tag="$TAG" \
  --set operator.image.pullPolicy=Never \
  --set gateway.extproc.image.repository=trafficsplit/extproc --set gateway.extproc.image.tag="$TAG" \
  --set gateway.extproc.image.pullPolicy=Never \
  --set gateway.service.type=NodePort --set gateway.service.nodePort="$NODE_PORT"
kubectl -n "$RELEASE_NS" rollout status deployment/"$RELEASE-operator" --timeout=180s
kubectl apply -f examples/kubernetes/shop-split.yaml
kubectl -n "$RELEASE_NS" rollout status deployment/"$RELEASE-gateway" --timeout=300s

step "e2e tests"
export TRAFFICSPLIT_E2E_KUBECONFIG="$KUBECONFIG_FILE"
export TRAFFICSPLIT_E2E_GATEWAY_URL="http://127.0.0.1:$NODE_PORT"
export TRAFFICSPLIT_E2E_NAMESPACE="$APP_NS"
export TRAFFICSPLIT_E2E_RELEASE="$RELEASE"
export TRAFFICSPLIT_E2E_RELEASE_NAMESPACE="$RELEASE_NS"
python3 -m pytest tests/e2e -m e2e -p no:cacheprovider -v "$@"
