#!/usr/bin/env bash
# The README's test command (`make test`), and what .ci/run calls: on a fresh machine it installs everything the tests
# need, builds (or reuses, from ~/.cache/trafficsplit) the real control plane, the node binaries and the images, then
# runs the static checks and every test tier — the end-to-end tier included, on a local single-node Kubernetes
# (tests/support/localnode.py; it needs Linux and root, and is skipped with the reason printed anywhere else).
#
# Usage: hack/test.sh [pytest args...]     hack/test.sh --e2e [pytest args...]  (`make e2e`: only the e2e tier)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# Each step prints its start time and the previous step's duration, so a cold run's log says where the time went.
STEP_NAME="" STEP_T0=$(date +%s) RUN_T0=$(date +%s)
step() {
  local now
  now=$(date +%s)
  [[ -n "$STEP_NAME" ]] && printf '== took %ss: %s\n' "$((now - STEP_T0))" "$STEP_NAME"
  STEP_NAME="$1" STEP_T0=$now
  printf '\n== %s (%s, %ss into the run)\n' "$1" "$(date -u +%H:%M:%S)" "$((now - RUN_T0))"
}
# The background builds' log (below) is printed at the end, whatever the exit; if the run ends before the e2e tier
# waits for them, they go on and cache what they build for the next run.
finish() {
  local rc=$?
  [[ -n "${background_log:-}" && -f "$background_log" ]] && { echo "== background builds' log:"; cat "$background_log"; }
  step "end (exit $rc)"
}
trap finish EXIT

E2E_ONLY=0
[[ "${1:-}" == "--e2e" ]] && { E2E_ONLY=1; shift; }
# The local node runs where it can (Linux, root); elsewhere its tests skip and say why.
NODE=0
[[ "$(uname -s)" == Linux && "$(id -u)" == 0 ]] && NODE=1

step "system packages"
missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v curl >/dev/null 2>&1 || missing+=(curl)
# actionlint runs it on the workflows' run: blocks (hack/lint-chart.sh).
command -v shellcheck >/dev/null 2>&1 || missing+=(shellcheck)
if ((NODE)); then
  # The local node's runtime and image builders, from Debian (docs/testing.md, "End-to-end on a real node"; tests/support/localnode.py).
  for pair in containerd:containerd runc:runc /usr/lib/cni/bridge:containernetworking-plugins \
    iptables:iptables nft:nftables ipset:ipset conntrack:conntrack socat:socat mmdebstrap:mmdebstrap \
    buildah:buildah gcc:gcc; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || [[ -x "${pair%%:*}" ]] || missing+=("${pair#*:}")
  done
  # gcc -static needs the C library's static archive.
  [[ -f /usr/lib/x86_64-linux-gnu/libc.a || -f /usr/lib/aarch64-linux-gnu/libc.a ]] || missing+=(libc6-dev)
