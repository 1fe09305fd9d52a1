"""HTTPRoutes served on real pods through a Gateway the operator provisioned (issue 20's must-shows).

The tier's release is upgraded to ``gatewayAPI.enabled=true`` (the Gateway API CRDs applied first, the experimental
channel: ``sessionPersistence`` lives there; the class's GatewayParameters asks for 2 data-plane replicas; small CPU
requests so the chart's gateway, the provisioned data plane and the backends fit the 2-core node). One Gateway of our
class with one HTTP listener on port 80, three name-echoing backends, then:

- a cookie-less 70/30/0 HTTPRoute: the realised split over 5,000 requests to the Gateway's ClusterIP (χ²), nothing
  on the weight-0 backend;
- a 90/10 HTTPRoute with ``sessionPersistence: Cookie``: 1,000 sessions, each request sent straight to one of the two
  data-plane pods in turn (so every session is served by both replicas), each keeping its backend; after 90/10 → 50/50
  new sessions split 50/50 and no existing session moves; at weight 0 a backend keeps its sessions and takes no new
  one; removing a backendRef moves its sessions (GEP-1619; the sealed persistent cookie, with the Gateway's own cookie
  keys, which the operator generates). Each change is measured only once the route's parent status is ``Accepted``
  at its new ``observedGeneration`` (status after ACK: every replica serves it); the wait is printed.

The Gateway rules answer without debug headers and the echo backend does not return the request id, so the core's
pick per request id cannot be compared request by request here; tests/integration/test_gateway_dataplane.py does
that on loopback.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest
import yaml
from scipy.stats import chisquare

from tests.e2e.cluster import (
    Cluster,
    Gateway,
    Response,
    condition,
    echo_backend,
    plugin_command,
    probe_failures,
    wait_for,
)
from tests.e2e.gatewayapi import (
    CLASS,
    CONTROLLER,
    LISTENER_PORT,
    POD_PORT,
    accepted_now,
    dataplane_pod_ips,
    envoy_pid,
    gateway_doc,
    install_gateway_api,
    our_parent,
    programmed,
)
from tests.e2e.load import parallel, steady_load
from trafficsplit.core.model.weights import Weights

pytestmark = [pytest.mark.e2e]

NS = "gw-e2e"
GATEWAY = "edge"
BACKENDS = ("alpha", "beta", "gamma")
REPLICAS = 2
SESSIONS = 1000
COOKIE = "gw-e2e-session"
P_MIN = 0.001


def _programmed(cluster: Cluster, name: str = GATEWAY) -> dict[str, Any] | None:
    return programmed(cluster, NS, name)


def _dataplane_pod_ips(cluster: Cluster) -> tuple[str, ...] | None:
    return dataplane_pod_ips(cluster, NS, GATEWAY, REPLICAS)


def _our_parent(route: dict[str, Any]) -> dict[str, Any] | None:
    return our_parent(route, GATEWAY)


def _accepted_now(cluster: Cluster, name: str) -> dict[str, Any] | None:
    return accepted_now(cluster, NS, name, GATEWAY)


def _backend_docs() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}]
    for name in BACKENDS:
        # One CI run measured the 70/30 as 72.5/27.5. The mechanism found that biases it: a pod whose probe (default
        # timeout 1 s) fails on the saturated 2-core node leaves its endpoints and its keys fail over (docs/spec.md
        # §6). The probe proves readiness, not speed (echo_backend's 5 s); the ratio test reports any probe failure.
        docs += echo_backend(NS, name, {"app": "gw-e2e", "version": name}, "IMAGE", probe_period=2)
    return docs


@dataclass(frozen=True, kw_only=True)
class GatewayAPI:
    cluster: Cluster
    address: str  # the Gateway's status.addresses[0] (its Service's ClusterIP)
    pods: tuple[str, ...]  # the data-plane pods' IPs


@pytest.fixture(scope="module")
def gwapi(cluster: Cluster) -> Iterator[GatewayAPI]:
    install_s = install_gateway_api(cluster, REPLICAS)
    docs = _backend_docs()
    for d in docs:
        if d["kind"] == "Deployment":
            d["spec"]["template"]["spec"]["containers"][0]["image"] = cluster.echo_image()
    gateway = gateway_doc(NS, GATEWAY)
    t1 = time.monotonic()
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([*docs, gateway]))
    cluster.kubectl(
        "-n", NS, "wait", "--for=condition=Available", "deployment", "--all", "--timeout=240s", timeout=260
    )  # fmt: skip
    gw = wait_for("Gateway Programmed with an address", lambda: _programmed(cluster), timeout=240, interval=1)
    programmed_s = time.monotonic() - t1
    pods = wait_for(f"{REPLICAS} data-plane pods Ready", lambda: _dataplane_pod_ips(cluster), timeout=120)
    address = gw["status"]["addresses"][0]["value"]
    ns = cluster.release_namespace
    svc_ips = {
        s["spec"].get("clusterIP")
        for s in cluster.get("services", "-n", ns, "-l", "app.kubernetes.io/component=gateway-dataplane")["items"]
    }
    print(
        f"\nchart upgraded with gatewayAPI.enabled in {install_s:.1f}s; Gateway {NS}/{GATEWAY} Programmed in "
        f"{programmed_s:.1f}s, addresses {gw['status']['addresses']}, data-plane pods {pods}"
    )
    assert gw["status"]["addresses"][0].get("type", "IPAddress") == "IPAddress", gw["status"]
    assert address in svc_ips, (address, svc_ips)
    yield GatewayAPI(cluster=cluster, address=address, pods=pods)
    cluster.kubectl("delete", "namespace", NS, "--wait=false", check=False)


def _route(name: str, host: str, backends: list[tuple[str, int]], sticky: bool) -> dict[str, Any]:
    rule: dict[str, Any] = {"backendRefs": [{"name": b, "port": 80, "weight": w} for b, w in backends]}
    if sticky:
        rule["sessionPersistence"] = {"type": "Cookie", "sessionName": COOKIE}
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"parentRefs": [{"name": GATEWAY}], "hostnames": [host], "rules": [rule]},
    }


def _apply_and_wait(cluster: Cluster, doc: dict[str, Any]) -> tuple[dict[str, Any], float]:
    t = time.monotonic()
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))
    parent = wait_for(f"{doc['metadata']['name']} Accepted", lambda: _accepted_now(cluster, doc["metadata"]["name"]))
    return parent, time.monotonic() - t


def _assert_parent_status(parent: dict[str, Any]) -> None:
    conds = {c["type"]: c for c in parent["conditions"]}
    assert parent["controllerName"] == CONTROLLER, parent
    for type_ in ("Accepted", "ResolvedRefs"):
        assert conds[type_]["status"] == "True", parent
        assert conds[type_]["observedGeneration"] == parent["_generation"], parent
    print(
        f"parent status: controllerName={parent['controllerName']}, "
        + ", ".join(f"{t}={conds[t]['status']}/{conds[t]['reason']}@{conds[t]['observedGeneration']}" for t in conds)
    )


def test_the_gateway_is_programmed_with_two_replicas(gwapi: GatewayAPI) -> None:
    gw = gwapi.cluster.get("gateway", GATEWAY, "-n", NS)
    cond = condition(gw, "Programmed")
    assert cond is not None and cond["status"] == "True", gw["status"]
    accepted = condition(gw, "Accepted")
    assert accepted is not None and accepted["status"] == "True", gw["status"]
    print(f"\nGateway Accepted={accepted['status']}, Programmed={cond['status']} ({cond.get('message', '')!r})")
    assert len(gwapi.pods) == REPLICAS


def test_a_70_30_0_route_splits_5000_cookieless_requests(gwapi: GatewayAPI) -> None:
    cluster = gwapi.cluster
    host = "split.gw-e2e.test"
    parent, took = _apply_and_wait(cluster, _route("split", host, [("alpha", 70), ("beta", 30), ("gamma", 0)], False))
    print(f"\n70/30/0 route Accepted at generation {parent['_generation']} after {took:.2f}s")
    _assert_parent_status(parent)
    gw = Gateway(gwapi.address, LISTENER_PORT)
    n = 5000
    probes = probe_failures(cluster, NS)
    t = time.monotonic()
    responses = parallel(lambda _: gw.request(host), range(n))
    took = time.monotonic() - t
    flapped = probe_failures(cluster, NS) - probes
    statuses = Counter(r.status for r in responses)
    assert statuses == {200: n}, statuses
    counts = Counter(r.backend for r in responses)
    assert counts["gamma"] == 0, counts
    assert set(counts) <= {"alpha", "beta"}, counts
    result = chisquare([counts["alpha"], counts["beta"]], [n * 0.7, n * 0.3])
    print(f"70/30/0 over {n} requests to {gwapi.address}:{LISTENER_PORT} in {took:.1f}s: {dict(counts)}, "
          f"chi-square p={result.pvalue:.3f}, backend probe failures during the run: {dict(flapped)}")  # fmt: skip
    # A backend whose readiness probe failed lost its endpoint for a while, and its keys failed over (docs/spec.md
    # §6): correct behaviour, but not the 70/30 this measures. Said as such rather than as a biased ratio.
    assert not flapped, f"backend pods failed readiness probes during the run, so the split failed over: {flapped}"
    assert result.pvalue > P_MIN, (counts, result)


@dataclass(frozen=True, kw_only=True)
class Session:
    cookie: str
    backend: str


def _replica(gwapi: GatewayAPI, i: int) -> Gateway:
    return Gateway(gwapi.pods[i % len(gwapi.pods)], POD_PORT)


def _new_session(gwapi: GatewayAPI, host: str, i: int) -> Session:
    first = _replica(gwapi, i).request(host)
    value = first.cookie(COOKIE)
    assert first.status == 200 and value, first
    return Session(cookie=f"{COOKIE}={value}", backend=first.backend)


def _revisit(gwapi: GatewayAPI, host: str, sessions: list[Session], start: int = 0) -> list[Response]:
    """One request per session, alternating data-plane replicas (``start`` shifts which replica a session meets)."""
    return parallel(
        lambda iv: _replica(gwapi, iv[0] + start).request(host, cookie=iv[1].cookie), list(enumerate(sessions))
    )


def _moved(sessions: list[Session], responses: list[Response]) -> list[tuple[str, str]]:
    assert all(r.status == 200 for r in responses), Counter(r.status for r in responses)
    return [(s.backend, r.backend) for s, r in zip(sessions, responses, strict=True) if r.backend != s.backend]


STICKY_HOST = "sticky.gw-e2e.test"


@dataclass(kw_only=True)
class Sessions:
    """The sessions the sticky tests share, in file order."""

    first: list[Session]  # minted at 90/10
    fresh: list[Session]  # minted at 50/50


@pytest.fixture(scope="module")
def sessions() -> Sessions:
    return Sessions(first=[], fresh=[])


def _sticky(cluster: Cluster, backends: list[tuple[str, int]], what: str) -> None:
    parent, took = _apply_and_wait(cluster, _route("sticky", STICKY_HOST, backends, True))
    print(f"\n{what}: Accepted at generation {parent['_generation']} {took:.2f}s after the apply")
    _assert_parent_status(parent)


def test_1000_sticky_sessions_keep_their_backend_on_both_replicas(gwapi: GatewayAPI, sessions: Sessions) -> None:
    _sticky(gwapi.cluster, [("alpha", 90), ("beta", 10)], "90/10 sticky route")
    # Minted on replica i % 2, then revisited on the other replica and on the first again.
    sessions.first = parallel(lambda i: _new_session(gwapi, STICKY_HOST, i), range(SESSIONS))
    first = sessions.first
    counts = Counter(s.backend for s in first)
    moved = _moved(first, _revisit(gwapi, STICKY_HOST, first, start=1)) + _moved(
        first, _revisit(gwapi, STICKY_HOST, first)
    )
    r90 = chisquare([counts["alpha"], counts["beta"]], [SESSIONS * 0.9, SESSIONS * 0.1])
    print(f"90/10: {SESSIONS} sessions {dict(counts)} (chi-square p={r90.pvalue:.3f}); each revisited on both "
          f"replicas {gwapi.pods}: {len(moved)} changed backend")  # fmt: skip
    assert not moved, moved[:10]
    assert set(counts) == {"alpha", "beta"}, counts
    assert r90.pvalue > P_MIN, (counts, r90)


def test_new_sessions_split_50_50_once_the_patch_is_accepted(gwapi: GatewayAPI, sessions: Sessions) -> None:
    _sticky(gwapi.cluster, [("alpha", 50), ("beta", 50)], "90/10 -> 50/50")
    sessions.fresh = parallel(lambda i: _new_session(gwapi, STICKY_HOST, i), range(SESSIONS))
    counts = Counter(s.backend for s in sessions.fresh)
    r50 = chisquare([counts["alpha"], counts["beta"]])
    print(f"50/50: {SESSIONS} new sessions {dict(counts)} (chi-square p={r50.pvalue:.3f})")
    assert r50.pvalue > P_MIN, (counts, r50)


def test_the_90_10_to_50_50_change_moves_no_existing_session(gwapi: GatewayAPI, sessions: Sessions) -> None:
    first = sessions.first
    assert len(first) == SESSIONS  # minted by the tests above
    moved = _moved(first, _revisit(gwapi, STICKY_HOST, first, start=1))
    print(f"\n50/50: {len(moved)} of {SESSIONS} sessions minted at 90/10 moved {dict(Counter(moved))}")
    assert not moved, moved[:10]


def test_weight_0_keeps_its_sessions(gwapi: GatewayAPI, sessions: Sessions) -> None:
    on_beta = [s for s in sessions.first + sessions.fresh if s.backend == "beta"]
    assert on_beta  # minted by the tests above
    _sticky(gwapi.cluster, [("alpha", 50), ("beta", 0)], "beta at weight 0")
    newest = Counter(s.backend for s in parallel(lambda i: _new_session(gwapi, STICKY_HOST, i), range(200)))
    moved = _moved(on_beta, _revisit(gwapi, STICKY_HOST, on_beta))
    print(f"beta weight 0: {len(moved)} of {len(on_beta)} beta sessions moved; 200 new sessions {dict(newest)}")
    assert newest == {"alpha": 200}, newest
    assert not moved, moved[:10]


def test_removing_the_backendref_moves_its_sessions(gwapi: GatewayAPI, sessions: Sessions) -> None:
    everyone = sessions.first + sessions.fresh
    on_beta = [s for s in everyone if s.backend == "beta"]
    on_alpha = [s for s in everyone if s.backend == "alpha"][:500]
    assert on_beta and on_alpha  # minted by the tests above
    _sticky(gwapi.cluster, [("alpha", 50)], "beta's backendRef removed")
    after = _revisit(gwapi, STICKY_HOST, on_beta, start=1)
    assert all(r.status == 200 for r in after), Counter(r.status for r in after)
    landed = Counter(r.backend for r in after)
    alpha_moved = _moved(on_alpha, _revisit(gwapi, STICKY_HOST, on_alpha, start=1))
    print(f"beta removed: {len(on_beta)} beta sessions now on {dict(landed)}; "
          f"{len(alpha_moved)} of {len(on_alpha)} alpha sessions moved")  # fmt: skip
    assert landed == {"alpha": len(on_beta)}, landed
    assert not alpha_moved, alpha_moved[:10]


def _accepted_generation(cluster: Cluster, name: str) -> int | None:
    parent = _our_parent(cluster.get("httproute", name, "-n", NS))
    acc = next((c for c in (parent or {}).get("conditions", []) if c.get("type") == "Accepted"), None)
    return int(acc["observedGeneration"]) if acc and acc["status"] == "True" else None


def test_a_stopped_replica_holds_back_the_routes_status_while_the_other_serves(gwapi: GatewayAPI) -> None:
    """Status after ACK with two replicas: one data-plane pod's Envoy SIGSTOPped, a weight patched. The other replica
    serves the new weights at once; the route's Accepted stays at its old observedGeneration (the stopped replica has
    not ACKed the generation carrying it) and the Gateway stays Programmed; after SIGCONT the route advances."""
    cluster = gwapi.cluster
    if cluster.containerd_sock is None:
        pytest.skip(f"{cluster.name}: SIGSTOP needs the container's host PID (the local node's containerd)")
    host = "acked.gw-e2e.test"
    before, _ = _apply_and_wait(cluster, _route("acked", host, [("alpha", 100), ("beta", 0)], False))
    stopped, serving = gwapi.pods[0], Gateway(gwapi.pods[1], POD_PORT)
    pid = envoy_pid(cluster, stopped)
    os.kill(pid, signal.SIGSTOP)
    try:
        t = time.monotonic()
        cluster.kubectl(
            "apply", "-f", "-", input=yaml.safe_dump(_route("acked", host, [("alpha", 0), ("beta", 100)], False))
        )
        wait_for("the running replica serves beta", lambda: serving.request(host).backend == "beta", timeout=60)
        served = time.monotonic() - t
        time.sleep(5)  # the stopped replica's publish times out meanwhile: status must still not move
        held_at = _accepted_generation(cluster, "acked")
        gw = cluster.get("gateway", GATEWAY, "-n", NS)
        programmed = condition(gw, "Programmed")
        state = programmed and programmed["status"]
        print(f"\nEnvoy of {stopped} stopped: {gwapi.pods[1]} served the patch in {served:.2f}s; route Accepted "
              f"still at {held_at} (was {before['_generation']}); Gateway Programmed={state}")  # fmt: skip
        assert held_at == before["_generation"], "status advanced although a replica had not ACKed"
        assert programmed is not None and programmed["status"] == "True", gw["status"]
    finally:
        os.kill(pid, signal.SIGCONT)
    t = time.monotonic()
    after = wait_for("route Accepted at its new generation", lambda: _accepted_now(cluster, "acked"), timeout=60)
    print(f"after SIGCONT: Accepted at generation {after['_generation']} in {time.monotonic() - t:.2f}s")
    assert after["_generation"] == before["_generation"] + 1
    back = Gateway(stopped, POD_PORT)
    assert Counter(back.request(host).backend for _ in range(20)) == {"beta": 20}


def _parent_conditions(cluster: Cluster, name: str) -> dict[str, dict[str, Any]] | None:
    """Our parent entry's conditions by type, once written for the route's current generation."""
    route = cluster.get("httproute", name, "-n", NS)
    parent = _our_parent(route)
    if parent is None:
        return None
    conds = {c["type"]: c for c in parent.get("conditions", [])}
    acc = conds.get("Accepted")
    return conds if acc and acc["observedGeneration"] == route["metadata"]["generation"] else None


def _rule(backends: list[dict[str, Any]], path: str | None = None, regex: bool = False) -> dict[str, Any]:
    rule: dict[str, Any] = {"backendRefs": backends}
    if path is not None:
        rule["matches"] = [{"path": {"type": "RegularExpression" if regex else "PathPrefix", "value": path}}]
    return rule


def _route_doc(name: str, host: str, rules: list[dict[str, Any]], parent: str = GATEWAY) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"parentRefs": [{"name": parent}], "hostnames": [host], "rules": rules},
    }


def _answer(client: Gateway, host: str) -> Response | None:
    """The response, or None while the address has no Ready endpoint behind it yet: kube-proxy then rejects the
    connection, as refused or (its iptables REJECT for a Service without endpoints) as host unreachable."""
    try:
        return client.request(host)
    except ConnectionRefusedError:
        return None
    except OSError as exc:
        if exc.errno == errno.EHOSTUNREACH:
            return None
        raise


def _dataplane_objects(cluster: Cluster, gateway: str) -> list[str]:
    from trafficsplit.operator.dataplane_names import selector_labels

    selector = ",".join(f"{k}={v}" for k, v in selector_labels(NS, gateway).items())
    kinds = "deployments,services,poddisruptionbudgets,networkpolicies,secrets,configmaps,pods"
    out = cluster.kubectl("get", kinds, "-n", cluster.release_namespace, "-l", selector, "-o", "name").stdout
    return out.split()


def test_bad_input_is_refused_alone_while_a_steady_route_keeps_serving(gwapi: GatewayAPI) -> None:
    """Issue 20's bad inputs, each on a route (or Gateway) of its own, while cookie-less load runs through the
    Gateway's address to a steady route: the API server refuses what the CRD forbids, naming the field; our status
    names what we refuse; nothing else is disturbed: every steady request answered 200 (a late processor fails open
    to the rule's native weights, so there is no 503 to excuse)."""
    cluster = gwapi.cluster
    steady = "steady.gw-e2e.test"
    _apply_and_wait(cluster, _route("steady", steady, [("alpha", 50), ("beta", 50)], False))
    alpha = {"name": "alpha", "port": 80}
    gw = Gateway(gwapi.address, LISTENER_PORT)
    with steady_load(gw, steady, max_seconds=400) as load:
        # Refused by the API server, naming the field: a Service backendRef without a port, 10,000 rules.
        no_port = cluster.kubectl(
            "create", "-f", "-", check=False,
            input=yaml.safe_dump(_route_doc("no-port", "no-port.gw-e2e.test", [_rule([{"name": "alpha"}])])),
        )  # fmt: skip
        assert no_port.returncode != 0 and "port" in no_port.stderr, no_port.stderr
        many = _route_doc("many-rules", "many.gw-e2e.test", [_rule([alpha], f"/r{i}") for i in range(10_000)])
        too_many = cluster.kubectl("create", "-f", "-", check=False, input=yaml.safe_dump(many), timeout=120)
        assert too_many.returncode != 0 and "spec.rules" in too_many.stderr, too_many.stderr[-2000:]
        print(f"\nrefused by the API server: no-port: {no_port.stderr.strip()[:200]!r}; 10,000 rules: "
              f"{too_many.stderr.strip()[-200:]!r}")  # fmt: skip

        # Accepted by the API server, refused or degraded by us, alone.
        bucket = {"group": "example.com", "kind": "Bucket", "name": "b", "weight": 1}
        bad = [
            _route_doc("bad-kind", "bad-kind.gw-e2e.test", [_rule([alpha | {"weight": 1}, bucket])]),
            _route_doc("cross-ns", "cross-ns.gw-e2e.test", [_rule([alpha | {"namespace": "default"}])]),
            _route_doc(
                "big-regex",
                "big-regex.gw-e2e.test",
                [_rule([alpha], "/(a|b){1,1000}", regex=True), _rule([alpha], "/ok")],
            ),
            _route_doc("dup-older", "dup.gw-e2e.test", [_rule([alpha], "/shop")]),
        ]
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(bad))
        time.sleep(1.1)  # creationTimestamp has 1 s resolution: dup-newer must be the younger
        dup_newer = _route_doc("dup-newer", "dup.gw-e2e.test", [_rule([{"name": "beta", "port": 80}], "/shop")])
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(dup_newer))
        got: dict[str, dict[str, dict[str, Any]]] = {}
        for name in ("bad-kind", "cross-ns", "big-regex", "dup-older", "dup-newer"):
            got[name] = wait_for(f"{name}'s status", partial(_parent_conditions, cluster, name), timeout=60)
        for name, conds in got.items():
            print(f"{name}: " + ", ".join(f"{t}={c['status']}/{c['reason']}" for t, c in conds.items()))
        assert (got["bad-kind"]["ResolvedRefs"]["status"], got["bad-kind"]["ResolvedRefs"]["reason"]) == (
            "False", "InvalidKind")  # fmt: skip
        assert got["cross-ns"]["ResolvedRefs"]["reason"] == "RefNotPermitted"
        assert got["big-regex"]["PartiallyInvalid"]["status"] == "True"
        assert "RE2 program size" in got["big-regex"]["PartiallyInvalid"]["message"]
        assert got["dup-newer"]["Conflicted"]["reason"] == "RuleMatchConflict", got["dup-newer"]
        assert "Conflicted" not in got["dup-older"]
        client = gw
        statuses = {
            "bad-kind": Counter(client.request("bad-kind.gw-e2e.test").status for _ in range(200)),
            "cross-ns": Counter(client.request("cross-ns.gw-e2e.test").status for _ in range(20)),
            "big-regex /ok": Counter(client.request("big-regex.gw-e2e.test", path="/ok").status for _ in range(20)),
        }
        dup = Counter(client.request("dup.gw-e2e.test", path="/shop").backend for _ in range(20))
        print(f"answers: {statuses}; dup.gw-e2e.test/shop: {dict(dup)}")
        assert set(statuses["bad-kind"]) == {200, 500} and 60 < statuses["bad-kind"][500] < 140, statuses["bad-kind"]
        assert statuses["cross-ns"] == {500: 20}
        assert statuses["big-regex /ok"] == {200: 20}
        assert dup == {"alpha": 20}, "the older route wins"

        # A second Gateway, serving, then deleted: its data plane goes, nothing of it is left, edge is unaffected.
        spare = {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "spare", "namespace": NS},
            "spec": {"gatewayClassName": CLASS, "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]},
        }
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(
            [spare, _route_doc("on-spare", "spare.gw-e2e.test", [_rule([alpha])], parent="spare")]))  # fmt: skip
        t = time.monotonic()
        spare_gw = wait_for("Gateway spare Programmed", lambda: _programmed(cluster, "spare"), timeout=240, interval=1)
        spare_addr = spare_gw["status"]["addresses"][0]["value"]
        # Programmed says every replica holds the configuration ("ready soon", the spec's word); the Service
        # answers once kube-proxy has a Ready pod behind it.
        spare_client = Gateway(spare_addr, LISTENER_PORT)
        t_ready = time.monotonic()
        first = wait_for("spare's address answers", lambda: _answer(spare_client, "spare.gw-e2e.test"), timeout=60)
        print(f"spare's address answered {time.monotonic() - t_ready:.1f}s after Programmed")
        assert first.status == 200 and first.backend == "alpha", first
        objects = _dataplane_objects(cluster, "spare")
        print(
            f"Gateway spare Programmed in {time.monotonic() - t:.1f}s at {spare_addr}, served; its objects: {objects}"
        )
        assert any(o.startswith("deployment") for o in objects), objects
        cluster.kubectl("delete", "gateway", "spare", "-n", NS)
        t = time.monotonic()
        wait_for("spare's data plane gone", lambda: not _dataplane_objects(cluster, "spare"), timeout=120)
        print(f"Gateway spare deleted: every object of its data plane gone in {time.monotonic() - t:.1f}s")
        assert _programmed(cluster) is not None, "edge lost Programmed"
    print(f"steady route under all of it: {load.summary()}")
    assert load.sent > 100, load.summary()
    assert load.failed == 0, load.summary()
    assert set(load.backends) == {"alpha", "beta"}, load.backends


