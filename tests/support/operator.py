"""The operator as a real subprocess against the test control plane, and what its tests need around it.

Why a subprocess: what the operator promises (level-triggered recompiles, numbering across restarts, leader
hand-over, least-privilege RBAC) is behaviour of the process with kopf, its watches and its credentials; only
``python -m trafficsplit.operator`` shows it. Helpers here install the CRD, render the chart's operator RBAC and mint
its ServiceAccount token, start two dataplane units sharing a publish token (tests/support/dataplane.py's Processor
and Envoy), and create the Services + EndpointSlices a controller-manager would (there is none in the test plane).

Fixtures (need ``kube`` from tests/support/controlplane.py; mark tests ``k8s``):

* ``trafficsplit_crd`` (session): the CRD applied and Established.
* ``operators`` (function): :class:`Operators` — ``start(...) -> OperatorProcess``; all stopped after the test.
* ``gateway`` (function): two dataplane units (``gw-0``, ``gw-1``) with one token, for the operator to publish to.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support.controlplane import ControlPlane, control_plane
from tests.support.dataplane import Dataplane, NameBackends
from tests.support.netns import TestPods
from tests.support.waiting import poll
from trafficsplit.v1alpha1 import publish_pb2 as pb
from trafficsplit.v1alpha1 import publish_pb2_grpc as pb_grpc
from trafficsplit.wire.bootstrap import Address

REPO_ROOT = Path(__file__).resolve().parents[2]
CRD_PATH = REPO_ROOT / "crds" / "trafficsplit.dev_trafficsplits.yaml"
POLICY_CRD_PATH = REPO_ROOT / "crds" / "trafficsplit.dev_trafficsplitpolicies.yaml"
CHART = REPO_ROOT / "charts" / "trafficsplit"
GATEWAY_API_CRDS = CHART / "gateway-api-crds" / "standard"
PYTHONPATH = os.pathsep.join(str(REPO_ROOT / p) for p in ("src", "operator", "extproc", "."))
# The Lease the test operators use; the rendered RBAC names it (the chart grants get/update on that Lease only).
LEASE_NAME = "trafficsplit-operator"


# --- the CRD and objects -------------------------------------------------------------------------------------------


def install_crd(kube: ControlPlane) -> None:
    kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_PATH))
    kube.kubectl("wait", "--for=condition=Established", "crd/trafficsplits.trafficsplit.dev", "--timeout=30s")


def install_gateway_api_crds(kube: ControlPlane) -> None:
    """The Gateway API CRDs of the chart's standard channel, applied and Established. Forced: a helm release of an
    earlier test may own them (its chart installs the experimental channel), and the tests must not depend on which
    test file ran first in a worker."""
    kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(GATEWAY_API_CRDS))
    for crd in ("gatewayclasses", "gateways", "httproutes", "referencegrants"):
        kube.kubectl("wait", "--for=condition=Established", f"crd/{crd}.gateway.networking.k8s.io", "--timeout=60s")


def install_policy_crd(kube: ControlPlane) -> None:
    kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(POLICY_CRD_PATH))  # as above
    kube.kubectl("wait", "--for=condition=Established", "crd/trafficsplitpolicies.trafficsplit.dev", "--timeout=60s")


@contextlib.contextmanager
def gateway_api_control_plane() -> Iterator[ControlPlane]:
    """A control plane of its own with the TrafficSplit, Gateway API and TrafficSplitPolicy CRDs (the session's
    `kube` stays without the Gateway API's)."""
    with control_plane() as cp:
        install_crd(cp)
        install_gateway_api_crds(cp)
        install_policy_crd(cp)
        yield cp


@pytest.fixture(scope="session")
def trafficsplit_crd(kube: ControlPlane) -> ControlPlane:
    install_crd(kube)
    return kube


def ts_manifest(namespace: str, name: str, spec: Mapping[str, Any]) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "trafficsplit.dev/v1alpha1",
            "kind": "TrafficSplit",
            "metadata": {"name": name, "namespace": namespace},
            "spec": dict(spec),
        }
    )


