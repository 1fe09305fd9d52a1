"""The per-Gateway data plane renderer (operator/provision.py): the objects, their names, labels and namespace, the
listener ports, the parameters laid over the chart's values, and the bootstrap the pod prints from its flags (the
extproc's `--print-bootstrap`, run here on the init container's arguments). The chart comparison (the same
containers as the chart's gateway Deployment, rendered by the real helm) is in tests/integration/test_chart.py."""

from __future__ import annotations

import base64
import copy
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.provision import (
    OPERATOR_LABELS,
    bootstrap_container,
    gateway,
    params,
    printed_bootstrap,
    settings,
    settings_doc,
)
from trafficsplit.core.gatewayapi.objects import parse_gateway
from trafficsplit.core.gatewayapi.parameters import DEFAULT_PARAMETERS
from trafficsplit.core.model.persistent import CookieSigner
from trafficsplit.operator.dataplane_names import (
    GATEWAY_NAME_ANNOTATION,
    GATEWAY_NAMESPACE_ANNOTATION,
    dataplane_name,
    publish_service_name,
    selector_labels,
)
from trafficsplit.operator.provision import (
    COOKIE_KEYS_DIR,
    COOKIE_KEYS_SINCE_ANNOTATION,
    COOKIE_KEYS_TYPE,
    KEY_ROTATION_SECONDS,
    KEY_STAGING_SECONDS,
    CookieKeys,
    GatewayAddress,
    ProvisionError,
    Rendered,
    cluster_ips,
    cookie_keys_secret_name,
    cookie_keys_step,
    parse_cookie_keys,
    render,
    service_addresses,
)