def _policy_accepted(cluster: Cluster, name: str) -> bool:
    pol = cluster.get("trafficsplitpolicy", name, "-n", NS)
    for a in pol.get("status", {}).get("ancestors") or []:
        acc = next((c for c in a.get("conditions", []) if c.get("type") == "Accepted"), None)
        if a.get("controllerName") == CONTROLLER and acc and acc["status"] == "True":
            return bool(acc["observedGeneration"] == pol["metadata"]["generation"])
    return False


def test_under_a_rehash_policy_a_change_moves_exactly_what_plan_predicted(gwapi: GatewayAPI) -> None:
    """A sticky (Cookie sessionPersistence) route with a TrafficSplitPolicy `sticky.mode: rehash`: the seed's re-pin by
    key instead of the sealed cookie. `kubectl trafficsplit plan httproute/... --set` says what 90/10 → 50/50 moves;
    after the patch the sessions that changed backend on both replicas are exactly those the plan's weights give
    another backend (each session's key is its cookie value), and their share is the plan's."""
    cluster = gwapi.cluster
    host, name = "rehash.gw-e2e.test", "rehashed"
    policy = {
        "apiVersion": "trafficsplit.dev/v1alpha1",
        "kind": "TrafficSplitPolicy",
        "metadata": {"name": "rehash", "namespace": NS},
        "spec": {
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": name}],
            "sticky": {"mode": "rehash"},
        },
    }
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(policy))
    _apply_and_wait(cluster, _route(name, host, [("alpha", 90), ("beta", 10)], True))
    wait_for("the policy Accepted", lambda: _policy_accepted(cluster, "rehash"), timeout=60)
    first = parallel(lambda i: _new_session(gwapi, host, i), range(SESSIONS))

    plan_cmd = [*plugin_command(), "plan", f"httproute/{name}", "-n", NS, "--rule", "0", "--set", "alpha=50,beta=50"]
    out = subprocess.run(
        [*plan_cmd, "--json"], capture_output=True, text=True, timeout=60, check=True, env=cluster.env()
    ).stdout
    served = json.loads(out)["served"]
    print(f"\n{' '.join(plan_cmd[-7:])}: policy {served['policy']}, mode {served['mode']}, moves "
          f"{served['moved_share']:.1%} of existing sessions (exact: {served['exact']})")  # fmt: skip
    assert (served["policy"], served["mode"], served["exact"]) == (f"{NS}/rehash", "rehash", True), served
    before, after = Weights.of([("alpha", 90), ("beta", 10)]), Weights.of([("alpha", 50), ("beta", 50)])

    def key(s: Session) -> str:
        return s.cookie.partition("=")[2]

    assert all(before.pick(key(s)) == s.backend for s in first)  # the key decided each backend
    predicted = {s.cookie for s in first if before.pick(key(s)) != after.pick(key(s))}

    _apply_and_wait(cluster, _route(name, host, [("alpha", 50), ("beta", 50)], True))
    responses = _revisit(gwapi, host, first, start=1) + _revisit(gwapi, host, first)
    changed = [(s, r) for s, r in zip(first + first, responses, strict=True) if r.backend != s.backend]
    moved = {s.cookie for s, _ in changed}
    share = len(moved) / SESSIONS
    print(f"after the patch: {len(moved)} of {SESSIONS} sessions moved ({share:.1%}), predicted {len(predicted)}; "
          f"directions {dict(Counter((s.backend, r.backend) for s, r in changed))}")  # fmt: skip
    assert moved == predicted
    p = served["moved_share"]
    assert abs(share - p) < 4 * (p * (1 - p) / SESSIONS) ** 0.5, (share, p)
