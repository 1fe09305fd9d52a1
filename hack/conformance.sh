#!/usr/bin/env bash
# `make conformance`: the upstream Gateway API conformance suite (v1.6.3, GATEWAY-HTTP profile) against trafficsplit
# on the local single-node Kubernetes (tests/support/localnode.py; Linux and root). Builds or reuses what it needs
# (control plane, node binaries, images, the conformance binary and echo-basic, all cached in ~/.cache/trafficsplit),
# then `python -m tests.support.conformance`: boots the node, installs the CRDs and the chart with Gateway API on, runs
# the suite, writes conformance/reports/v1.6.3/trafficsplit/<channel>-<version>-default-report.yaml (whole-profile
# runs only), prints every test's result and the timings, and tears the node down. docs/gateway-api.md, "Running the
# conformance suite".
#
# Usage: hack/conformance.sh                 the whole GATEWAY-HTTP profile
#        hack/conformance.sh --quick         HTTPRouteWeight and one test of every group (a quick look; `make test`
#                                            runs the whole profile in its e2e tier)
#        hack/conformance.sh --tests A,B     only these tests
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
t0=$(date +%s)
trap 'echo "conformance.sh: total $(($(date +%s) - t0))s"' EXIT
[[ "$(uname -s)" == Linux && "$(id -u)" == 0 ]] || { echo "conformance.sh: needs Linux and root (the local node)" >&2; exit 2; }

# The same extras as hack/test.sh: the venv's stamp then matches and neither reinstalls it.
venv_bin=$(bash hack/venv.sh test,bench | tail -n 1)
export PATH="$venv_bin:$PATH"
bash hack/build-controlplane.sh >/dev/null
bash hack/build-gateway-api.sh >/dev/null
pause=$(bash hack/build-node.sh --print-env | sed -n 's/^PAUSE=//p')
PAUSE="$pause" bash hack/build-images.sh >/dev/null
echo "conformance.sh: builds checked in $(($(date +%s) - t0))s"
# The suite itself is bounded inside (-test.timeout, 60 min whole / 20 min quick); this bounds everything else too.
timeout --signal=TERM --kill-after=60 80m python3 -m tests.support.conformance "$@"