def one(r: Rendered, kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in r.of_kind(kind) if name is None or o["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name, [o["metadata"]["name"] for o in r.of_kind(kind)])
    return found[0]


def pod(r: Rendered) -> dict[str, Any]:
    return one(r, "Deployment")["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def container(r: Rendered, name: str) -> dict[str, Any]:
    return next(c for c in pod(r)["containers"] if c["name"] == name)


def test_every_object_is_in_the_operators_namespace_named_and_labelled_by_dataplane_names() -> None:
    r = render(gateway(80), DEFAULT_PARAMETERS, settings())
    base = dataplane_name("shop", "web")
    assert r.name == base
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in r.objects)
    assert kinds == sorted([
        ("Deployment", base), ("Service", base),
        ("Service", publish_service_name("shop", "web")), ("PodDisruptionBudget", base), ("NetworkPolicy", base),
    ])  # fmt: skip
    for o in r.objects:
        m = o["metadata"]
        assert m["namespace"] == "ts-system"
        assert selector_labels("shop", "web").items() <= m["labels"].items()
        assert m["annotations"][GATEWAY_NAMESPACE_ANNOTATION] == "shop"
        assert m["annotations"][GATEWAY_NAME_ANNOTATION] == "web"
    d = one(r, "Deployment")
    assert d["spec"]["selector"]["matchLabels"] == selector_labels("shop", "web")
    assert selector_labels("shop", "web").items() <= d["spec"]["template"]["metadata"]["labels"].items()
    for kind in ("Service", "PodDisruptionBudget", "NetworkPolicy"):
        for o in r.of_kind(kind):
            sel = o["spec"].get("selector") or o["spec"].get("podSelector")
            assert sel in (selector_labels("shop", "web"), {"matchLabels": selector_labels("shop", "web")}), kind


def test_two_gateways_share_no_object_name_or_selector() -> None:
    a = render(gateway(80, name="web"), DEFAULT_PARAMETERS, settings())
    b = render(gateway(80, name="web", namespace="other"), DEFAULT_PARAMETERS, settings())
    assert not {o["metadata"]["name"] for o in a.objects} & {o["metadata"]["name"] for o in b.objects}
    assert one(a, "Deployment")["spec"]["selector"] != one(b, "Deployment")["spec"]["selector"]
    # Each one's replicas refuse the other's generations (the extproc's --gateway), and those of a Gateway created
    # again under its name (--gateway-uid).
    ga, gb = gateway(80, name="web"), gateway(80, name="web", namespace="other")
    assert ga.meta.uid != gb.meta.uid
    assert {"--gateway=shop/web", f"--gateway-uid={ga.meta.uid}"} <= set(container(a, "extproc")["args"])
    assert {"--gateway=other/web", f"--gateway-uid={gb.meta.uid}"} <= set(container(b, "extproc")["args"])


def test_service_ports_are_the_listener_ports_served_on_unprivileged_ports_in_the_pod(tmp_path: Path) -> None:
    gw = parse_gateway({"metadata": {"name": "web", "namespace": "shop"}, "spec": {"gatewayClassName": "ts",
        "listeners": [{"name": "a", "port": 80, "protocol": "HTTP", "hostname": "a.example"},
                      {"name": "b", "port": 80, "protocol": "HTTP", "hostname": "b.example"},
                      {"name": "c", "port": 8443, "protocol": "HTTP"}]}})  # fmt: skip
    r = render(gw, DEFAULT_PARAMETERS, settings())
    svc = one(r, "Service", r.name)
    assert [(p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [(80, "http-80"), (8443, "http-8443")]
    envoy = container(r, "envoy")
    assert [(p["name"], p["containerPort"]) for p in envoy["ports"]] == [("http-80", 10080), ("http-8443", 8443)]
    assert envoy["readinessProbe"]["tcpSocket"]["port"] == "http-80"
    boot = printed_bootstrap(r, tmp_path / "envoy.json")
    bound = [lis["address"]["socket_address"]["port_value"] for lis in boot["static_resources"]["listeners"]]
    assert bound == [10080, 8443]
    np = one(r, "NetworkPolicy")["spec"]["ingress"]
    assert np[0] == {"ports": [{"port": "http-80", "protocol": "TCP"}, {"port": "http-8443", "protocol": "TCP"}]}


@pytest.mark.parametrize(
    ("ports", "expect"),
    [
        ((9002,), "listener port 9002 would be served on 9002, the publish port"),
        ((9001,), "the extproc's ext_proc and ADS port"),
        ((9901,), "Envoy's admin port"),
        ((9004,), "health port"),
        ((80, 10080), "listener ports 80 and 10080 would both be served on 10080"),
    ],
)
def test_a_listener_port_that_collides_in_the_pod_is_refused(ports: tuple[int, ...], expect: str) -> None:
    with pytest.raises(ProvisionError, match=expect):
        render(gateway(*ports), DEFAULT_PARAMETERS, settings())


def test_without_parameters_the_chart_values_apply() -> None:
    r = render(gateway(80), DEFAULT_PARAMETERS, settings())
    d = settings_doc()["gateway"]
    assert one(r, "Deployment")["spec"]["replicas"] == d["replicas"]
    svc = one(r, "Service", r.name)["spec"]
    assert svc["type"] == "ClusterIP" and "externalTrafficPolicy" not in svc
    assert container(r, "envoy")["resources"] == d["envoy"]["resources"]
    assert container(r, "extproc")["resources"] == d["extproc"]["resources"]


def test_parameters_override_the_chart_values_field_by_field() -> None:
    p = params({
        "replicas": 4,
        "service": {"type": "LoadBalancer", "annotations": {"lb.example.com/internal": "true"},
                    "externalTrafficPolicy": "Local"},
        "envoy": {"concurrency": 8, "logLevel": "debug", "preStopSleepSeconds": 0,
                  "resources": {"limits": {"memory": "1Gi"}}},
        "extproc": {"resources": {"requests": {"cpu": "2"}}},
    })  # fmt: skip
    r = render(gateway(80), p, settings())
    assert one(r, "Deployment")["spec"]["replicas"] == 4
    svc = one(r, "Service", r.name)
    assert svc["spec"]["type"] == "LoadBalancer" and svc["spec"]["externalTrafficPolicy"] == "Local"
    assert svc["metadata"]["annotations"]["lb.example.com/internal"] == "true"
    envoy = container(r, "envoy")
    assert envoy["args"][envoy["args"].index("--concurrency") + 1] == "8"
    assert envoy["args"][envoy["args"].index("--log-level") + 1] == "debug"
    assert "lifecycle" not in envoy  # preStopSleepSeconds 0: no pause, as in the chart
    chart = settings_doc()["gateway"]
    assert envoy["resources"] == {**chart["envoy"]["resources"], "limits": {"cpu": "1", "memory": "1Gi"}}
    assert container(r, "extproc")["resources"]["requests"] == {"cpu": "2", "memory": "128Mi"}


def test_a_service_annotation_cannot_overwrite_the_gateways_identity() -> None:
    p = params({"service": {"annotations": {GATEWAY_NAME_ANNOTATION: "someone-else"}}})
    svc = one(render(gateway(80), p, settings()), "Service", dataplane_name("shop", "web"))
    assert svc["metadata"]["annotations"][GATEWAY_NAME_ANNOTATION] == "web"


def test_the_bootstrap_has_the_charts_values_under_the_parameters(tmp_path: Path) -> None:
    s = settings()
    default = printed_bootstrap(render(gateway(80), DEFAULT_PARAMETERS, s), tmp_path / "default.json")
    ext_proc = next(
        f for f in default["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"][
            "http_filters"] if f["name"] == "envoy.filters.http.ext_proc"
    )  # fmt: skip
    assert ext_proc["typed_config"]["message_timeout"] == "0.200s"
    p = params({"envoy": {"messageTimeoutMs": 1500, "xffNumTrustedHops": 2, "backendClusterStats": False,
                          "overload": {"maxHeapSizeBytes": 2**28, "maxConnections": 77}}})  # fmt: skip
    b = printed_bootstrap(render(gateway(80), p, s), tmp_path / "params.json")
    hcm = b["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    assert hcm["xff_num_trusted_hops"] == 2 and "early_header_mutation_extensions" not in hcm
    assert (
        "early_header_mutation_extensions"
        in (default["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"])
    )
    f = next(f for f in hcm["http_filters"] if f["name"] == "envoy.filters.http.ext_proc")
    assert f["typed_config"]["message_timeout"] == "1.500s"
    monitors = {m["name"]: m["typed_config"] for m in b["overload_manager"]["resource_monitors"]}
    assert monitors["envoy.resource_monitors.fixed_heap"]["max_heap_size_bytes"] == str(2**28)
    assert (
        monitors["envoy.resource_monitors.global_downstream_max_connections"]["max_active_downstream_connections"]
        == "77"
    )
    assert "stats_config" in b and "stats_config" not in default
    assert s == settings()  # the installation's settings were not edited in place


@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_the_pods_bootstrap_is_the_generators_for_the_gateways_options(transport: str, tmp_path: Path) -> None:
    """What the init container's `--print-bootstrap --listener PORT=0.0.0.0:INNER ...` writes is the generator's
    bootstrap for a Gateway data plane (its listeners each name their port to the processor) with the chart's
    values under the parameters, the processor's addresses and the admin on loopback."""
    from trafficsplit.wire.bootstrap import (
        Address,
        BootstrapOptions,
        ExtProcTransport,
        GatewayListener,
        bootstrap_json,
    )

    s = settings(settings_doc(extproc__transport=transport))
    p = params({"envoy": {"messageTimeoutMs": 250, "xffNumTrustedHops": 1, "backendClusterStats": False,
                          "overload": {"maxHeapSizeBytes": 100 * 2**20, "maxConnections": 10}}})  # fmt: skip
    got = printed_bootstrap(render(gateway(80, 8443), p, s), tmp_path / "envoy.json")
    expected = json.loads(bootstrap_json(BootstrapOptions(
        node_id="gateway", listen=Address("0.0.0.0", 8080),
        extproc=Address("127.0.0.1", 9005 if transport == "http" else 9001), ads=Address("127.0.0.1", 9001),
        admin=Address("127.0.0.1", 9901), message_timeout_ms=250, xff_num_trusted_hops=1,
        max_heap_bytes=100 * 2**20, max_connections=10, extproc_transport=ExtProcTransport(transport),
        backend_cluster_stats=False,
        listeners=(GatewayListener(80, Address("0.0.0.0", 10080)), GatewayListener(8443, Address("0.0.0.0", 8443))),
    )))  # fmt: skip
    assert got == expected


def test_https_listeners_render_the_extprocs_https_listener_flags(tmp_path: Path) -> None:
    """An HTTPS port's Envoy listener is what `--listener 443=0.0.0.0:10443:https:NAME,...` generates: one chain per
    HTTPS listener hostname (SNI), each with its certificate over SDS; a plain port stays as it was."""
    from trafficsplit.wire.bootstrap import Address, BootstrapOptions, GatewayListener, bootstrap_json

    tls = {"certificateRefs": [{"name": "cert"}]}
    gw = parse_gateway(
        {
            "metadata": {"name": "gw", "namespace": "ns"},
            "spec": {
                "gatewayClassName": "trafficsplit",
                "listeners": [
                    {"name": "a", "port": 443, "protocol": "HTTPS", "hostname": "a.example.com", "tls": tls},
                    {"name": "any", "port": 443, "protocol": "HTTPS", "tls": tls},
                    {"name": "http", "port": 80, "protocol": "HTTP"},
                ],
            },
        }
    )
    s = settings()
    r = render(gw, DEFAULT_PARAMETERS, s)
    got = printed_bootstrap(r, tmp_path / "envoy.json")
    listeners = (
        GatewayListener(80, Address("0.0.0.0", 10080)),
        GatewayListener(443, Address("0.0.0.0", 10443), ("a.example.com", "*")),
    )
    expected = json.loads(bootstrap_json(BootstrapOptions(
        node_id="gateway", listen=Address("0.0.0.0", 8080), extproc=Address("127.0.0.1", 9001),
        ads=Address("127.0.0.1", 9001), admin=Address("127.0.0.1", 9901), listeners=listeners,
    )))  # fmt: skip
    assert got["static_resources"]["listeners"] == expected["static_resources"]["listeners"]
    flags = [a for a in bootstrap_container(r)["args"] if a.startswith("--listener=")]
    assert flags == ["--listener=80=0.0.0.0:10080", "--listener=443=0.0.0.0:10443:https:a.example.com,*"]
    assert GatewayListener.parse("443=0.0.0.0:10443:https:a.example.com,*") == listeners[1]
    assert GatewayListener.parse("443=0.0.0.0:10443:https").tls_hosts == ("*",)
    with pytest.raises(ValueError, match="not a host name"):
        GatewayListener.parse("443=0.0.0.0:10443:https:a b")


def test_a_changed_listener_port_rolls_the_pods() -> None:
    # The bootstrap's flags are in the pod template: a changed bootstrap is a changed template, which rolls the pods.
    def template(*ports: int, p: Any = DEFAULT_PARAMETERS) -> dict[str, Any]:
        return one(render(gateway(*ports), p, settings()), "Deployment")["spec"]["template"]  # type: ignore[no-any-return]

    assert template(80) == template(80)
    assert template(80)["spec"]["initContainers"] != template(80, 8080)["spec"]["initContainers"]
    assert template(80) != template(80, p=params({"envoy": {"messageTimeoutMs": 999}}))


def test_the_pod_makes_its_bootstrap_with_the_extprocs_image_into_the_file_envoy_reads() -> None:
    r = render(gateway(80), DEFAULT_PARAMETERS, settings())
    init, ext, envoy = bootstrap_container(r), container(r, "extproc"), container(r, "envoy")
    assert (init["image"], init["imagePullPolicy"]) == (ext["image"], ext["imagePullPolicy"])
    assert init["securityContext"] == ext["securityContext"] and init["resources"] == ext["resources"]
    assert {"name": "bootstrap", "emptyDir": {"sizeLimit": "4Mi"}} in pod(r)["volumes"]
    [written] = [m for m in init["volumeMounts"] if m["name"] == "bootstrap"]
    [read] = [m for m in envoy["volumeMounts"] if m["name"] == "bootstrap"]
    assert read == {**written, "readOnly": True}
    config = envoy["args"][envoy["args"].index("--config-path") + 1]
    assert init["args"][:2] == ["--print-bootstrap", f"--bootstrap-out={config}"]
    assert config.startswith(written["mountPath"] + "/")
    # The processor's addresses are one set of flags: the bootstrap's clusters point where the extproc listens.
    assert [a for a in ext["args"] if a.startswith("--listen=")] == [
        a for a in init["args"] if a.startswith("--listen=")
    ]


def test_the_publish_port_is_headless_and_open_only_to_the_operator() -> None:
    r = render(gateway(80), DEFAULT_PARAMETERS, settings())
    publish = one(r, "Service", publish_service_name("shop", "web"))["spec"]
    assert publish["clusterIP"] == "None" and publish["publishNotReadyAddresses"] is True
    assert [p["name"] for p in publish["ports"]] == ["publish"]
    rules = one(r, "NetworkPolicy")["spec"]["ingress"]
    [publish_rule] = [x for x in rules if x["ports"] == [{"port": "publish", "protocol": "TCP"}]]
    assert publish_rule["from"] == [{"podSelector": {"matchLabels": OPERATOR_LABELS}}]
    assert not [x for x in rules if x["ports"] == [{"port": "metrics", "protocol": "TCP"}]]  # metricsFrom empty


def test_the_chart_switches_reach_the_data_plane() -> None:
    doc = settings_doc(podDisruptionBudget__enabled=False, networkPolicy__enabled=False)
    doc["tlsSecret"] = ""
    r = render(gateway(80), DEFAULT_PARAMETERS, settings(doc))
    assert not r.of_kind("PodDisruptionBudget") and not r.of_kind("NetworkPolicy")
    ext = container(r, "extproc")
    assert "--insecure-publish" in ext["args"] and not [a for a in ext["args"] if a.startswith("--tls-")]
    assert "publish-tls" not in {v["name"] for v in pod(r)["volumes"]}
    pdb = one(render(gateway(80), DEFAULT_PARAMETERS, settings()), "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1  # never blocks a drain, whatever the class's replica count


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        (lambda d: d.pop("namespace"), "namespace is missing"),
        (lambda d: d.update(publishPort="9002"), "publishPort is missing or not a int"),
        (lambda d: d["gateway"].pop("envoy"), "gateway.envoy is missing"),
        (lambda d: d["securityContext"].update(appUser=True), "securityContext.appUser"),
    ],
)
def test_bad_settings_stop_the_operator_naming_the_field(change: Any, expect: str) -> None:
    doc = settings_doc()
    change(doc)
    with pytest.raises(ValueError, match=expect):
        settings(doc)


@pytest.mark.parametrize(
    ("service_type", "field", "value"),
    [("ClusterIP", "clusterIP", "10.96.0.250"), ("LoadBalancer", "externalIPs", ["10.96.0.250"]),
     ("NodePort", "externalIPs", ["10.96.0.250"])],
)  # fmt: skip
def test_a_static_address_is_the_services_cluster_ip_or_beside_a_load_balancer_an_external_ip(
    service_type: str, field: str, value: Any
) -> None:
    listeners = [{"name": "a", "port": 80, "protocol": "HTTP"}]
    spec = {"gatewayClassName": "ts", "addresses": [{"value": "10.96.0.250"}], "listeners": listeners}
    body = {"metadata": {"name": "web", "namespace": "shop", "uid": "u"}, "spec": spec}
    gw = parse_gateway(body)
    r = render(gw, params({"service": {"type": service_type}}), settings())
    svc = one(r, "Service", r.name)
    assert svc["spec"][field] == value
    (other,) = {"clusterIP", "externalIPs"} - {field}
    assert other not in svc["spec"]
    # Without one, the Service picks its own: neither field is written.
    r = render(gateway(80), params({"service": {"type": service_type}}), settings())
    plain = one(r, "Service", r.name)
    assert not {"clusterIP", "externalIPs"} & set(plain["spec"])


def test_a_service_holds_the_first_static_address_of_each_family_as_its_cluster_ip() -> None:
    assert cluster_ips(("10.0.0.9",)) == (("10.0.0.9",), ())
    assert cluster_ips(("192.0.2.1", "fd00::7", "10.0.0.9")) == (("192.0.2.1", "fd00::7"), ("10.0.0.9",))
    listeners = [{"name": "a", "port": 80, "protocol": "HTTP"}]
    spec = {
        "gatewayClassName": "ts",
        "addresses": [{"value": "fd00::7"}, {"value": "10.0.0.9"}],
        "listeners": listeners,
    }
    r = render(parse_gateway({"metadata": {"name": "web", "namespace": "shop", "uid": "u"}, "spec": spec}),
               DEFAULT_PARAMETERS, settings())  # fmt: skip
    svc = one(r, "Service", r.name)["spec"]
    assert (svc["clusterIP"], svc["clusterIPs"], svc["ipFamilyPolicy"]) == ("fd00::7", ["fd00::7", "10.0.0.9"],
                                                                            "RequireDualStack")  # fmt: skip


def test_with_a_static_address_the_gateways_addresses_are_the_ones_asked_for_that_the_service_holds() -> None:
    svc: dict[str, Any] = {"spec": {"clusterIP": "10.96.0.250", "clusterIPs": ["10.96.0.250"]}}
    svc["status"] = {"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}]}}
    assert service_addresses(svc, ("10.96.0.250",)) == (GatewayAddress("IPAddress", "10.96.0.250"),)
    assert service_addresses({"spec": {"clusterIP": "10.96.0.3", "externalIPs": ["192.0.2.8"]}}, ("192.0.2.8",)) == (
        GatewayAddress("IPAddress", "192.0.2.8"),
    )
    # Not (yet) held: no address, rather than one the Gateway did not ask for.
    assert service_addresses({"spec": {"clusterIP": "10.96.0.3"}}, ("10.96.0.250",)) == ()


def test_addresses_are_the_load_balancers_else_the_cluster_ip() -> None:
    svc: dict[str, Any] = {"spec": {"clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7", "fd00::7"]}}
    assert service_addresses(svc) == (GatewayAddress("IPAddress", "10.0.0.7"), GatewayAddress("IPAddress", "fd00::7"))
    svc["status"] = {"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}, {"hostname": "lb.example.com"}]}}
    assert service_addresses(svc) == (
        GatewayAddress("IPAddress", "203.0.113.9"),
        GatewayAddress("Hostname", "lb.example.com"),
    )
    assert service_addresses({"spec": {"clusterIP": "None"}}) == ()


def test_the_settings_file_loads_as_the_chart_mounts_it(tmp_path: Path) -> None:
    from trafficsplit.operator.provisioner import load_settings

    (tmp_path / "settings.json").write_text(json.dumps(settings_doc("ops")))
    loaded = load_settings(str(tmp_path / "settings.json"))
    assert loaded.namespace == "ops" and loaded == settings(settings_doc("ops"))
    (tmp_path / "big.json").write_text(" " * (2 << 20))
    with pytest.raises(ValueError, match="over"):
        load_settings(str(tmp_path / "big.json"))


# --- cookie keys --------------------------------------------------------------------------------------------------


K1, K2, K3 = "a1" * 32, "b2" * 32, "c3" * 32


def test_the_cookie_keys_secret_is_in_the_plan_beside_the_rest_and_mounted_by_the_extproc() -> None:
    keys = CookieKeys(current=K1, since=1000)
    r = render(gateway(80), DEFAULT_PARAMETERS, settings(), keys)
    name = cookie_keys_secret_name("shop", "web")
    assert r.objects[0]["kind"] == "Secret"  # applied before the pods that mount it
    secret = one(r, "Secret", name)
    meta = secret["metadata"]
    assert meta["namespace"] == "ts-system"  # the data plane's namespace: a pod mounts only its own namespace's
    assert meta["labels"] == one(r, "Deployment")["metadata"]["labels"]  # deleted with the Gateway, by label
    assert meta["annotations"][GATEWAY_NAMESPACE_ANNOTATION] == "shop"
    assert meta["annotations"][COOKIE_KEYS_SINCE_ANNOTATION] == "1000"
    assert secret["type"] == COOKIE_KEYS_TYPE
    file_text = base64.b64decode(secret["data"]["keys"]).decode()
    assert file_text == K1 + "\n"
    assert CookieSigner.from_text(file_text.encode()).open("s", CookieSigner(K1.encode()).seal("s", "k", "a"))
    vols = {v["name"]: v for v in pod(r)["volumes"]}
    assert vols["cookie-keys"]["secret"]["secretName"] == name
    ext = container(r, "extproc")
    assert f"--cookie-key-file={COOKIE_KEYS_DIR}/keys" in ext["args"]
    assert {"name": "cookie-keys", "mountPath": COOKIE_KEYS_DIR, "readOnly": True} in ext["volumeMounts"]
    # Without keys (a caller that only looks) the pods are the same; the Secret is simply not in the objects.
    bare = render(gateway(80), DEFAULT_PARAMETERS, settings())
    assert bare.of_kind("Secret") == [] and pod(bare) == pod(r)


def test_the_gateways_own_keys_win_over_the_chart_gateways_secret() -> None:
    r = render(gateway(80), DEFAULT_PARAMETERS, settings(settings_doc(extproc__cookieKeysSecret="shared")))
    vols = {v["name"]: v for v in pod(r)["volumes"]}
    assert vols["cookie-keys"]["secret"]["secretName"] == cookie_keys_secret_name("shop", "web")
    assert [a for a in container(r, "extproc")["args"] if a.startswith("--cookie-key-file")] == [
        f"--cookie-key-file={COOKIE_KEYS_DIR}/keys"
    ]


def test_a_rotation_rolls_no_pod() -> None:
    a = render(gateway(80), DEFAULT_PARAMETERS, settings(), CookieKeys(current=K1, since=0))
    b = render(gateway(80), DEFAULT_PARAMETERS, settings(), CookieKeys(current=K2, previous=K1, since=9))
    assert one(a, "Deployment") == one(b, "Deployment")
    assert one(a, "Secret") != one(b, "Secret")


def test_two_gateways_get_different_keys_secrets() -> None:
    assert cookie_keys_secret_name("shop", "web") != cookie_keys_secret_name("other", "web")


def test_the_rotation_is_a_function_of_the_time() -> None:
    p, d = KEY_ROTATION_SECONDS, KEY_STAGING_SECONDS
    made = cookie_keys_step(None, 100, K1)
    assert made == CookieKeys(current=K1, since=100)
    assert cookie_keys_step(made, 100 + p - 1, K2) is None  # not due: the key is never regenerated
    staged = cookie_keys_step(made, 100 + p, K2)
    assert staged == CookieKeys(current=K1, staged=K2, since=100 + p)  # accepted everywhere before it signs
    assert cookie_keys_step(staged, 100 + p + d - 1, K3) is None
    signing = cookie_keys_step(staged, 100 + p + d, K3)
    assert signing == CookieKeys(current=K2, previous=K1, since=100 + p + d)  # K1 verifies one period more
    assert cookie_keys_step(signing, 100 + 2 * p + d - 1, K3) is None
    again = cookie_keys_step(signing, 100 + 2 * p + d, K3)
    assert again == CookieKeys(current=K2, staged=K3, since=100 + 2 * p + d)  # K1 dropped after its period
    # A stamp far in the future (a clock that jumped back) does not freeze the keys.
    assert cookie_keys_step(CookieKeys(current=K1, since=10 * p), 0, K2) == CookieKeys(current=K1, staged=K2, since=0)


def test_every_replica_verifies_every_cookie_through_a_rotation_whatever_order_the_pods_see_it() -> None:
    """Each step's key file beside the one before it (one pod updated, the other not yet): a cookie sealed by either
    opens on both, so no session is re-keyed by a rotation."""
    p, d = KEY_ROTATION_SECONDS, KEY_STAGING_SECONDS
    states = [cookie_keys_step(None, 0, K1)]
    for t, fresh in ((p, K2), (p + d, K3), (2 * p + d, K3), (2 * p + 2 * d, K1)):
        nxt = cookie_keys_step(states[-1], t, fresh)
        assert nxt is not None
        states.append(nxt)
    for old, new in itertools.pairwise(states):
        assert old is not None and new is not None
        signers = [CookieSigner.from_text(s.file_text().encode()) for s in (old, new)]
        for sealer in signers:
            cookie = sealer.seal("ns/r.rule-0", "k" * 24, "blue")
            for opener in signers:
                session = opener.open("ns/r.rule-0", cookie)
                assert session is not None and session.backend == "blue"


def test_the_keys_read_back_are_the_keys_written() -> None:
    for keys in (CookieKeys(current=K1, since=5), CookieKeys(current=K1, previous=K2, since=6),
                 CookieKeys(current=K1, staged=K3, since=7)):  # fmt: skip
        secret = render(gateway(80), DEFAULT_PARAMETERS, settings(), keys).of_kind("Secret")[0]
        assert parse_cookie_keys(secret) == keys
    assert parse_cookie_keys(None) is None


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s["data"].pop("current"),
        lambda s: s["data"].__setitem__("current", base64.b64encode(b"short").decode()),
        lambda s: s["data"].__setitem__("current", "%%not base64%%"),
        lambda s: s["metadata"]["annotations"].pop(COOKIE_KEYS_SINCE_ANNOTATION),
        lambda s: s["metadata"]["annotations"].__setitem__(COOKIE_KEYS_SINCE_ANNOTATION, "soon"),
        lambda s: s["data"].__setitem__("staged", s["data"]["current"]),  # and a previous: three keys
    ],
)
def test_a_secret_without_valid_keys_reads_as_none(change: Any) -> None:
    keys = CookieKeys(current=K1, previous=K2, since=5)
    secret = copy.deepcopy(render(gateway(80), DEFAULT_PARAMETERS, settings(), keys).of_kind("Secret")[0])
    change(secret)
    assert parse_cookie_keys(secret) is None


@pytest.mark.parametrize("key", ["ab" * 15, "AB" * 32, "zz" * 32, "ab" * 129])
def test_keys_are_long_lowercase_hex(key: str) -> None:
    with pytest.raises(ValueError, match="current"):
        CookieKeys(current=key, since=0)


def test_a_cookie_keys_secret_in_the_class_parameters_wins_and_no_keys_are_made() -> None:
    p = params({"extproc": {"cookieKeysSecret": "my-keys"}})
    r = render(gateway(80), p, settings(), CookieKeys(current=K1, since=0))
    assert r.of_kind("Secret") == []  # nothing of ours: the ensure's sweep deletes a Secret made before
    vols = {v["name"]: v for v in pod(r)["volumes"]}
    assert vols["cookie-keys"]["secret"]["secretName"] == "my-keys"
    assert f"--cookie-key-file={COOKIE_KEYS_DIR}/keys" in container(r, "extproc")["args"]


def test_a_refused_listener_port_names_the_field() -> None:
    with pytest.raises(ProvisionError, match=r"^spec\.listeners\[1\]\.port: listener port 9001 ") as caught:
        render(gateway(80, 9001, 9001), DEFAULT_PARAMETERS, settings())
    assert caught.value.reason == "Invalid"
