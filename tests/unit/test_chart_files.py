"""The chart's static files: the CRD copy matches its one source, every value is documented and typed.

Rendering and installing the chart needs the helm binary: tests/integration/test_chart.py does that.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from trafficsplit.wire.command import EnvoyCommand, envoy_args

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts/trafficsplit"
CRD_SOURCE = ROOT / "crds/trafficsplit.dev_trafficsplits.yaml"
CRD_COPY = CHART / "crds/trafficsplit.dev_trafficsplits.yaml"
_KEY = re.compile(r"^(\s*)([A-Za-z][A-Za-z0-9]*):")


def test_chart_crd_is_a_byte_for_byte_copy_of_crds() -> None:
    assert CRD_SOURCE.exists(), "crds/trafficsplit.dev_trafficsplits.yaml is missing"
    assert CRD_COPY.read_bytes() == CRD_SOURCE.read_bytes(), "the chart's CRD is stale: run hack/sync-crd.sh"


def test_sync_script_check_mode_agrees() -> None:
    proc = subprocess.run(["bash", str(ROOT / "hack/sync-crd.sh"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def undocumented_keys(text: str) -> list[str]:
    """Keys in a values file whose line is not directly preceded by a comment line (list items are exempt: they
    belong to the key above them)."""
    missing: list[str] = []
    previous = ""
    for number, line in enumerate(text.splitlines(), 1):
        m = _KEY.match(line)
        if m and not previous.lstrip().startswith("#"):
            missing.append(f"line {number}: {m.group(2)}")
        if line.strip():
            previous = line
    return missing


def test_undocumented_keys_are_found() -> None:
    assert undocumented_keys("# a\na: 1\nb:\n  # c\n  c: 2\n  d: 3\n") == ["line 3: b", "line 6: d"]


def test_every_value_has_a_comment_above_it() -> None:
    assert undocumented_keys((CHART / "values.yaml").read_text()) == []


def leaf_paths(values: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from leaf_paths(value, path + ".")
        else:
            yield path


def schema_at(schema: Mapping[str, Any], path: str) -> Mapping[str, Any] | None:
    """The schema of a dotted values path. An object schema without `properties` is a deliberate pass-through of a
    Kubernetes type (a securityContext, affinity), validated by the API server: it covers everything below it."""
    node: Mapping[str, Any] | None = schema
    for part in path.split("."):
        if node is None:
            return None
        if node.get("type") == "object" and "properties" not in node:
            return node
        node = node.get("properties", {}).get(part)
    return node


def test_schema_is_draft_07_and_covers_every_value() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    untyped = [p for p in leaf_paths(values) if schema_at(schema, p) is None]
    assert untyped == [], f"values without a schema entry: {untyped}"


def closed_objects(schema: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, bool]]:
    """(path, closed) for every object schema with declared properties."""
    if schema.get("type") == "object" and "properties" in schema:
        yield path or "<root>", schema.get("additionalProperties") is False
        for key, sub in schema["properties"].items():
            yield from closed_objects(sub, f"{path}.{key}" if path else key)


def test_schema_objects_with_declared_properties_reject_unknown_keys() -> None:
    # A typo (gateway.replica) must fail the install, not be ignored silently.
    schema = json.loads((CHART / "values.schema.json").read_text())
    open_ = [p for p, closed in closed_objects(schema) if not closed]
    assert open_ == []


def test_defaults_validate_against_the_schema_and_a_bad_value_does_not() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    jsonschema.validate(values, schema)
    values["gateway"]["replicas"] = "two"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(values, schema)


@pytest.mark.parametrize(
    ("transport", "name"), [("grpc", "envoy-bootstrap.json"), ("http", "envoy-bootstrap-http.json")]
)
def test_chart_bootstrap_is_what_the_extproc_prints(tmp_path: Path, transport: str, name: str) -> None:
    # One place configures Envoy and the extproc together (trafficsplit.wire.bootstrap); the chart ships its output,
    # once per ext_proc transport (gateway.extproc.transport picks the file).
    fresh = tmp_path / name
    subprocess.run(["bash", str(ROOT / "hack/gen-chart-bootstrap.sh"), str(fresh), transport], check=True)
    committed = CHART / "files" / name
    assert committed.read_text() == fresh.read_text(), f"stale: run hack/gen-chart-bootstrap.sh '' {transport}"


def test_chart_transport_default_is_grpc_and_its_choices_the_extprocs() -> None:
    from trafficsplit.wire.bootstrap import BootstrapOptions, ExtProcTransport

    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert values["gateway"]["extproc"]["transport"] == BootstrapOptions.extproc_transport.value == "grpc"
    enum = schema["properties"]["gateway"]["properties"]["extproc"]["properties"]["transport"]["enum"]
    assert enum == [t.value for t in ExtProcTransport]


def test_examples_are_valid_splits() -> None:
    from trafficsplit.core.control.spec import parse_split

    for path in (ROOT / "examples/shop.yaml", ROOT / "examples/kubernetes/shop-split.yaml"):
        doc = yaml.safe_load(path.read_text())
        assert (doc["apiVersion"], doc["kind"]) == ("trafficsplit.dev/v1alpha1", "TrafficSplit"), path
        split = parse_split(doc["metadata"]["namespace"], doc["metadata"]["name"], doc["spec"])
        # Blue/green/canary with a total of 100: ramps and flips keep it (docs/operations.md).
        assert [b.name for b in split.backends] == ["blue", "green", "canary"], path
        assert sum(b.weight for b in split.backends) == 100, path
        assert split.cookie is not None and split.cookie.name == "shop-affinity", path
    local = yaml.safe_load((ROOT / "examples/shop.yaml").read_text())
    ports = [ep for b in local["spec"]["backends"] for ep in b["endpoints"]]
    assert ports == ["127.0.0.1:18081", "127.0.0.1:18082", "127.0.0.1:18083"]


def test_chart_timeout_default_is_the_bootstraps_own() -> None:
    # The default install must render exactly the committed bootstrap: no value silently overrides its default.
    from trafficsplit.wire.bootstrap import DEFAULT_MESSAGE_TIMEOUT_MS

    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["gateway"]["envoy"]["messageTimeoutMs"] == DEFAULT_MESSAGE_TIMEOUT_MS


def chart_envoy_args() -> list[str]:
    """The gateway Envoy container's args, as the template writes them (Helm expressions left as text)."""
    text = (CHART / "templates/gateway-deployment.yaml").read_text(encoding="utf-8")
    container = text[text.index("- name: envoy") :]
    block = container[container.index("args:") :].splitlines()[1:]
    args: list[str] = []
    for line in block:
        item = line.strip()
        if item.startswith("#"):
            continue
        if not item.startswith("- "):
            break
        args.append(item[2:])
    return args


