"""The release's bookkeeping over what hack/release.sh built into a dist directory: SHA256SUMS, release-notes.md, and
the check of every checksum the artifacts and their manifests quote.

Usage: python hack/release.py version            print the version (exit 1 when pyproject, Chart.yaml and the krew
                                                  manifest disagree)
       python hack/release.py finish DIR COMMIT   write DIR/SHA256SUMS and DIR/release-notes.md, then verify DIR
       python hack/release.py verify DIR          exit 1 (naming each problem) unless every checksum in DIR holds

What is checked: every SHA256SUMS line against its file, and every artifact listed; the krew manifest's sha256 against
the archive its `uri` names; each OCI archive's blobs against the digests and sizes its index and manifests give; and
every sha256 the notes quote (artifact table, image digests, argo-rollouts-config lines) against the file it names.
The notes are a function of the artifacts and the commit (no clock), so a rebuild of the same inputs writes the same
notes.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import tarfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
SUMS = "SHA256SUMS"
NOTES = "release-notes.md"
KREW_MANIFEST = "trafficsplit.yaml"
PLUGIN_PREFIX = "trafficsplit-argo-rollouts-plugin-"
OCI_SUFFIX = ".oci.tar"
# Where a tag's GitHub release serves these files (the krew manifest's uri and argo-rollouts-config's location).
DOWNLOAD = "https://github.com/trafficsplit/trafficsplit/releases/download"
REF_NAME = "org.opencontainers.image.ref.name"
# An OCI archive's index and manifests are small JSON documents; anything bigger is not one.
MAX_MANIFEST_BYTES = 4 << 20


def versions(root: Path = ROOT) -> dict[str, str]:
    """Every place that states the release's version, by where it says it (a tag vX.Y.Z must be all of them)."""
    chart = yaml.safe_load((root / "charts/trafficsplit/Chart.yaml").read_text())
    krew = yaml.safe_load((root / "plugins/krew/trafficsplit.yaml").read_text())
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    return {
        "pyproject.toml project.version": str(project["version"]),
        "Chart.yaml version": str(chart["version"]),
        "Chart.yaml appVersion": str(chart["appVersion"]),
        "krew manifest spec.version": str(krew["spec"]["version"]).removeprefix("v"),
    }


def version() -> str:
    found = versions()
    if len(set(found.values())) != 1:
        raise SystemExit(f"release: the versions disagree: {found}")
    return found["pyproject.toml project.version"]


def sha256_stream(f: IO[bytes]) -> str:
    digest = hashlib.sha256()
    for chunk in iter(lambda: f.read(1 << 20), b""):
        digest.update(chunk)
    return digest.hexdigest()


def sha256_file(path: Path) -> str:
    with path.open("rb") as f:
        return sha256_stream(f)


def artifacts(dist: Path) -> list[Path]:
    """The files a tag publishes: everything in DIR but the two files written from them."""
    return sorted(p for p in dist.iterdir() if p.is_file() and p.name not in {SUMS, NOTES} and p.name[0] != ".")


def write_sums(dist: Path) -> None:
    lines = [f"{sha256_file(p)}  {p.name}\n" for p in artifacts(dist)]
    (dist / SUMS).write_text("".join(lines))


