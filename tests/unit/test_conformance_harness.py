"""The pure parts of the conformance harness (tests/support/conformance.py): reading the suite's -test.v output, the
one-file image archives, the binary's arguments, and that every test and feature name the harness names exists in
the pinned upstream suite (a typo would silently run nothing: -test.run matches no subtest). The last part runs when
the conformance module is in the Go module cache and is skipped, saying so, when it is not."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

import pytest

from tests.support import conformance
from tests.unit.test_gateway_api_crds import module_cache

SAMPLE = """\
=== RUN   TestConformance
=== RUN   TestConformance/HTTPRouteWeight
    weight.go:63: 2026-12-02T01:00:00Z: Request 1 of 500
--- PASS: TestConformance/HTTPRouteWeight (12.34s)
=== RUN   TestConformance/HTTPRouteMatching
    --- FAIL: TestConformance/HTTPRouteMatching/0_request_to_'/'_should_go_to_infra-backend-v1 (30.00s)
--- FAIL: TestConformance/HTTPRouteMatching (31.50s)
--- SKIP: TestConformance/HTTPRouteCORS (0.00s)
--- FAIL: TestConformance (400.00s)
"""


def test_results_are_read_per_top_level_test() -> None:
    assert conformance.parse_results(SAMPLE) == {
        "HTTPRouteWeight": ("PASS", 12.34),
        "HTTPRouteMatching": ("FAIL", 31.5),
        "HTTPRouteCORS": ("SKIP", 0.0),
    }


def test_image_archive_is_one_file_under_every_tag(tmp_path: Path) -> None:
    binary = tmp_path / "bin"
    binary.write_bytes(b"\x7fELF static")
    tags = ["registry.k8s.io/gateway-api/echo-basic:v1.5.1", "registry.k8s.io/gateway-api/echo-basic:v1.6.0-dev.3"]
    archive = conformance.image_archive(binary, "echo-basic", "65532:65532", tags, tmp_path / "img.tar")
    with tarfile.open(archive) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
        assert manifest[0]["RepoTags"] == tags
        config = json.load(tar.extractfile(manifest[0]["Config"]))  # type: ignore[arg-type]
        layer = tar.extractfile(manifest[0]["Layers"][0])
        assert layer is not None
        with tarfile.open(fileobj=layer) as inner:
            (member,) = inner.getmembers()
            assert (member.name, member.mode) == ("echo-basic", 0o755)
            assert inner.extractfile(member).read() == b"\x7fELF static"  # type: ignore[union-attr]
    assert config["config"]["Entrypoint"] == ["/echo-basic"]
    assert config["config"]["User"] == "65532:65532"


def test_argv_names_the_profile_features_and_only_the_chosen_tests(tmp_path: Path) -> None:
    argv = conformance.suite_argv(
        tmp_path / "bin", gateway_class="gc", report=tmp_path / "r.yaml", tests=["A", "B"], timeout_s=60
    )
    assert "-gateway-class=gc" in argv
    assert "-conformance-profiles=GATEWAY-HTTP" in argv
    assert f"-report-output={tmp_path / 'r.yaml'}" in argv
    assert "-test.run=^TestConformance$/^(A|B)$" in argv
    assert "-test.timeout=60s" in argv
    whole = conformance.suite_argv(tmp_path / "bin", gateway_class="gc", report=tmp_path / "r", tests=None, timeout_s=1)
    # The whole profile is TestConformance alone: the binary's other tests (the suite package's TestConformanceOptions_*
    # read data files beside its source) failed the whole run's exit code while every conformance test passed.
    assert [a for a in whole if a.startswith("-test.run")] == ["-test.run=^TestConformance$"]


def test_report_file_name_follows_the_upstream_pattern() -> None:
    assert re.fullmatch(r"experimental-\d+\.\d+\.\d+\S*-default-report\.yaml", conformance.report_name("experimental"))


def _upstream() -> Path:
    cache = module_cache()
    src = None if cache is None else cache / f"sigs.k8s.io/gateway-api/conformance@{conformance.SUITE_VERSION}"
    if src is None or not src.is_dir():
        pytest.skip(f"the conformance module {conformance.SUITE_VERSION} is not in the Go module cache")
    return src


def test_every_named_test_exists_upstream() -> None:
    src = _upstream()
    names = set()
    for f in (src / "tests").glob("*.go"):
        names.update(re.findall(r'ShortName:\s*"([^"]+)"', f.read_text()))
    named = set(conformance.QUICK_TESTS) | set(conformance.SKIP_TESTS)
    assert named - names == set()


def test_every_claimed_feature_exists_upstream() -> None:
    src = _upstream()
    features_dir = src.parent.parent / f"gateway-api@{conformance.SUITE_VERSION}" / "pkg" / "features"
    declared = set()
    for f in features_dir.glob("*.go"):
        # `SupportX FeatureName = "X"`, and the few declared untyped (`SupportGatewayBackendClientCertificate = …`)
        declared.update(re.findall(r'\bSupport\w+\s+(?:FeatureName\s+)?=\s+"([^"]+)"', f.read_text()))
    assert set(conformance.SUPPORTED_FEATURES) - declared == set()


def test_every_image_the_suite_names_is_provided() -> None:
    src = _upstream()
    named = set()
    for f in [src / "base" / "manifests.yaml", *(src / "tests").glob("*.yaml")]:
        named.update(re.findall(r"image:\s*(\S+)", f.read_text()))
    assert named - set(conformance.ECHO_BASIC_TAGS) - set(conformance.STAND_INS) == set()


def test_summary_of_a_run_whose_setup_failed(tmp_path: Path) -> None:
    # The suite writes `profiles: null` when its setup fails before any test: the summary must say so, not crash.
    log = tmp_path / "conformance.log"
    log.write_text(
        "    suite.go:389: Test Setup: Ensuring GatewayClass has been accepted\n"
        "        \tMessages:   \terror waiting for trafficsplit GatewayClass to have Accepted condition to be set:"
        " context deadline exceeded\n--- FAIL: TestConformance (180.50s)\n"
    )
    res = conformance.SuiteResult(
        tests={}, report={"kind": "ConformanceReport", "profiles": None}, exit_code=1, timed_out=False, log=log,
        seconds=181.0,
    )  # fmt: skip
    run = conformance.Run(gateway_class="trafficsplit", result=res)
    text = conformance.summary(run)
    assert "passed 0, failed 0, skipped 0" in text
    assert "error waiting for trafficsplit GatewayClass to have Accepted condition" in text
    assert conformance.failed(run)