def test_the_chart_runs_envoy_with_the_one_command_line_builder() -> None:
    """The chart cannot import Python, so its Envoy args are checked against trafficsplit.wire.command, the builder
    the demo and the tests run Envoy with: a flag changed in one place shows here."""
    chart = EnvoyCommand(
        config_path="/etc/trafficsplit/envoy/envoy.json",
        service_node="$(POD_NAME)",
        concurrency="{{ $g.envoy.concurrency | quote }}",
        log_level="{{ $g.envoy.logLevel }}",
        hot_restart=False,
    )
    assert chart_envoy_args() == envoy_args(chart)


def test_chart_edge_defaults_are_the_bootstraps_own() -> None:
    from trafficsplit.wire.bootstrap import DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_HEAP_BYTES, BootstrapOptions

    envoy = yaml.safe_load((CHART / "values.yaml").read_text())["gateway"]["envoy"]
    assert envoy["xffNumTrustedHops"] == BootstrapOptions.xff_num_trusted_hops == 0
    assert envoy["overload"] == {"maxHeapSizeBytes": DEFAULT_MAX_HEAP_BYTES, "maxConnections": DEFAULT_MAX_CONNECTIONS}


def test_chart_backend_cluster_stats_default_and_pattern_are_the_bootstraps_own() -> None:
    # On by default, as the builder; off, the template writes the builder's own pattern (rendering it against the
    # builder's output is tests/integration/test_chart.py's).
    from trafficsplit.wire.bootstrap import BACKEND_CLUSTER_STATS_REGEX, BootstrapOptions

    envoy = yaml.safe_load((CHART / "values.yaml").read_text())["gateway"]["envoy"]
    assert envoy["backendClusterStats"] is BootstrapOptions.backend_cluster_stats is True
    template = (CHART / "templates/gateway-bootstrap-configmap.yaml").read_text()
    assert f'"regex" `{BACKEND_CLUSTER_STATS_REGEX}`' in template


def test_schema_accepts_the_global_values_of_a_parent_chart() -> None:
    # As a subchart (an umbrella chart, Argo CD, Flux), Helm hands the chart its parent's `global` values and validates
    # them against this schema: a root that refuses `global` makes the chart unusable there (helm/helm#10392).
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    jsonschema.validate(
        {**values, "global": {"imageRegistry": "registry.example.com", "anything": [1, {"x": 2}]}}, schema
    )
    # The root still refuses a typo.
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**values, "gatway": {}}, schema)


def test_every_value_has_a_description_in_the_chart_readme() -> None:
    # helm-docs writes the chart README's values table from the `# --` comments; a leaf without one gets an empty
    # description, and a ` --` later in the comment is read as helm-docs' old `# key -- text` form and misplaced.
    readme = (CHART / "README.md").read_text()
    rows = [line for line in readme.splitlines() if line.startswith("| ") and line.count("|") >= 5]
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    documented = {row.split("|")[1].strip(): row.rsplit("|", 2)[1].strip() for row in rows}
    missing = [p for p in leaf_paths(values) if not documented.get(p)]
    assert missing == [], "no description in charts/trafficsplit/README.md (a `# --` comment in values.yaml)"
