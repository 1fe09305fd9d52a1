#!/usr/bin/env bash
# The end-to-end tier on kind: the same tests (tests/e2e) that `make e2e` runs on a local node, here against a kind
# cluster on a Docker host. This script only prepares the cluster and loads the images; the tests install the chart
# (`helm install`), apply examples/kubernetes/ and run the traffic. Needs Docker, kind, kubectl and helm on PATH; CI runs
# it on a hosted runner (.github/workflows/e2e.yml). Machines without Docker run the tier on the local node instead.
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
RELEASE_NS=trafficsplit-system  # tests/e2e/cluster.py
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
# The names the tests install with (tests/e2e/conftest.py); Envoy is the chart's default official image.
docker build -f operator/Dockerfile -t "localhost/trafficsplit/operator:$TAG" .
docker build -f extproc/Dockerfile -t "localhost/trafficsplit/extproc:$TAG" .
docker build -t "localhost/trafficsplit/echo:$TAG" tests/e2e/images/echo
kind load docker-image --name "$CLUSTER" \
  "localhost/trafficsplit/operator:$TAG" "localhost/trafficsplit/extproc:$TAG" "localhost/trafficsplit/echo:$TAG"
bash hack/sync-crd.sh --check

step "e2e tests"
export TRAFFICSPLIT_E2E_KUBECONFIG="$KUBECONFIG_FILE"
export TRAFFICSPLIT_E2E_GATEWAY="127.0.0.1:$NODE_PORT"
export TRAFFICSPLIT_E2E_IMAGE_TAG="$TAG"
python3 -m pytest tests/e2e -m e2e -p no:cacheprovider -v "$@"
