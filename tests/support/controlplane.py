"""A real Kubernetes control plane (etcd + kube-apiserver) for the integration tests, started once per session.

Why: CRD schemas, CEL validation, server-side apply, RBAC and admission are behaviour of the API server itself; a
fake cannot show them. This plugin does what controller-runtime's envtest does: it runs the real binaries (built by
hack/build-controlplane.sh, which is called here when they are missing) on free loopback ports, with a generated CA,
serving cert, admin client cert (O=system:masters) and service-account signing key, and writes a kubeconfig that
kubectl, helm, kopf and the Python ``kubernetes`` client all accept. There is no controller-manager or scheduler:
objects are stored and validated, but nothing reconciles them (namespaces never finish deleting, pods never run).

Fixtures (mark tests ``@pytest.mark.k8s``):

* ``kube`` (session): a :class:`ControlPlane` — ``kubeconfig``, ``server``, ``kubectl(...)``, ``helm(...)``,
  ``token_for_service_account(ns, name)``, ``kubeconfig_for_token(token)``, ``api_client()``.
* ``namespace`` (function): the name of a fresh namespace created for the test.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import itertools
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "build-controlplane.sh"
# The service-account issuer a real cluster uses by default; tokens minted by TokenRequest carry it.
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
_ns_counter = itertools.count(1)
WORK_PREFIX = "trafficsplit-kube-"


@dataclass(frozen=True)
class Binaries:
    """Paths and pinned versions printed by ``hack/build-controlplane.sh --print-env``."""

    kube_apiserver: Path
    etcd: Path
    helm: Path
    kubectl: Path
    kube_version: str
    etcd_version: str
    helm_version: str

    @property
    def bin_dir(self) -> Path:
        return self.kube_apiserver.parent.parent


def ensure_binaries() -> Binaries:
    """Build (or find, in about a second) the pinned binaries. A cold build takes minutes: its output goes live to
    the terminal (stderr is not captured) so a first run does not look hung."""
    go = os.environ.get("GO") or shutil.which("go") or "/usr/local/go/bin/go"
    env = {**os.environ, "GO": go}
    out = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--print-env"], check=True, stdout=subprocess.PIPE, text=True, env=env
    ).stdout
    kv = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    # kubectl is the machine's own (1.32, within the ±1 skew of the 1.33 apiserver); TRAFFICSPLIT_KUBECTL overrides.
    kubectl = os.environ.get("TRAFFICSPLIT_KUBECTL") or shutil.which("kubectl")
    if not kubectl:
        raise RuntimeError("kubectl not found on PATH (set TRAFFICSPLIT_KUBECTL)")
    return Binaries(
        kube_apiserver=Path(kv["KUBE_APISERVER"]),
        etcd=Path(kv["ETCD"]),
        helm=Path(kv["HELM"]),
        kubectl=Path(kubectl),
        kube_version=kv["KUBE_VERSION"],
        etcd_version=kv["ETCD_VERSION"],
        helm_version=kv["HELM_VERSION"],
    )


# --- certificates ----------------------------------------------------------------------------------------------------


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(0o600)


def _cert(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    server_ips: Sequence[str] = (),
    server_dns: Sequence[str] = (),
    client: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    b = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # tolerate small clock skew
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        b = b.add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        ).add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server_ips or server_dns else []) + (
            [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        )
        b = b.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        if server_ips or server_dns:
            import ipaddress

            sans: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in server_ips]
            sans += [x509.DNSName(d) for d in server_dns]
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


@dataclass(frozen=True)
class _Pki:
    ca: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_key: Path
    sa_pub: Path


def _make_pki(d: Path) -> _Pki:
    d.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "trafficsplit-test-ca")])
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    (d / "ca.crt").write_bytes(ca.public_bytes(pem))

    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv = _cert(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
        srv_key,
        ca_name,
        ca_key,
        server_ips=["127.0.0.1"],
        server_dns=["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"],
    )
    (d / "apiserver.crt").write_bytes(srv.public_bytes(pem))
    _write_key(d / "apiserver.key", srv_key)

    # O=system:masters is the group the default RBAC policy binds to cluster-admin.
    adm_key = ec.generate_private_key(ec.SECP256R1())
    adm = _cert(
        x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                x509.NameAttribute(NameOID.COMMON_NAME, "trafficsplit-test-admin"),
            ]
        ),
        adm_key,
        ca_name,
        ca_key,
        client=True,
    )
    (d / "admin.crt").write_bytes(adm.public_bytes(pem))
    _write_key(d / "admin.key", adm_key)

    # RSA, since RS256 is the signing algorithm every token consumer supports.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(d / "sa.key", sa_key)
    (d / "sa.pub").write_bytes(sa_key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo))
    return _Pki(
        ca=d / "ca.crt",
        serving_cert=d / "apiserver.crt",
        serving_key=d / "apiserver.key",
        admin_cert=d / "admin.crt",
        admin_key=d / "admin.key",
        sa_key=d / "sa.key",
        sa_pub=d / "sa.pub",
    )


# --- the control plane -----------------------------------------------------------------------------------------------


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (the kernel picks it; the tiny race until the server binds is accepted)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_kubeconfig(
    path: Path, server: str, ca: Path, *, user: dict[str, str], context: str = "trafficsplit-test"
) -> Path:
    """A kubeconfig with one cluster/user/context, file references absolute (kopf and the Python client need that)."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": context, "user": user}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context, "namespace": "default"}}],
        "current-context": context,
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path


