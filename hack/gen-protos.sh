#!/usr/bin/env bash
# Regenerate the Python code for protos/ into src/ (committed; see docs/protos.md for why).
# tests/unit/test_protos_fresh.py runs this into a temp dir and fails if the committed copy differs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/src}
cd "$root/protos"
python -m grpc_tools.protoc -I . --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" \
  trafficsplit/v1alpha1/publish.proto
