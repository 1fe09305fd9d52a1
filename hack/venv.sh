#!/usr/bin/env bash
# The project's own Python environment: `make test` and `make demo` run inside it, never in the machine's Python, so
# a package that happens to be installed system-wide cannot satisfy an import that pyproject.toml does not declare,
# and a PEP 668 ("externally-managed-environment") system Python is never written to.
#
# Usage: hack/venv.sh EXTRAS      e.g. hack/venv.sh test,bench  or  hack/venv.sh demo
# Prints the venv's bin directory on its last line (stdout); progress goes to stderr.
#
# The venv is ${TRAFFICSPLIT_VENV:-<repo>/.venv}. It is (re)installed when pyproject.toml or the extras changed since
# the last install (a stamp inside the venv), so a warm run takes well under a second.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
extras="${1:?usage: hack/venv.sh EXTRAS (comma-separated, e.g. test,bench)}"
venv="${TRAFFICSPLIT_VENV:-$root/.venv}"
log() { echo "venv: $*" >&2; }

# The Python that creates the venv: PYTHON, else python3.13 … python3.11, else python3; it must be 3.11 or newer.
pick_python() {
  local c
  for c in ${PYTHON:-} python3.13 python3.12 python3.11 python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      command -v "$c"
      return 0
    fi
  done
  return 1
}

if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
  py=$(pick_python) || {
    log "trafficsplit needs Python 3.11 or newer (python3 here: $(python3 --version 2>&1 || echo none))."
    log "Install one (Debian/Ubuntu: apt-get install python3 python3-venv) or set PYTHON=/path/to/python3.11+."
    exit 1
  }
  log "creating $venv with $py ($("$py" --version 2>&1))"
  rm -rf "$venv"
  if ! "$py" -m venv "$venv" 2>/dev/null; then
    # Debian and Ubuntu split venv's pip bootstrap into python3-venv; as root, install it and try again.
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
      ver=$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
      log "installing python$ver-venv (Debian splits venv out of Python)"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "python$ver-venv" >&2
      rm -rf "$venv"
      "$py" -m venv "$venv"
    else
      log "'$py -m venv' failed: on Debian/Ubuntu install python3-venv (sudo apt-get install python3-venv)."
      exit 1
    fi
  fi
fi

stamp="$venv/.trafficsplit-installed"
want="$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1) $extras $root"
# Every requirement of trafficsplit[extras], followed through the self-referencing extras, must be installed at a
# version that satisfies it; prints what is not (a package removed from the venv by hand, a half-finished install).
# The parser is pip's own vendored copy of packaging, not the `packaging` distribution: no extra declares that (the
# test extras pull it in by chance, the demo extra does not), and declaring it would make a runtime dependency of the
# package only for this script. pip is in every venv this script makes (it installs with it), so the check reads
# the requirements the same way whichever extras are installed. A failing check (exit non-zero) fails this script.
unmet() {
  "$venv/bin/python" - "$extras" <<'PY'
import sys
from importlib import metadata
from pip._vendor.packaging.requirements import Requirement

def walk(extras, seen):
    for raw in metadata.requires("trafficsplit") or []:
        req = Requirement(raw)
        wanted = [e for e in extras if req.marker is None or req.marker.evaluate({"extra": e})]
        if req.marker is not None and not wanted and req.marker.evaluate({"extra": ""}) is False:
            continue
        if req.name == "trafficsplit":
            new = set(req.extras) - seen
            seen |= new
            yield from walk(sorted(new), seen)
            continue
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            yield f"{req.name} (not installed)"
            continue
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            yield f"{req.name} {version} (needs {req.specifier})"

extras = [e for e in sys.argv[1].split(",") if e]
for problem in sorted(set(walk(extras, set(extras)))):
    print(problem)
PY
}

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && missing=$(unmet) && [[ -z "$missing" ]]; then
  log "up to date ($venv, extras: $extras)"
else
  [[ -n "${missing:-}" ]] && log "declared but not in the venv, reinstalling: $(echo "$missing" | paste -sd, -)"
  log "installing trafficsplit[$extras] into $venv (first time: a minute or two; pip prints each package)"
  rm -f "$stamp"
  "$venv/bin/python" -m pip install --disable-pip-version-check -q --upgrade pip >&2
  # Not -q: a first install downloads ~300 MB, and a silent minute looks like a hang.
  set +o pipefail
  "$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off -e "$root[$extras]" 2>&1 |
    grep -E --line-buffered -v '^ *(Requirement already satisfied|Using cached|Downloading|Obtaining|Installing|Preparing|Getting|Building|Created|Stored|Checking|Attempting|Found existing|Uninstalling|  )' >&2
  rc=${PIPESTATUS[0]}
  set -o pipefail
  ((rc == 0)) || { log "pip install failed (exit $rc)"; exit "$rc"; }
  "$venv/bin/python" -m pip check >&2 || { log "pip check failed"; exit 1; }
  "$venv/bin/python" -c 'import trafficsplit.core' || { log "the install did not take"; exit 1; }
  missing=$(unmet) || { log "the requirement check itself failed (its error above)"; exit 1; }
  [[ -z "$missing" ]] || { log "still missing after the install: $missing"; exit 1; }
  echo "$want" >"$stamp"
  log "installed"
fi
echo "$venv/bin"
