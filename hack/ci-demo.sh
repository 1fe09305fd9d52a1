#!/usr/bin/env bash
# The README's first command from a fresh clone, in CI (.ci/run, before `make test`): clones the current commit into
# a temp dir, runs `make demo` there with an empty .venv (the demo extra only), then the README's demo lines verbatim:
# the curl lines, the flip edit, the plan line, Ctrl-C (tests/support/freshdemo.py). Prints the timings.
#
# Usage: hack/ci-demo.sh [--drop NAME] [--keep]    --drop: a dependency removed from the clone's extras (must fail)
#
# The driver runs in the project's test venv (hack/venv.sh test,bench), which `make test` then finds up to date; the
# clone's own venv is the one under test. pip's cache is shared, so the demo extra's install downloads nothing twice.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
venv_bin=$(bash hack/venv.sh test,bench | tail -n 1)
PYTHONPATH=src:operator:extproc:. exec "$venv_bin/python" -m tests.support.freshdemo "$@"