@dataclass(frozen=True)
class ControlPlane:
    """A running etcd + kube-apiserver. All helpers use this control plane's kubeconfig, never the user's."""

    kubeconfig: Path
    server: str
    bin_dir: Path
    ca_file: Path
    admin_cert: Path
    admin_key: Path
    namespace_prefix: str
    kubectl_bin: Path
    helm_bin: Path
    kube_version: str
    helm_version: str
    work_dir: Path
    # Kills the kube-apiserver and starts it again on the same port and etcd (its data survives); waits until ready.
    restart_apiserver: Callable[[], None] = field(default=lambda: None, compare=False, repr=False)

    def env(self, kubeconfig: Path | None = None) -> dict[str, str]:
        """Environment for a child process (kubectl, helm, the operator) that points at this control plane."""
        return {
            **os.environ,
            "KUBECONFIG": str(kubeconfig or self.kubeconfig),
            # Helm keeps caches and repo config per user; isolate them so tests neither read nor pollute ~/.
            "HELM_CACHE_HOME": str(self.work_dir / "helm" / "cache"),
            "HELM_CONFIG_HOME": str(self.work_dir / "helm" / "config"),
            "HELM_DATA_HOME": str(self.work_dir / "helm" / "data"),
        }

    def _run(
        self, argv: list[str], *, input: str | None, check: bool, timeout: float, kubeconfig: Path | None
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            argv, input=input, capture_output=True, text=True, env=self.env(kubeconfig), timeout=timeout
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{' '.join(argv)} exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
            )
        return proc

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = 60,
        kubeconfig: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this control plane; ``check`` raises with stdout/stderr on a non-zero exit."""
        return self._run(
            [str(self.kubectl_bin), *args], input=input, check=check, timeout=timeout, kubeconfig=kubeconfig
        )

    def helm(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = 120,
        kubeconfig: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run the pinned helm against this control plane."""
        return self._run([str(self.helm_bin), *args], input=input, check=check, timeout=timeout, kubeconfig=kubeconfig)

    def create_namespace(self, hint: str = "t") -> str:
        """Create and return a namespace with a name unique to this session (names are never reused: without a
        controller-manager a deleted namespace stays Terminating forever)."""
        hint = "".join(c if c.isalnum() else "-" for c in hint.lower()).strip("-")[:30] or "t"
        name = f"{self.namespace_prefix}{next(_ns_counter)}-{hint}".rstrip("-")[:63].rstrip("-")
        self.kubectl("create", "namespace", name)
        return name

    def token_for_service_account(
        self, namespace: str, name: str, *, create: bool = True, duration: str = "1h", audience: str | None = None
    ) -> str:
        """A bearer token for ServiceAccount ``namespace/name`` via the TokenRequest API (the apiserver signs it, so
        no controller is needed). ``create`` makes the ServiceAccount first when it does not exist."""
        if create:
            manifest = f"apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: {name}, namespace: {namespace}}}\n"
            self.kubectl("apply", "-f", "-", input=manifest)
        args = ["create", "token", name, "-n", namespace, f"--duration={duration}"]
        if audience:
            args.append(f"--audience={audience}")
        return self.kubectl(*args).stdout.strip()

    def kubeconfig_for_token(self, token: str, name: str | None = None) -> Path:
        """A kubeconfig for the same server that authenticates with ``token`` (e.g. a restricted ServiceAccount)."""
        d = self.work_dir / "kubeconfigs"
        d.mkdir(exist_ok=True)
        path = d / f"{name or secrets.token_hex(4)}.yaml"
        return write_kubeconfig(path, self.server, self.ca_file, user={"token": token})

    def api_client(self, kubeconfig: Path | None = None) -> ApiClient:
        """A Python ``kubernetes`` ApiClient for this control plane (a new one per call; close it when done)."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(kubeconfig or self.kubeconfig))


def _tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _die_with_parent() -> None:
    """Runs in the child before exec: ask the kernel to SIGTERM it when pytest dies. A session killed by a timeout or
    Ctrl-C twice runs no finalizers, and etcd/apiserver (in their own process group) would otherwise live on."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _sweep_stale_work_dirs() -> None:
    """Remove data dirs of earlier sessions that died without teardown (the pid is part of the name)."""
    for d in Path(tempfile.gettempdir()).glob(f"{WORK_PREFIX}*"):
        pid = d.name[len(WORK_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(d, ignore_errors=True)


def _stop(proc: subprocess.Popen[Any] | None, timeout: float = 10) -> None:
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout)


def _wait_http(
    url: str, ctx: ssl.SSLContext | None, proc: subprocess.Popen[Any], timeout: float, what: str, log: Path
) -> None:
    deadline = time.monotonic() + timeout
    last = "no attempt"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} during start-up; log tail:\n{_tail(log)}")
        try:
            with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:
                if resp.status == 200:
                    return
                last = f"HTTP {resp.status}"
        except urllib.error.HTTPError as e:
            last = f"HTTP {e.code}: {e.read()[:2000].decode(errors='replace')}"
        except OSError as e:
            last = repr(e)
        time.sleep(0.2)
    raise RuntimeError(f"{what} not ready at {url} after {timeout:.0f}s (last: {last}); log tail:\n{_tail(log)}")