def apply(kube: ControlPlane, manifest: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return kube.kubectl("apply", "-f", "-", input=manifest, check=check)


def service_with_slice(
    kube: ControlPlane,
    namespace: str,
    name: str,
    ips: Sequence[str],
    *,
    port: int = 80,
    target_port: int = 8080,
    ready: Mapping[str, bool] | None = None,
    port_name: str = "http",
    slice_suffix: str = "abc",
) -> None:
    """A Service and the EndpointSlice the EndpointSlice controller would make for it (there is no controller).
    Called again with another `slice_suffix`: one more slice of the same Service (endpoints on another port)."""
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"ports": [{"name": port_name, "port": port, "targetPort": target_port, "protocol": "TCP"}]},
    }
    eps = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{name}-{slice_suffix}",
            "namespace": namespace,
            "labels": {"kubernetes.io/service-name": name},
        },
        "addressType": "IPv4",
        "ports": [{"name": port_name, "port": target_port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [ip], "conditions": {"ready": (ready or {}).get(ip, True)}} for ip in ips],
    }
    apply(kube, yaml.safe_dump_all([svc, eps]))


def get_ts(kube: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    return get_object(kube, "trafficsplit", name, namespace)


def get_object(kube: ControlPlane, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(
        kube.kubectl("get", kind, name, "-o", "json", *(["-n", namespace] if namespace else [])).stdout
    )
    return out


def condition(obj: Mapping[str, Any], type_: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return None


def wait_condition(
    kube: ControlPlane,
    namespace: str,
    name: str,
    type_: str,
    status: str,
    message: str = "",
    timeout: float = 30,
    generation: int | None = None,
) -> dict[str, Any]:
    """Poll until condition ``type_`` has ``status``, its message matches regex ``message`` and (when given) its
    observedGeneration is ``generation``. Returns the whole object."""

    def check() -> dict[str, Any] | None:
        obj = get_ts(kube, namespace, name)
        c = condition(obj, type_)
        if c is None or c["status"] != status or not re.search(message, c.get("message", "")):
            return None
        if generation is not None and c.get("observedGeneration") != generation:
            return None
        return obj

    result: dict[str, Any] = poll(check, timeout, f"{namespace}/{name} {type_}={status} /{message}/", 0.1)
    return result


def events(kube: ControlPlane, namespace: str, name: str) -> list[dict[str, Any]]:
    out = json.loads(
        kube.kubectl(
            "get", "events", "-n", namespace, "--field-selector", f"involvedObject.name={name}", "-o", "json"
        ).stdout
    )
    return list(out.get("items") or [])


# --- RBAC from the chart -------------------------------------------------------------------------------------------


def render_operator_rbac(kube: ControlPlane, namespace: str, release: str, values: Sequence[str] = ()) -> str:
    args = [
        "template",
        release,
        str(CHART),
        "--namespace",
        namespace,
        "--show-only",
        "templates/operator-rbac.yaml",
        "--kube-version",
        kube.kube_version.lstrip("v"),
        "--set",
        f"operator.leaderElection.leaseName={LEASE_NAME}",
    ]
    for v in values:
        args += ["--set", v]
    return kube.helm(*args).stdout


def strip_verb(manifest: str, resource: str, verb: str) -> str:
    """The same RBAC with one verb removed from the rule on ``resource`` (to prove the role is exercised)."""
    docs = [d for d in yaml.safe_load_all(manifest) if d]
    found = False
    for d in docs:
        for rule in d.get("rules") or []:
            if resource in rule.get("resources", []) and verb in rule.get("verbs", []):
                rule["verbs"] = [v for v in rule["verbs"] if v != verb]
                found = True
        if "rules" in d:
            d["rules"] = [r for r in d["rules"] if r.get("verbs")]  # the API refuses a rule without verbs
    assert found, f"no rule grants {verb} on {resource}"
    return yaml.safe_dump_all(docs)


def operator_kubeconfig(kube: ControlPlane, namespace: str, release: str, manifest: str | None = None) -> Path:
    """Apply the chart's operator RBAC (or ``manifest``) and return a kubeconfig with its ServiceAccount's token."""
    apply(kube, manifest if manifest is not None else render_operator_rbac(kube, namespace, release))
    token = kube.token_for_service_account(namespace, f"{release}-operator", create=False)
    return kube.kubeconfig_for_token(token, name=f"{namespace}-{release}")


# --- the gateway: two dataplane units sharing one publish token ----------------------------------------------------


@dataclass
class Gateway:
    units: list[Dataplane]
    token: str
    token_file: Path
    publish_host: str

    def address(self, i: int) -> str:
        return f"{self.publish_host}:{self.units[i].processor.ports['publish']}"

    def dataplane_args(self) -> list[str]:
        return [f"--dataplane={u.processor.replica}={self.address(i)}" for i, u in enumerate(self.units)]

    def held(self, tokens: Sequence[str] | None = None) -> list[int]:
        """Each unit's held generation number (-1: unreachable), asked over the publish API with the token (`tokens`:
        each unit's own, as provisioned replicas have)."""
        out = []
        for i in range(len(self.units)):
            token = self.token if tokens is None else tokens[i]
            try:
                with grpc.insecure_channel(self.address(i)) as ch:
                    reply = pb_grpc.PublisherStub(ch).GetHeld(
                        pb.GetHeldRequest(), metadata=[("authorization", f"Bearer {token}")], timeout=5
                    )
                out.append(int(reply.held_number))
            except grpc.RpcError:
                out.append(-1)
        return out

    def publish(self, i: int, gen: pb.Generation, token: str) -> pb.PublishReply:
        """`gen` published to unit `i` with `token`, over the address an operator reaches it on (raises RpcError)."""
        with grpc.insecure_channel(self.address(i)) as ch:
            reply: pb.PublishReply = pb_grpc.PublisherStub(ch).Publish(
                pb.PublishRequest(generation=gen), metadata=[("authorization", f"Bearer {token}")], timeout=5
            )
            return reply

    def kill_processor(self, i: int) -> None:
        """SIGKILL the unit's extproc (the crash case); `start_processor` brings it back on the same port."""
        p = self.units[i].processor
        port = p.ports["publish"]
        p.kill()
        p.extra = [*[a for a in p.extra if not a.startswith("--publish=")], f"--publish={self.publish_host}:{port}"]

    def start_processor(self, i: int) -> None:
        self.units[i].processor.start()

    def restart_processor(self, i: int) -> None:
        """Kill the extproc and start it again on the same socket and publish port (holding nothing)."""
        self.kill_processor(i)
        self.start_processor(i)

    def stop(self) -> None:
        for u in self.units:
            with contextlib.suppress(Exception):
                u.stop()


def start_gateway(
    workdir: Path,
    backends: NameBackends,
    n: int = 2,
    publish_host: str = "127.0.0.1",
    extra: Sequence[str] = (),
    unit_extra: Sequence[Sequence[str]] = (),
    gateway_ports: Sequence[int] = (),
) -> Gateway:
    """`n` gateway units sharing a token; `extra`: more extproc arguments for every unit (cookie keys, windows);
    `unit_extra[i]`: more for unit i alone (a replica configured unlike the others); `gateway_ports`: the units are
    a Gateway's data plane, one Envoy listener per Gateway listener port (`Dataplane.connection(port)`)."""
    token = secrets.token_hex(16)
    units: list[Dataplane] = []
    try:
        for i in range(n):
            d = workdir / f"gw-{i}"
            d.mkdir()
            # The last --publish wins (argparse), so the unit's publish API can listen on a non-loopback address;
            # there in plaintext only by name (test_publish_tls.py covers the TLS the chart uses).
            plain = [] if Address(publish_host).loopback else ["--insecure-publish"]
            units.append(
                Dataplane.start(
                    d,
                    backends,
                    message_timeout_ms=200,
                    token=token,
                    replica=f"gw-{i}",
                    extra_processor_args=[
                        f"--publish={publish_host}:0",
                        *plain,
                        *extra,
                        *(unit_extra[i] if i < len(unit_extra) else ()),
                    ],
                    gateway_ports=gateway_ports,
                )
            )
    except BaseException:
        for u in units:
            u.stop()
        raise
    token_file = workdir / "publish-token"
    token_file.write_text(token + "\n")
    return Gateway(units, token, token_file, publish_host)


@contextlib.contextmanager
def routable_gateway(backends: NameBackends, testpods: TestPods, n: int = 1, **kw: Any) -> Iterator[Gateway]:
    """`n` gateway units (start_gateway's `kw`) whose publish API listens on the host end of a test pod's veth (.1 of
    the pod's /30): the API server refuses loopback addresses in EndpointSlices, so an operator that discovers its
    replicas from their EndpointSlice needs a routable one."""
    anchor = testpods.start("anchor")
    host = str(ipaddress.ip_address(anchor.ip) - 1)
    with tempfile.TemporaryDirectory(prefix="ts-gateway-") as d:
        gw = start_gateway(Path(d), backends, n=n, publish_host=host, **kw)
        try:
            yield gw
        finally:
            gw.stop()


@pytest.fixture
def gateway(name_backends: NameBackends) -> Iterator[Gateway]:
    with tempfile.TemporaryDirectory(prefix="ts-gateway-") as d:
        gw = start_gateway(Path(d), name_backends)
        try:
            yield gw
        finally:
            gw.stop()


# --- the operator process ------------------------------------------------------------------------------------------


@dataclass
class OperatorProcess:
    args: list[str]
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> OperatorProcess:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "trafficsplit.operator", *self.args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=REPO_ROOT,
                start_new_session=True,
            )
        return self

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-n:])

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def metrics_port(self) -> int | None:
        """The port of `--metrics=127.0.0.1:0`, from the operator's log line (None: not logged yet)."""
        if not self.running():
            raise RuntimeError(f"operator exited: {self.log_tail()}")
        m = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", self.log())
        return int(m[1]) if m else None

    def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        """Every sample of its Prometheus endpoint, keyed by (name, labels)."""
        port = poll(self.metrics_port, 20, "the operator's metrics port in its log")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM: a graceful stop (releases the Lease)."""
        if self.running():
            assert self.proc is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        """SIGKILL: the crash case (the Lease stays held until it expires)."""
        if self.running():
            assert self.proc is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@dataclass
class Operators:
    kube: ControlPlane
    workdir: Path
    started: list[OperatorProcess] = field(default_factory=list)

    def start(
        self,
        kubeconfig: Path,
        *,
        args: Sequence[str],
        identity: str = "op-0",
        lease_namespace: str = "default",
        lease_name: str = LEASE_NAME,
        env: Mapping[str, str] | None = None,
    ) -> OperatorProcess:
        full = [
            f"--kubeconfig={kubeconfig}",
            f"--identity={identity}",
            f"--lease-namespace={lease_namespace}",
            f"--lease-name={lease_name}",
            "--lease-duration=4",
            "--lease-renew=0.5",
            "--poll-interval=0.25",
            *args,
        ]
        e = {**self.kube.env(kubeconfig), "PYTHONPATH": PYTHONPATH, "PYTHONUNBUFFERED": "1", **(env or {})}
        op = OperatorProcess(full, e, self.workdir / f"operator-{identity}-{len(self.started)}.log").start()
        self.started.append(op)
        return op

    def start_provisioning(
        self, kubeconfig: Path, operator_namespace: str, settings: Mapping[str, Any], token: str
    ) -> OperatorProcess:
        """One operator as the chart runs it with the provisioner on: Gateway API, no chart gateway, its data planes
        per the settings file (`settings`, tests.support.provision.settings_doc), publishing with `token`."""
        settings_file = self.workdir / "settings.json"
        settings_file.write_text(json.dumps(dict(settings)))
        token_file = self.workdir / "token"
        token_file.write_text(token + "\n")
        args = [
            "--leader-election=false",
            "--gateway-api=true",
            "--gateway-service=no-chart-gateway",
            f"--gateway-namespace={operator_namespace}",
            f"--dataplane-settings={settings_file}",
            f"--token-file={token_file}",
            "--publish-timeout=2",
        ]
        return self.start(kubeconfig, args=args)

    def stop_all(self) -> None:
        for op in self.started:
            op.stop()
            # Shown by pytest only when the test failed.
            print(f"--- {op.log_path.name} (exit {op.proc.returncode if op.proc else None}) ---\n{op.log_tail(60)}")


@pytest.fixture
def operators(kube: ControlPlane, tmp_path: Path) -> Iterator[Operators]:
    ops = Operators(kube, tmp_path)
    try:
        yield ops
    finally:
        ops.stop_all()


DATAPLANE_KINDS = "deployments,services,poddisruptionbudgets,networkpolicies,secrets,configmaps"


def provisioned_objects(kube: ControlPlane, namespace: str, selector: str) -> dict[str, dict[str, Any]]:
    """kind/name → object, for every object of a provisioned data plane's kinds in `namespace` matching `selector`
    (trafficsplit.operator.provision.COMPONENT_SELECTOR)."""
    out = kube.kubectl("get", DATAPLANE_KINDS, "-n", namespace, "-l", selector, "-o", "json").stdout
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in json.loads(out)["items"]}
