"""The operator's memory is bounded by our listeners, not by what tenants create: 300 junk `kubernetes.io/tls`
Secrets (each of the PEM shape a listener's certificate may have, ~170 KiB) in a tenant namespace, referenced by
nothing, leave the real operator's resident memory where it was, and so does a restart with them present.

Before: the operator watched every Secret of the cluster and kept the bytes of each tls one whose shape passed
(171 KiB of RSS per Secret; 300 of them and a restarted operator peaked at 378 MiB against the chart's 256 Mi limit).
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.certs import issue, make_ca
from tests.support.controlplane import ControlPlane
from tests.support.operator import OperatorProcess, Operators, apply, gateway_api_control_plane, get_object
from tests.support.waiting import poll

pytestmark = [pytest.mark.k8s, pytest.mark.slow]

CONTROLLER = "trafficsplit.dev/gateway-controller"
HOST = "shop.example.com"
JUNK = 300


@pytest.fixture(scope="module")
def gwkube() -> Iterator[ControlPlane]:
    with gateway_api_control_plane() as cp:
        yield cp


def _pem_block(label: str, size: int) -> bytes:
    body = base64.b64encode(os.urandom(size)).decode()
    lines = "\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----\n".encode()


def _secret(namespace: str, name: str, crt: bytes, key: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": base64.b64encode(crt).decode(), "tls.key": base64.b64encode(key).decode()},
    }


def _memory(op: OperatorProcess) -> tuple[int, int]:
    """(VmRSS, VmHWM) of the operator process, in KiB."""
    assert op.proc is not None and op.running(), op.log_tail()
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{op.proc.pid}/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def _settled(op: OperatorProcess, seconds: float = 4.0, timeout: float = 60.0) -> tuple[int, int]:
    """Its memory once RSS stopped growing for `seconds` (the watch events or listing taken in)."""
    deadline = time.monotonic() + timeout
    last, since = _memory(op), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = _memory(op)
        if now[0] > last[0] + 1024:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= seconds:
            return now
    return _memory(op)


def test_junk_tls_secrets_in_a_tenant_namespace_do_not_grow_the_operator(gwkube: ControlPlane, tmp_path: Path) -> None:
    kube, ns, tenant = gwkube, "mem-shop", "mem-tenant"
    for n in (ns, tenant):
        kube.kubectl("create", "namespace", n)
    d = Path(tempfile.mkdtemp(prefix="ts-mem-"))
    leaf = issue(d, make_ca(d, "ca"), HOST, server=True, dns=(HOST,), stem="shop")
    kube.kubectl("create", "-f", "-", input=json.dumps(_secret(ns, "shop-cert", leaf.cert.read_bytes(),
                                                                 leaf.key.read_bytes())))  # fmt: skip
    gateway_class = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": "trafficsplit"},
        "spec": {"controllerName": CONTROLLER},
    }
    listener = {
        "name": "https",
        "port": 443,
        "protocol": "HTTPS",
        "hostname": HOST,
        "tls": {"certificateRefs": [{"name": "shop-cert"}]},
    }
    gateway = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "secure", "namespace": ns},
        "spec": {"gatewayClassName": "trafficsplit", "listeners": [listener]},
    }
    apply(kube, yaml.safe_dump(gateway_class))
    apply(kube, yaml.safe_dump(gateway))
    token = tmp_path / "token"
    token.write_text("t" * 32)
    operators = Operators(kube, tmp_path)
    args = [
        "--leader-election=false",
        "--gateway-api=true",
        "--gateway-service=no-chart-gateway",
        f"--gateway-namespace={ns}",
        f"--dataplane-namespace={ns}",
        f"--token-file={token}",
    ]

    def resolved() -> bool:
        listeners = get_object(kube, "gateway", "secure", ns).get("status", {}).get("listeners") or []
        conds = listeners[0]["conditions"] if listeners else []
        return any(c["type"] == "ResolvedRefs" and c["status"] == "True" for c in conds)

    try:
        op = operators.start(kube.kubeconfig, args=args, identity="op-mem")
        poll(resolved, 60, "the HTTPS listener's certificate resolved", 0.2)
        before = _settled(op)

        # Junk: a tenant's tls Secrets of the largest shape a listener's certificate may have, named by no listener.
        crt, key = _pem_block("CERTIFICATE", 47_000), _pem_block("PRIVATE KEY", 47_000)
        junk = [_secret(tenant, f"junk-{i}", crt, key) for i in range(JUNK)]
        size = len(json.dumps(junk[0]))
        for i in range(0, JUNK, 25):  # `create`, not `apply`: no last-applied annotation doubling each one
            kube.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                 "items": junk[i : i + 25]}))  # fmt: skip
        after = _settled(op)

        op.stop()
        op = operators.start(kube.kubeconfig, args=args, identity="op-mem")
        poll(lambda: "leading" in op.log(), 60, "the restarted operator leading", 0.2)
        time.sleep(3)  # its first passes
        restarted = _settled(op)
        assert resolved(), "the listener's certificate lost after the restart"
    finally:
        operators.stop_all()

    mib = 1024.0
    print(
        f"\n{JUNK} junk Secrets of {size / 1024:.0f} KiB each: operator RSS {before[0] / mib:.1f} MiB before, "
        f"{after[0] / mib:.1f} MiB after (peak {after[1] / mib:.1f}); restarted with them present: RSS "
        f"{restarted[0] / mib:.1f} MiB, peak {restarted[1] / mib:.1f} MiB"
    )
    # 300 × ~170 KiB is ~50 MiB: kept, RSS and the restart's peak grow by more than half of a ~70 MiB process.
    assert after[0] < before[0] * 1.15, (before, after)
    assert restarted[1] < before[1] * 1.15, (before, restarted)
