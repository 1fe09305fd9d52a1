#!/usr/bin/env bash
# Static checks of the chart and the CI workflows, run by hack/test.sh's static-checks step:
#
#   actionlint        .github/workflows/*.yml (with shellcheck on their run: blocks when shellcheck is installed)
#   helm-docs         charts/trafficsplit/README.md is what helm-docs generates from values.yaml and
#                     README.md.gotmpl now (regenerate: hack/lint-chart.sh --fix)
#   helm lint         --strict, on the default values and on the values a private-registry install sets
#
# actionlint and helm-docs are built from source through the Go module proxy, like the control plane
# (hack/build-controlplane.sh, whose build and cache functions this script reuses): the first run builds them into
# ${TRAFFICSPLIT_CACHE:-$HOME/.cache/trafficsplit}/bin/<tool>-<version>/, later runs find them there. helm is the one
# hack/build-controlplane.sh builds.
#
# Usage: hack/lint-chart.sh            build what is missing, run the checks
#        hack/lint-chart.sh --fix      regenerate charts/trafficsplit/README.md, then run the checks
#        hack/lint-chart.sh --tools    only build (or find) the tools, print NAME=path lines
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

ACTIONLINT_VERSION=v1.7.12
HELM_DOCS_VERSION=v1.14.2
CHART=charts/trafficsplit

MODE=check
case "${1:-}" in
  --fix) MODE=fix ;;
  --tools) MODE=tools ;;
  "") ;;
  *) echo "usage: hack/lint-chart.sh [--fix|--tools]" >&2; exit 2 ;;
esac

# Versions, GO, JOBS, build(), answers_version() and the temp-dir cleanup; builds nothing when sourced.
# shellcheck source=hack/build-controlplane.sh
source hack/build-controlplane.sh
log() { echo "lint-chart: $*" >&2; }

build_actionlint() {
  local tmp="$1" version="$2"
  mkdir -p "$tmp/out"
  (cd "$tmp" && GOBIN="$tmp/out" "$GO" install -p "$JOBS" \
    -ldflags "-s -w -X github.com/rhysd/actionlint.version=$version" \
    "github.com/rhysd/actionlint/cmd/actionlint@$version")
}

build_helm_docs() {
  local tmp="$1" version="$2"
  mkdir -p "$tmp/out"
  (cd "$tmp" && GOBIN="$tmp/out" "$GO" install -p "$JOBS" -ldflags "-s -w -X main.version=${version#v}" \
    "github.com/norwoodj/helm-docs/cmd/helm-docs@$version")
}

build actionlint "$ACTIONLINT_VERSION" build_actionlint
build helm-docs "$HELM_DOCS_VERSION" build_helm_docs
ACTIONLINT="$BIN/actionlint-$ACTIONLINT_VERSION/actionlint"
HELM_DOCS="$BIN/helm-docs-$HELM_DOCS_VERSION/helm-docs"
HELM="$BIN/helm-$HELM_VERSION/helm"

if [[ $MODE == tools ]]; then
  echo "ACTIONLINT=$ACTIONLINT"
  echo "HELM_DOCS=$HELM_DOCS"
  echo "HELM=$HELM"
  exit 0
fi
answers_version "$HELM" || { log "helm $HELM_VERSION is not built yet: run hack/build-controlplane.sh"; exit 1; }

# helm-docs renders the chart README from values.yaml's comments; it must not read the whole repository for charts.
helm_docs() { "$HELM_DOCS" --chart-search-root "$CHART" --log-level warning "$@"; }

echo "lint-chart: actionlint $ACTIONLINT_VERSION"
"$ACTIONLINT" -no-color

if [[ $MODE == fix ]]; then
  helm_docs
fi
echo "lint-chart: helm-docs $HELM_DOCS_VERSION ($CHART/README.md fresh)"
fresh=$(mktemp)
TMPDIRS+=("$fresh")
helm_docs --dry-run >"$fresh"
if ! diff -u "$CHART/README.md" "$fresh"; then
  echo "lint-chart: $CHART/README.md is stale: run hack/lint-chart.sh --fix and commit the result" >&2
  exit 1
fi

echo "lint-chart: helm lint --strict ($HELM_VERSION)"
# Its own helm home: the check reads no user's repositories or plugins and writes nothing outside a temp dir.
helm_home=$(mktemp -d)
TMPDIRS+=("$helm_home")
export HELM_CACHE_HOME="$helm_home/cache" HELM_CONFIG_HOME="$helm_home/config" HELM_DATA_HOME="$helm_home/data"
"$HELM" lint --strict "$CHART"
# The values docs/helm.md gives for a private registry, and the ecosystem's subchart and identity values.
"$HELM" lint --strict "$CHART" \
  --set 'imagePullSecrets[0].name=regcred' \
  --set operator.image.repository=registry.example.com/trafficsplit/operator \
  --set gateway.extproc.image.repository=registry.example.com/trafficsplit/extproc \
  --set gateway.envoy.image.repository=registry.example.com/trafficsplit/envoy \
  --set global.imageRegistry=ignored.example.com \
  --set fullnameOverride=shop-ts \
  --set operator.serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::123456789012:role/ts
