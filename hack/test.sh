#!/usr/bin/env bash
# The README's test command (`make test`), and what .ci/run calls: on a fresh machine it installs everything the tests
# need, builds (or reuses, from ~/.cache/trafficsplit) the real control plane, then runs the static checks and every
# test tier. The kind end-to-end tier needs Docker: its tests skip here, and nothing reports them as passed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
step() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

step "system packages"
missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v curl >/dev/null 2>&1 || missing+=(curl)
if ((${#missing[@]})); then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

step "python packages"
python3 -m pip install -q --disable-pip-version-check -e ".[test,fast]"

step "control plane (kube-apiserver, etcd, helm)"
bash hack/build-controlplane.sh

step "static checks"
ruff check .
ruff format --check .
mypy
# The tree on disk, not whatever `trafficsplit` an editable install points at.
PYTHONPATH=src:operator:extproc lint-imports

step "tests"
# -p no:cacheprovider: a CI clone stays clean.
python3 -m pytest tests -p no:cacheprovider "$@"