@contextlib.contextmanager
def control_plane(binaries: Binaries | None = None, *, start_timeout: float = 90) -> Iterator[ControlPlane]:
    """Start etcd + kube-apiserver, yield a :class:`ControlPlane`, then stop both and delete their data."""
    bins = binaries or ensure_binaries()
    _sweep_stale_work_dirs()
    work = Path(tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{os.getpid()}-"))
    etcd_proc: subprocess.Popen[bytes] | None = None
    api_proc: subprocess.Popen[bytes] | None = None
    try:
        pki = _make_pki(work / "pki")
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        etcd_url, peer_url = f"http://127.0.0.1:{etcd_port}", f"http://127.0.0.1:{peer_port}"
        etcd_log = work / "etcd.log"
        with etcd_log.open("wb") as out:
            etcd_proc = subprocess.Popen(
                [
                    str(bins.etcd),
                    "--name=default",
                    f"--data-dir={work / 'etcd'}",
                    f"--listen-client-urls={etcd_url}",
                    f"--advertise-client-urls={etcd_url}",
                    f"--listen-peer-urls={peer_url}",
                    f"--initial-advertise-peer-urls={peer_url}",
                    f"--initial-cluster=default={peer_url}",
                    # Test data is thrown away: skipping fsync makes every write several times faster.
                    "--unsafe-no-fsync=true",
                    "--log-level=warn",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, so teardown kills only what we started
                preexec_fn=_die_with_parent,
            )
        _wait_http(f"{etcd_url}/health", None, etcd_proc, start_timeout, "etcd", etcd_log)

        server = f"https://127.0.0.1:{api_port}"
        api_log = work / "kube-apiserver.log"
        api_argv = [
            str(bins.kube_apiserver),
            f"--etcd-servers={etcd_url}",
            f"--cert-dir={work / 'certs'}",
            "--bind-address=127.0.0.1",
            f"--secure-port={api_port}",
            # The machine may have no default route; without these the apiserver cannot pick an address
            # to advertise and keeps trying to reconcile the `kubernetes` Service's endpoints.
            "--advertise-address=127.0.0.1",
            "--endpoint-reconciler-type=none",
            "--service-cluster-ip-range=10.0.0.0/24",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca}",
            "--authorization-mode=RBAC",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-account-issuer={SA_ISSUER}",
            "--allow-privileged=true",
            # Without a token controller no `default` ServiceAccount appears, and this admission plugin would
            # then refuse every Pod; tests create Pods only as stored objects.
            "--disable-admission-plugins=ServiceAccount",
            "--v=1",
        ]
        ctx = ssl.create_default_context(cafile=str(pki.ca))
        ctx.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))

        def start_api() -> subprocess.Popen[bytes]:
            with api_log.open("ab") as out:
                proc = subprocess.Popen(
                    api_argv,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=_die_with_parent,
                )
            # /readyz covers etcd, informer sync and the RBAC bootstrap roles: after it, cluster-admin works.
            _wait_http(f"{server}/readyz", ctx, proc, start_timeout, "kube-apiserver", api_log)
            return proc

        api_proc = start_api()

        def restart_apiserver() -> None:
            nonlocal api_proc
            assert api_proc is not None
            api_proc.kill()
            api_proc.wait()
            api_proc = None
            api_proc = start_api()

        kubeconfig = write_kubeconfig(
            work / "kubeconfig",
            server,
            pki.ca,
            user={"client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key)},
        )
        yield ControlPlane(
            kubeconfig=kubeconfig,
            server=server,
            bin_dir=bins.bin_dir,
            ca_file=pki.ca,
            admin_cert=pki.admin_cert,
            admin_key=pki.admin_key,
            namespace_prefix=f"t{secrets.token_hex(2)}-",
            kubectl_bin=bins.kubectl,
            helm_bin=bins.helm,
            kube_version=bins.kube_version,
            helm_version=bins.helm_version,
            work_dir=work,
            restart_apiserver=restart_apiserver,
        )
    finally:
        _stop(api_proc)
        _stop(etcd_proc)
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="session")
def kube() -> Iterator[ControlPlane]:
    """The session's control plane (built on first use; started once; stopped and deleted at session end)."""
    with control_plane() as cp:
        yield cp


@pytest.fixture
def namespace(kube: ControlPlane, request: pytest.FixtureRequest) -> str:
    """A fresh namespace for this test, named after it. Not deleted: deletion would never finish (see module doc)."""
    return kube.create_namespace(request.node.name)