fi
# The real Prometheus and promtool (2.42): the alerting rules' checks and unit tests, and every dashboard and alert query
# run against a live server (tests/integration/test_monitoring.py, test_observability.py). Without its recommends
# (node exporter, web assets): 22.5 MB, ~14 s to install with fresh package lists.
norec=()
command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || norec+=(prometheus)
if ((${#missing[@]} + ${#norec[@]})); then
  apt-get update -qq
  if ((${#missing[@]})); then DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; fi
  if ((${#norec[@]})); then DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${norec[@]}"; fi
fi

step "python packages (the project's venv: hack/venv.sh)"
# Everything below runs inside the project's own venv, built from the declared extras only: a package installed on
# the machine by hand cannot satisfy an import here. TRAFFICSPLIT_VENV moves it (CI and a fresh clone use .venv).
venv_bin=$(bash hack/venv.sh test,bench | tail -n 1)
export PATH="$venv_bin:$PATH"
export VIRTUAL_ENV="${venv_bin%/bin}"
hash -r
[[ "$(command -v python3)" == "$venv_bin/python3" ]] || { echo "test.sh: python3 is not the venv's" >&2; exit 1; }

if ((!E2E_ONLY)); then
  # Before the builds: a lint or type error (an undeclared import, say) fails in a minute, not after half an hour of
  # cold builds.
  step "static checks"
  ruff check .
  ruff format --check .
  mypy
  # The tree on disk, not whatever `trafficsplit` an editable install points at.
  PYTHONPATH=src:operator:extproc lint-imports
fi

step "control plane (kube-apiserver, etcd, helm)"
bash hack/build-controlplane.sh

if ((!E2E_ONLY)); then
  # After the control plane, whose helm it runs: actionlint on the workflows, the chart README fresh from helm-docs,
  # helm lint --strict (actionlint and helm-docs built once through the Go module proxy, cached like helm).
  step "chart and workflow checks"
  bash hack/lint-chart.sh
fi

step "gateway API (CRDs checked against v1.6.3, the conformance binary and echo-basic)"
# Built (cached) so tests/integration/test_gateway_api_binaries.py runs them rather than skipping, and the e2e tier's
# tests/e2e/test_8_conformance.py runs the suite's whole GATEWAY-HTTP profile (as `make conformance` does).
bash hack/build-gateway-api.sh >/dev/null

step "progressive delivery CRDs and RBAC checked against their modules (Argo Rollouts, Flagger)"
# The modules' own files against the committed copies in third_party/ (exit 1 when stale). This also puts both modules
# in the Go module cache before the unit tier, whose byte-for-byte tests (tests/unit/test_progressive_crds.py) read
# them there: on a cold run the background build would download Flagger's only after the unit tier (2 tests skipped).
bash hack/build-argo-rollouts.sh --check
bash hack/build-flagger.sh --check

step "argo rollouts plugin (plugins/argo-rollouts, cached by a hash of its sources)"
# Built here, not inside tests/integration/test_argo_rollouts_plugin.py, so the log separates its build from the test.
bash hack/build-argo-rollouts.sh --plugin >/dev/null

if ((NODE)); then
  # What only the e2e tier uses, the tier that runs last: the node's binaries (kubelet, controller-manager, scheduler,
  # kube-proxy, pause, kube-router), the images (base, operator, extproc, envoy, echo, pause), the progressive-delivery
  # controllers (Argo Rollouts v1.9.1 with our plugin, Flagger v1.44.0) and Prometheus v2.54.1 (with Kubernetes
  # discovery, which Debian's lacks). Cold, they are most of the build time (docs/testing.md). `make test` compiles them
  # in the background at the lowest priority while the unit and integration tiers run, so a fresh machine hides them in
  # the tests' idle CPU; the node's fixture (tests/support/localnode.py) asks for each again and waits on its lock
  # (hack/build-controlplane.sh `build`, hack/build-images.sh), then finds it cached. A warm run: cache checks, a few
  # seconds. `make e2e` builds them here, in the foreground, each step timed.
  if ((E2E_ONLY)); then
    step "node binaries (kubelet, controller-manager, scheduler, kube-proxy, pause, kube-router)"
    pause=$(bash hack/build-node.sh --print-env | sed -n 's/^PAUSE=//p')
    step "images (base, operator, extproc, envoy, echo, pause)"
    PAUSE="$pause" bash hack/build-images.sh
    step "progressive delivery controllers (Argo Rollouts and our plugin, Flagger)"
    bash hack/build-argo-rollouts.sh --binaries
    bash hack/build-flagger.sh --binaries
    step "Prometheus with Kubernetes discovery (the in-cluster Prometheus of test_11_flagger.py)"
    bash hack/build-prometheus.sh >/dev/null
  else
    step "the e2e tier's builds: started in the background (node binaries, images, Argo Rollouts, Flagger, Prometheus)"
    background_log=$(mktemp -t trafficsplit-e2e-builds.XXXXXX)
    (
      set +e # one build failing must not stop the others; the fixture asks again and fails visibly
      timed() {
        local t0=$SECONDS
        "$@" || { echo "== FAILED (exit $?): $*" >&2; return 1; }
        echo "== took $((SECONDS - t0))s: $*" >&2
      }
      pause=$(timed nice -n 19 bash hack/build-node.sh --print-env | sed -n 's/^PAUSE=//p')
      [[ -n "$pause" ]] && timed env PAUSE="$pause" nice -n 19 bash hack/build-images.sh
      timed nice -n 19 bash hack/build-argo-rollouts.sh --binaries
      timed nice -n 19 bash hack/build-flagger.sh --binaries
      timed nice -n 19 bash hack/build-prometheus.sh
    ) >"$background_log" 2>&1 &
    echo "log: $background_log (printed at the end of the run)"
  fi
fi

if ((E2E_ONLY)); then
  step "e2e tier"
  python3 -m pytest tests/e2e -p no:cacheprovider -v "$@"
  exit
fi


step "tests: unit and integration (two workers)"
# The unit and integration tiers run while the background builds above finish, and the e2e fixture waits only for
# what is left. Two pytest-xdist workers, one test file at a time each (--dist loadfile: a module's fixtures stay in
# one process): most integration tests wait on real processes (apiserver, Envoy, the operator), so two in turn keep
# these 2 cores busy, and each worker's session has its own control plane, free ports and pid-named namespaces
# (tests/support/controlplane.py, netns.py). -p no:cacheprovider: a CI clone stays clean. A failure here still runs
# the e2e tier, as one pytest run did; the exit says both.
# Exit 5 (nothing collected) counts only if neither run collected anything: `-k` may select tests of one run alone.
rcs=()
python3 -m pytest tests/unit tests/integration -p no:cacheprovider -n 2 --dist loadfile "$@" && rcs+=(0) || rcs+=($?)
step "tests: e2e (one process: the local node is one per machine)"
python3 -m pytest tests/e2e -p no:cacheprovider "$@" && rcs+=(0) || rcs+=($?)
rc=0
for r in "${rcs[@]}"; do ((r == 0 || r == 5)) || rc=$r; done
[[ "${rcs[*]}" == "5 5" ]] && rc=5
exit "$rc"
