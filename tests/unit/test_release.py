"""hack/release.py, the release's bookkeeping: one version everywhere, and a check that fails on each checksum that
does not hold (a changed artifact, an unlisted one, the krew manifest's sha256, an OCI blob, a digest the notes quote).
The release itself runs in tests/integration/test_release.py and tests/e2e/test_13_release.py."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest
import yaml

from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
release = load_script(ROOT / "hack" / "release.py", "release")
krew = load_script(ROOT / "plugins" / "krew" / "build.py", "krew_build")


def test_every_place_states_the_same_version() -> None:
    found = release.versions()
    assert len(found) == 4 and len(set(found.values())) == 1, found
    assert release.version() == found["Chart.yaml appVersion"]


def test_the_krew_manifest_points_at_the_asset_the_github_release_holds() -> None:
    manifest = yaml.safe_load(krew.MANIFEST.read_text())
    uris = [p["uri"] for p in manifest["spec"]["platforms"]]
    assert uris == [f"{release.DOWNLOAD}/v{release.version()}/{krew.archive_name()}"]


def test_a_version_that_disagrees_is_refused(tmp_path: Path) -> None:
    for path in ("pyproject.toml", "charts/trafficsplit/Chart.yaml", "plugins/krew/trafficsplit.yaml"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / path, tmp_path / path)
    chart = tmp_path / "charts/trafficsplit/Chart.yaml"
    chart.write_text(chart.read_text().replace('appVersion: "', 'appVersion: "9'))
    assert len(set(release.versions(tmp_path).values())) == 2


def _blob(files: dict[str, bytes], doc: dict[str, object] | bytes, media: str) -> dict[str, object]:
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    digest = hashlib.sha256(data).hexdigest()
    files[f"blobs/sha256/{digest}"] = data
    return {"mediaType": media, "digest": f"sha256:{digest}", "size": len(data)}


def _oci_archive(path: Path, ref: str, layer: bytes = b"layer") -> None:
    files: dict[str, bytes] = {}
    config = _blob(files, {"architecture": "amd64", "os": "linux"}, "application/vnd.oci.image.config.v1+json")
    layers = [_blob(files, layer, "application/vnd.oci.image.layer.v1.tar+gzip")]
    manifest = {"schemaVersion": 2, "config": config, "layers": layers}
    desc = _blob(files, manifest, "application/vnd.oci.image.manifest.v1+json")
    desc["annotations"] = {release.REF_NAME: ref}
    files["index.json"] = json.dumps({"schemaVersion": 2, "manifests": [desc]}).encode()
    with tarfile.open(path, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


@pytest.fixture
def dist(tmp_path: Path) -> Path:
    d = tmp_path / "dist"
    d.mkdir()
    version = release.version()
    (d / krew.archive_name()).write_bytes(krew.archive())
    shutil.copy(krew.MANIFEST, d / release.KREW_MANIFEST)
    (d / f"{release.PLUGIN_PREFIX}linux-arm64").write_bytes(b"\x7fELF plugin")
    (d / f"trafficsplit-{version}-py3-none-any.whl").write_bytes(b"wheel")
    _oci_archive(d / f"trafficsplit-operator-{version}{release.OCI_SUFFIX}", f"ghcr.io/trafficsplit/operator:{version}")
    release.write_sums(d)
    (d / release.NOTES).write_text(release.notes(d, "0123abc"))
    return d


def test_a_release_as_built_verifies_and_its_notes_quote_every_digest(dist: Path) -> None:
    assert release.verify(dist) == []
    notes = (dist / release.NOTES).read_text()
    assert notes == release.notes(dist, "0123abc")  # no clock in it: a rebuild writes the same notes
    for name, digest in release.read_sums(dist).items():
        assert f"| {name} | " in notes and digest in notes
    [image] = release.oci_images(next(dist.glob("*.oci.tar")))
    assert f"| {image.ref} | {image.digest} |" in notes
    assert f'sha256: "{release.read_sums(dist)[f"{release.PLUGIN_PREFIX}linux-arm64"]}"' in notes


def test_a_changed_or_unlisted_artifact_fails(dist: Path) -> None:
    wheel = next(dist.glob("*.whl"))
    wheel.write_bytes(b"another wheel")
    (dist / "stray.txt").write_text("x")
    problems = release.verify(dist)
    assert any(wheel.name in p and "is not" in p for p in problems), problems
    assert any("stray.txt is not listed" in p for p in problems), problems


def test_a_krew_manifest_that_quotes_another_sha256_fails(dist: Path) -> None:
    manifest = dist / release.KREW_MANIFEST
    good = hashlib.sha256(krew.archive()).hexdigest()
    manifest.write_text(manifest.read_text().replace(good, "0" * 64))
    release.write_sums(dist)  # SHA256SUMS itself is right: only the manifest is wrong
    assert [p for p in release.verify(dist) if release.KREW_MANIFEST in p] != []


def test_an_oci_blob_that_is_not_its_digest_fails(dist: Path) -> None:
    archive = next(dist.glob("*.oci.tar"))
    with tarfile.open(archive) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    layer = next(n for n, data in members.items() if data == b"layer")
    members[layer] = b"LAYER"  # same size, other bytes
    with tarfile.open(archive, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    release.write_sums(dist)
    (dist / release.NOTES).write_text(release.notes(dist, "0123abc"))
    problems = release.verify(dist)
    assert len(problems) == 1 and layer.removeprefix("blobs/sha256/") in problems[0], problems


def test_notes_that_quote_a_stale_digest_fail(dist: Path) -> None:
    notes = dist / release.NOTES
    plugin = release.read_sums(dist)[f"{release.PLUGIN_PREFIX}linux-arm64"]
    notes.write_text(notes.read_text().replace(f'sha256: "{plugin}"', f'sha256: "{"1" * 64}"'))
    assert any("argo-rollouts-config" in p for p in release.verify(dist))
    [image] = release.oci_images(next(dist.glob("*.oci.tar")))
    notes.write_text(notes.read_text().replace(image.digest, "sha256:" + "2" * 64))
    assert any(image.ref in p for p in release.verify(dist))
