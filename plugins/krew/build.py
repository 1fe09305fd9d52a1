"""Build the krew archive (the launcher and the LICENSE) reproducibly, and keep the manifest's sha256 in step.

Usage: python plugins/krew/build.py DIR     write DIR/kubectl-trafficsplit-vX.Y.Z.tar.gz, print its sha256
       python plugins/krew/build.py --check  exit 1 when trafficsplit.yaml's sha256 is not the archive's

Reproducible (fixed mtimes, owners and modes, gzip without a timestamp), so the sha256 in the manifest is a function of
the two files and the version, and a test can hold the manifest to it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import sys
import tarfile
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MANIFEST = HERE / "trafficsplit.yaml"
FILES = ((HERE / "kubectl-trafficsplit", 0o755), (ROOT / "LICENSE", 0o644))


def version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def archive_name() -> str:
    return f"kubectl-trafficsplit-v{version()}.tar.gz"


def archive() -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, mode in FILES:
            data = path.read_bytes()
            info = tarfile.TarInfo(path.name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def manifest_sha256() -> str:
    for line in MANIFEST.read_text().splitlines():
        if line.strip().startswith("sha256:"):
            return line.split(":", 1)[1].strip().strip('"')
    raise SystemExit(f"{MANIFEST}: no sha256")


def main(argv: list[str]) -> int:
    digest = hashlib.sha256(archive()).hexdigest()
    if argv == ["--check"]:
        if manifest_sha256() != digest:
            print(f"{MANIFEST.name}: sha256 {manifest_sha256()} is not the archive's {digest}", file=sys.stderr)
            return 1
        return 0
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    target = Path(argv[0]) / archive_name()
    target.write_bytes(archive())
    print(f"{target} sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