def read_sums(dist: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (dist / SUMS).read_text().splitlines():
        digest, _, name = line.partition("  ")
        out[name] = digest
    return out


@dataclass(frozen=True)
class OciImage:
    """One image of an OCI archive: the name its index gives it and its manifest's digest (what a registry serves)."""

    archive: str
    ref: str
    digest: str


def _tar_json(tar: tarfile.TarFile, name: str) -> Any:
    member = tar.getmember(name)
    if member.size > MAX_MANIFEST_BYTES:
        raise ValueError(f"{name}: {member.size} bytes, more than a manifest can be")
    f = tar.extractfile(member)
    assert f is not None
    return json.loads(f.read())


def oci_images(archive: Path) -> list[OciImage]:
    with tarfile.open(archive) as tar:
        index = _tar_json(tar, "index.json")
    return [OciImage(archive.name, m.get("annotations", {}).get(REF_NAME, ""), m["digest"]) for m in index["manifests"]]


def verify_oci(archive: Path) -> list[str]:
    """Every blob the index reaches (manifests, configs, layers) is in the archive with the digest and size quoted."""
    problems: list[str] = []
    with tarfile.open(archive) as tar:
        blobs = {m.name: m for m in tar.getmembers() if m.isfile() and m.name.startswith("blobs/")}
        index = _tar_json(tar, "index.json")
        pending = list(index["manifests"])
        while pending:
            desc = pending.pop()
            algo, _, hexdigest = desc["digest"].partition(":")
            member = blobs.get(f"blobs/{algo}/{hexdigest}")
            if algo != "sha256" or member is None:
                problems.append(f"{archive.name}: no blob {desc['digest']}")
                continue
            f = tar.extractfile(member)
            assert f is not None
            actual = sha256_stream(f)
            if actual != hexdigest or member.size != desc["size"]:
                problems.append(f"{archive.name}: blob {desc['digest']} has sha256 {actual}, {member.size} B")
                continue
            if desc["mediaType"].endswith(("manifest.v1+json", "index.v1+json")):
                doc = _tar_json(tar, member.name)
                pending += doc.get("manifests", [])
                pending += [doc["config"], *doc.get("layers", [])] if "config" in doc else []
    return problems


def size(n: int) -> str:
    units = ("B", "KiB", "MiB", "GiB")
    value, i = float(n), 0
    while value >= 1024 and i < len(units) - 1:
        value, i = value / 1024, i + 1
    return f"{n} B" if i == 0 else f"{value:.1f} {units[i]}"


def plugin_config(name: str, digest: str, ver: str) -> str:
    return (
        "```yaml\n"
        "trafficRouterPlugins: |-\n"
        '  - name: "trafficsplit/trafficsplit"\n'
        f'    location: "{DOWNLOAD}/v{ver}/{name}"\n'
        f'    sha256: "{digest}"\n'
        "```\n"
    )


def notes(dist: Path, commit: str) -> str:
    ver = version()
    sums = read_sums(dist)
    files = artifacts(dist)
    out = [f"# trafficsplit {ver}\n\n", f"Built by `make release` (hack/release.sh) from commit {commit}.\n\n"]
    out.append("## Artifacts\n\n| File | Size | sha256 |\n| --- | ---: | --- |\n")
    out += [f"| {p.name} | {size(p.stat().st_size)} | {sums[p.name]} |\n" for p in files]
    out.append("\nCheck them all: `sha256sum -c SHA256SUMS` in the directory holding the files.\n\n")
    out.append("## Installing\n\n")
    wheel = next((p.name for p in files if p.suffix == ".whl"), None)
    if wheel:
        out.append(
            "**The CLI and the kubectl plugin** (`trafficsplit`, `kubectl trafficsplit`; Python 3.11+). Not on PyPI "
            f"yet: install the wheel.\n\n```sh\npip install ./{wheel}\nkubectl trafficsplit --version\n```\n\n"
        )
    chart = next((p.name for p in files if p.suffix == ".tgz"), None)
    if chart:
        out.append(
            f"**The chart.** `helm install ts ./{chart} -n trafficsplit-system --create-namespace`; it pulls "
            f"ghcr.io/trafficsplit/operator and extproc at tag {ver} (docs/helm.md).\n\n"
        )
    images = [img for p in files if p.name.endswith(OCI_SUFFIX) for img in oci_images(p)]
    if images:
        out.append(
            "**Images** (OCI archives, linux/amd64, built here by hack/build-images.sh; the tag's workflow pushes its "
            "own multi-arch builds of the same Dockerfiles to ghcr.io). Import one into a node's containerd with "
            "`ctr -n k8s.io images import --base-name REPOSITORY ARCHIVE`.\n\n"
            "| Image | Manifest digest | Archive |\n| --- | --- | --- |\n"
        )
        out += [f"| {img.ref} | {img.digest} | {img.archive} |\n" for img in images]
        out.append("\n")
    krew = next((p.name for p in files if p.name.startswith("kubectl-trafficsplit-")), None)
    if krew and (dist / KREW_MANIFEST).is_file():
        out.append(
            "**krew** (a launcher for the installed Python package, docs/cli.md): "
            f"`kubectl krew install --manifest={KREW_MANIFEST} --archive={krew}`.\n\n"
        )
    plugins = [p.name for p in files if p.name.startswith(PLUGIN_PREFIX)]
    if plugins:
        out.append(
            "**The Argo Rollouts traffic-router plugin** (docs/argo-rollouts.md): one line in `argo-rollouts-config`, "
            "for the controller's platform.\n\n"
        )
        for name in plugins:
            out.append(f"{name.removeprefix(PLUGIN_PREFIX)}:\n\n{plugin_config(name, sums[name], ver)}\n")
    return "".join(out)


def verify(dist: Path) -> list[str]:
    if not (dist / SUMS).is_file():
        return [f"{SUMS}: missing from {dist}"]
    problems: list[str] = []
    sums = read_sums(dist)
    names = {p.name for p in artifacts(dist)}
    problems += [f"{SUMS}: {n} is not listed" for n in sorted(names - set(sums))]
    for name, digest in sums.items():
        if name not in names:
            problems.append(f"{SUMS}: {name} does not exist")
        elif sha256_file(dist / name) != digest:
            problems.append(f"{SUMS}: {name} is not {digest}")
    if (dist / KREW_MANIFEST).is_file():
        manifest = yaml.safe_load((dist / KREW_MANIFEST).read_text())
        for platform in manifest["spec"]["platforms"]:
            target = dist / platform["uri"].rsplit("/", 1)[1]
            if not target.is_file() or sha256_file(target) != platform["sha256"]:
                problems.append(f"{KREW_MANIFEST}: sha256 {platform['sha256']} is not {target.name}'s")
    digests: dict[str, str] = {}
    for name in sorted(n for n in names if n.endswith(OCI_SUFFIX)):
        problems += verify_oci(dist / name)
        digests |= {img.ref: img.digest for img in oci_images(dist / name)}
    if (dist / NOTES).is_file():
        text = (dist / NOTES).read_text()
        for name, digest in re.findall(r"^\| (\S+) \| [^|]+ \| ([0-9a-f]{64}) \|$", text, flags=re.MULTILINE):
            if sums.get(name) != digest:
                problems.append(f"{NOTES}: {name} is quoted as {digest}")
        for ref, digest in re.findall(r"^\| (\S+) \| (sha256:[0-9a-f]{64}) \| \S+ \|$", text, flags=re.MULTILINE):
            if digests.get(ref) != digest:
                problems.append(f"{NOTES}: image {ref} is quoted as {digest}")
        for name, digest in re.findall(r'location: "\S+/([^/"]+)"\n\s+sha256: "([0-9a-f]{64})"', text):
            if sums.get(name) != digest:
                problems.append(f"{NOTES}: argo-rollouts-config's sha256 for {name} is {digest}")
    return problems


def main(argv: list[str]) -> int:
    if argv == ["version"]:
        print(version())
        return 0
    if len(argv) == 3 and argv[0] == "finish":
        dist = Path(argv[1])
        write_sums(dist)
        (dist / NOTES).write_text(notes(dist, argv[2]))
    elif len(argv) != 2 or argv[0] != "verify":
        print(__doc__, file=sys.stderr)
        return 2
    problems = verify(Path(argv[1]))
    for problem in problems:
        print(f"release: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
