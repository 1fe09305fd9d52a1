"""A real single-node Kubernetes on this machine, for the end-to-end tier: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, containerd, kubelet, kube-proxy (iptables mode) and kube-router
(NetworkPolicy only), running pods from images built by hack/build-images.sh.
No Docker, no registry, no traffic off the machine.

Addresses are the fixture's own: the node is 10.250.0.1/32 on an empty bridge (``tsnode0``; this kernel has no
``dummy`` links), pods live on 10.244.0.0/24 behind the CNI bridge ``tscni0``, Services on 10.96.0.0/16 with a host
route to ``tsnode0`` so ClusterIP traffic can never leave through the machine's real interface. Ports are fixed
(6443, 10250, …): one node per machine, guarded by a lock file.

Leaving the machine clean is part of the contract (docs/testing.md, "The node"): teardown deletes
pods while the kubelet still runs, stops every process it started by PID, ends shims that re-parented to PID 1 (found
by their ``-address <our socket>`` argument), unmounts everything under its directories and the CNI network
namespaces it created, removes the iptables chains, ipsets and nft tables that did not exist before, the host paths the
kubelet and containerd write outside their configured directories, the kubepods cgroups and the two links, and puts
back the host sysctls. What it found before it started is saved in ``state.json`` in its work dir, so a session that
was killed (no finalizers) is cleaned up by the next one before it starts.

A component that does not come up fails the fixture within 60 s with the last 50 lines of its log; on a failure every
component's log is copied to ``$E2E_ARTIFACTS`` (default ``./e2e-artifacts``).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import platform
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from tests.support.controlplane import (
    REPO_ROOT,
    SA_ISSUER,
    ControlPlane,
    _cert,
    _die_with_parent,
    _write_key,
    ensure_binaries,
    write_kubeconfig,
)

NODE_NAME = "trafficsplit-node"
NODE_IP = "10.250.0.1"
NODE_LINK = "tsnode0"
POD_CIDR = "10.244.0.0/24"
CLUSTER_CIDR = "10.244.0.0/16"
CNI_BRIDGE = "tscni0"
SERVICE_CIDR = "10.96.0.0/16"
API_PORT = 6443
WORK_PREFIX = "trafficsplit-node-"
LOCK_FILE = Path("/run/lock/trafficsplit-node.lock")
START_TIMEOUT = 60.0
LOG_TAIL = 50
# Sysctls the kubelet, kube-proxy and kube-router change (or that pod traffic through the bridge needs); put back.
SYSCTLS = (
    "kernel.panic",
    "kernel.panic_on_oops",
    "vm.overcommit_memory",
    "net.ipv4.ip_forward",
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
    "net.ipv4.conf.all.route_localnet",
)
# Paths the kubelet, containerd's shims and libcni write outside the directories they are given.
HOST_PATHS = (
    "/var/lib/kubelet",
    "/usr/libexec/kubernetes",
    "/var/log/pods",
    "/var/log/containers",
    "/run/containerd",
    "/var/lib/cni",
)
# iptables chains created by kube-proxy, the kubelet, kube-router and the CNI portmap plugin.
CHAIN_PREFIXES = ("KUBE-", "CNI-")
IPSET_PREFIXES = ("KUBE-", "kube-router-", "inet6:")


def unavailable_reason() -> str | None:
    """Why the local node cannot run here, or None. The tier runs on Linux as root; elsewhere it skips with this."""
    if platform.system() != "Linux":
        return f"local node: needs Linux (this is {platform.system()})"
    if os.geteuid() != 0:
        return "local node: needs root (it runs containerd, the kubelet and kube-proxy)"
    return None


def _run(
    argv: Sequence[str], *, check: bool = True, timeout: float = 60, **kw: Any
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def _tail(path: Path, lines: int = LOG_TAIL) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# --- binaries and images ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeBinaries:
    kubelet: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kube_proxy: Path
    kube_router: Path
    pause: Path


def print_env(script: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """Run a hack/ build script with --print-env (its progress goes live to the terminal) and parse NAME=value."""
    out = subprocess.run(
        ["bash", str(REPO_ROOT / "hack" / script), "--print-env"],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def ensure_node_binaries() -> NodeBinaries:
    kv = print_env("build-node.sh")
    return NodeBinaries(
        kubelet=Path(kv["KUBELET"]),
        kube_controller_manager=Path(kv["KUBE_CONTROLLER_MANAGER"]),
        kube_scheduler=Path(kv["KUBE_SCHEDULER"]),
        kube_proxy=Path(kv["KUBE_PROXY"]),
        kube_router=Path(kv["KUBE_ROUTER"]),
        pause=Path(kv["PAUSE"]),
    )


@dataclass(frozen=True)
class Images:
    """docker-archive files (hack/build-images.sh) and the names they import as (localhost/trafficsplit/<n>:<tag>)."""

    archives: dict[str, Path]
    tag: str

    def ref(self, name: str) -> str:
        return f"localhost/trafficsplit/{name}:{self.tag}"

    def repository(self, name: str) -> str:
        return f"localhost/trafficsplit/{name}"


def ensure_images(pause: Path) -> Images:
    # The progressive-delivery controllers (Go, cached like the node's binaries) go into images of their own: Argo
    # Rollouts' stock one (tests/e2e/test_10_argo_rollouts.py) and Flagger's (test_11_flagger.py). make test
    # starts their builds in the background; these calls wait for them (each build holds a lock) or find them cached.
    argo = print_env("build-argo-rollouts.sh")
    flagger = print_env("build-flagger.sh")["FLAGGER"]
    # The in-cluster Prometheus (test_11_flagger.py): upstream's, built the same way (Debian's has no Kubernetes SD).
    prometheus = print_env("build-prometheus.sh")["PROMETHEUS"]
    kv = print_env("build-images.sh", {"PAUSE": str(pause), **argo, "FLAGGER": flagger, "PROMETHEUS": prometheus})
    names = ("pause", "envoy", "echo", "operator", "extproc", "flagger", "argo-rollouts", "prometheus")
    return Images(archives={n: Path(kv[f"{n.upper().replace('-', '_')}_IMAGE"]) for n in names}, tag=kv["IMAGE_TAG"])


# --- host state: what existed before, and putting it back ------------------------------------------------------------


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def _read_sysctls() -> dict[str, str]:
    out = {}
    for name in SYSCTLS:
        with contextlib.suppress(OSError):
            out[name] = _sysctl_path(name).read_text().strip()
    return out


def _nft_tables() -> list[str]:
    proc = _run(["nft", "list", "tables"], check=False)
    return [line.removeprefix("table ").strip() for line in proc.stdout.splitlines() if line.startswith("table ")]


def _ipsets() -> list[str]:
    if not shutil.which("ipset"):
        return []
    return _run(["ipset", "list", "-n"], check=False).stdout.split()


@dataclass
class HostState:
    """What the machine looked like before the node started: restored (or removed) at teardown."""

    sysctls: dict[str, str]
    nft_tables: list[str]
    ipsets: list[str]
    paths: dict[str, bool]
    netns: list[str]

    @classmethod
    def capture(cls) -> HostState:
        netns_dir = Path("/run/netns")
        return cls(
            sysctls=_read_sysctls(),
            nft_tables=_nft_tables(),
            ipsets=_ipsets(),
            paths={p: os.path.lexists(p) for p in HOST_PATHS},
            netns=sorted(p.name for p in netns_dir.iterdir()) if netns_dir.is_dir() else [],
        )

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.__dict__, indent=1))

    @classmethod
    def load(cls, path: Path) -> HostState:
        return cls(**json.loads(path.read_text()))


def _pids_of(pattern: Callable[[list[str]], bool]) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if pattern([a.decode(errors="replace") for a in argv if a]):
            pids.append(int(d.name))
    return pids


def _kill_pids(pids: Sequence[int], timeout: float = 10) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
        time.sleep(0.1)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _unmount_under(prefixes: Sequence[str]) -> None:
    """Unmount every mount point under the given directories, deepest first (lazy: a busy mount still goes)."""
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mnt = line.split()[4].encode().decode("unicode_escape")
        if any(mnt == p or mnt.startswith(p.rstrip("/") + "/") for p in prefixes):
            mounts.append(mnt)
    for mnt in sorted(set(mounts), key=len, reverse=True):
        _run(["umount", "-l", mnt], check=False)


def _clean_iptables() -> None:
    """Remove every chain with a KUBE-/CNI- name and the rules that jump to them, in both families and every table.
    The fixture's node is the only Kubernetes on the machine (the lock), so these names are all its own."""
    for save, cmd in (("iptables-save", "iptables"), ("ip6tables-save", "ip6tables")):
        dump = _run([save], check=False).stdout
        table = ""
        ours: dict[str, list[str]] = {}
        deletes: list[tuple[str, list[str]]] = []
        for line in dump.splitlines():
            if line.startswith("*"):
                table = line[1:]
                ours.setdefault(table, [])
            elif line.startswith(":"):
                chain = line[1:].split()[0]
                if chain.startswith(CHAIN_PREFIXES):
                    ours[table].append(chain)
            elif line.startswith("-A "):
                parts = line.split()
                chain = parts[1]
                target = parts[parts.index("-j") + 1] if "-j" in parts else ""
                if not chain.startswith(CHAIN_PREFIXES) and target.startswith(CHAIN_PREFIXES):
                    deletes.append((table, line[3:].split()))
        for table, rule in deletes:
            # Re-parse with the shell's quoting rules: comments carry quoted spaces.
            import shlex

            _run([cmd, "-w", "-t", table, "-D", *shlex.split(" ".join(rule))], check=False)
        for table, chains in ours.items():
            for chain in chains:
                _run([cmd, "-w", "-t", table, "-F", chain], check=False)
            for chain in chains:
                _run([cmd, "-w", "-t", table, "-X", chain], check=False)


def restore_host(state: HostState, work: Path) -> list[str]:
    """Put the machine back as ``state`` found it. Returns what could not be undone (empty when clean)."""
    problems: list[str] = []
    sock = str(work / "containerd" / "containerd.sock")
    # Shims re-parent to PID 1 and outlive containerd; theirs carry our socket in `-address`.
    _kill_pids(_pids_of(lambda argv: "-address" in argv and sock in argv))
    # Container processes left by killed shims: anything whose cgroup is under kubepods.
    _kill_pids(_kubepods_pids())
    _unmount_under([str(work), "/var/lib/kubelet", "/run/containerd"])
    netns_dir = Path("/run/netns")
    if netns_dir.is_dir():
        for ns in netns_dir.iterdir():
            if ns.name.startswith("cni-") and ns.name not in state.netns:
                _run(["umount", "-l", str(ns)], check=False)
                with contextlib.suppress(OSError):
                    ns.unlink()
    _clean_iptables()
    for t in _nft_tables():
        if t not in state.nft_tables:
            _run(["nft", "delete", "table", *t.split()], check=False)
    for s in _ipsets():
        if s not in state.ipsets and s.startswith(IPSET_PREFIXES):
            _run(["ipset", "destroy", s], check=False)
    for link in (CNI_BRIDGE, NODE_LINK):
        _run(["ip", "link", "del", link], check=False)
    for d in _kubepods_cgroups():
        with contextlib.suppress(OSError):
            d.rmdir()
    for p, existed in state.paths.items():
        if not existed and os.path.lexists(p):
            _unmount_under([p])
            shutil.rmtree(p, ignore_errors=True)
            if os.path.lexists(p):
                problems.append(f"could not remove {p}")
    for name, value in state.sysctls.items():
        try:
            if _sysctl_path(name).read_text().strip() != value:
                _sysctl_path(name).write_text(value)
        except OSError as e:
            problems.append(f"sysctl {name}: {e}")
    return problems


def _kubepods_cgroups() -> list[Path]:
    """Every kubepods cgroup directory in every v1 hierarchy, deepest first (rmdir needs the leaves gone first)."""
    found: list[Path] = []
    for top in Path("/sys/fs/cgroup").iterdir():
        kp = top / "kubepods"
        if kp.is_dir():
            found.extend(p for p in kp.rglob("*") if p.is_dir())
            found.append(kp)
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def _kubepods_pids() -> list[int]:
    pids: set[int] = set()
    for d in _kubepods_cgroups():
        with contextlib.suppress(OSError):
            pids.update(int(x) for x in (d / "cgroup.procs").read_text().split())
    return sorted(pids)


def sweep_stale() -> None:
    """Clean up after node sessions that died without teardown (their pid is gone): restore from their state.json."""
    for d in Path(tempfile.gettempdir()).glob(f"{WORK_PREFIX}*"):
        pid = d.name[len(WORK_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        state_file = d / "state.json"
        if state_file.exists():
            restore_host(HostState.load(state_file), d)
        _unmount_under([str(d)])
        shutil.rmtree(d, ignore_errors=True)


# --- certificates ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodePki:
    dir: Path

    def __getattr__(self, name: str) -> Path:  # pki.ca_crt → dir/ca.crt, pki.admin_key → dir/admin.key
        stem, _, ext = name.rpartition("_")
        return self.dir / f"{stem.replace('_', '-')}.{ext}"


def make_node_pki(d: Path) -> NodePki:
    """A CA and the certificates of this node's parts. The controllers, kube-proxy and kube-router run as
    cluster-admin (O=system:masters): the product's RBAC is under test here, not theirs. The kubelet has a real node
    identity, so the Node authorizer and NodeRestriction apply to it as on any cluster."""
    d.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "trafficsplit-node-ca")])
    (d / "ca.crt").write_bytes(_cert(ca_name, ca_key, ca_name, ca_key, ca=True).public_bytes(pem))

    def issue(stem: str, cn: str, org: str | None = None, *, ips: Sequence[str] = (), dns: Sequence[str] = ()) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = ([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)] if org else []) + [
            x509.NameAttribute(NameOID.COMMON_NAME, cn)
        ]
        cert = _cert(x509.Name(attrs), key, ca_name, ca_key, server_ips=ips, server_dns=dns, client=not ips)
        (d / f"{stem}.crt").write_bytes(cert.public_bytes(pem))
        _write_key(d / f"{stem}.key", key)

    first_service_ip = str(next(ipaddress.ip_network(SERVICE_CIDR).hosts()))
    issue(
        "apiserver",
        "kube-apiserver",
        ips=[NODE_IP, first_service_ip, "127.0.0.1"],
        dns=[
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ],
    )
    issue("kubelet-serving", NODE_NAME, ips=[NODE_IP], dns=[NODE_NAME])
    issue("admin", "trafficsplit-node-admin", "system:masters")
    issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters")
    issue("node", f"system:node:{NODE_NAME}", "system:nodes")
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(d / "sa.key", sa_key)
    (d / "sa.pub").write_bytes(sa_key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo))
    return NodePki(d)


# --- processes -------------------------------------------------------------------------------------------------------


@dataclass
class Component:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path


@dataclass
class Processes:
    work: Path
    running: list[Component] = field(default_factory=list)

    def start(self, name: str, argv: Sequence[str | Path], **kw: Any) -> Component:
        log = self.work / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [str(a) for a in argv],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: teardown ends exactly what it started
                preexec_fn=_die_with_parent,
                **kw,
            )
        comp = Component(name, proc, log)
        self.running.append(comp)
        return comp

    def stop(self, name: str, timeout: float = 15) -> None:
        for comp in [c for c in self.running if c.name == name]:
            if comp.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(comp.proc.pid, signal.SIGTERM)
                try:
                    comp.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(comp.proc.pid, signal.SIGKILL)
                    comp.proc.wait(timeout)
            self.running.remove(comp)


def wait_up(comp: Component, probe: Callable[[], bool], what: str, timeout: float = START_TIMEOUT) -> None:
    """Poll ``probe`` until it holds; fail with the component's log tail when it exits or the timeout passes."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        if comp.proc.poll() is not None:
            raise RuntimeError(
                f"{comp.name} exited with {comp.proc.returncode} during start-up; last {LOG_TAIL} lines of "
                f"{comp.log}:\n{_tail(comp.log)}"
            )
        try:
            if probe():
                return
        except Exception as e:
            last = e
        time.sleep(0.3)
    raise RuntimeError(
        f"{comp.name} not {what} after {timeout:.0f}s (last probe error: {last!r}); last {LOG_TAIL} lines of "
        f"{comp.log}:\n{_tail(comp.log)}"
    )


def _https_ok(url: str, ctx: ssl.SSLContext) -> bool:
    with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:
        return bool(resp.status == 200)


def _insecure() -> ssl.SSLContext:
    # The controllers' /healthz serve self-signed certificates they generate themselves.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


# --- the node --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LocalNode:
    """A running node. ``cp`` gives kubectl/helm against it (the admin kubeconfig); ``images`` the image names."""

    cp: ControlPlane
    images: Images
    work: Path
    containerd_sock: Path
    started_seconds: float

    @property
    def kubeconfig(self) -> Path:
        return self.cp.kubeconfig

    def ctr(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return _run(["ctr", "--address", str(self.containerd_sock), "-n", "k8s.io", *args], timeout=timeout)


def _write_configs(work: Path, pki: NodePki, images: Images, kubeconfigs: dict[str, Path]) -> dict[str, Path]:
    cfg = work / "config"
    cfg.mkdir(parents=True, exist_ok=True)
    cd = work / "containerd"
    # containerd 1.6's CRI settings (docs/testing.md, "The node"): restrict_oom_score_adj is what lets any sandbox start
    # here.
    containerd_toml = f"""version = 2
root = "{cd / "root"}"
state = "{cd / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "{cd / "containerd.sock"}"
[ttrpc]
  address = "{cd / "containerd.sock.ttrpc"}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{cd / "opt"}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{images.ref("pause")}"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{work / "cni" / "net.d"}"
"""
    (cfg / "containerd.toml").write_text(containerd_toml)
    netd = work / "cni" / "net.d"
    netd.mkdir(parents=True, exist_ok=True)
    conflist = {
        "cniVersion": "1.0.0",
        "name": "trafficsplit",
        "plugins": [
            {
                "type": "bridge",
                "bridge": CNI_BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(work / "cni" / "ipam"),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    (netd / "10-trafficsplit.conflist").write_text(json.dumps(conflist, indent=1))
    kubelet = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": NODE_IP,
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "tlsCertFile": str(pki.kubelet_serving_crt),
        "tlsPrivateKeyFile": str(pki.kubelet_serving_key),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(pki.ca_crt)},
        },
        "authorization": {"mode": "Webhook"},
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "resolvConf": "",
        "containerRuntimeEndpoint": f"unix://{cd / 'containerd.sock'}",
        "serializeImagePulls": False,
        # No image is ever pulled: never let the image GC delete one that was imported.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        # A busy shared disk must not evict the test's pods.
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "rotateCertificates": False,
        "registerNode": True,
        "maxPods": 110,
        "shutdownGracePeriod": "0s",
    }
    (cfg / "kubelet.yaml").write_text(yaml.safe_dump(kubelet))
    proxy = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfigs["admin"])},
        "mode": "iptables",
        "clusterCIDR": CLUSTER_CIDR,
        "hostnameOverride": NODE_NAME,
        "bindAddress": NODE_IP,
        "healthzBindAddress": f"{NODE_IP}:10256",
        "metricsBindAddress": f"{NODE_IP}:10249",
        "nodePortAddresses": [f"{NODE_IP}/32"],
        "iptables": {"localhostNodePorts": False},
        # Zero: kube-proxy leaves the host's conntrack sysctls alone.
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
    }
    (cfg / "kube-proxy.yaml").write_text(yaml.safe_dump(proxy))
    return {
        "containerd": cfg / "containerd.toml",
        "kubelet": cfg / "kubelet.yaml",
        "kube-proxy": cfg / "kube-proxy.yaml",
    }


def _setup_links() -> None:
    """The node's address on an empty bridge, and the Service range routed to it (never out of the machine)."""
    _run(["ip", "link", "add", NODE_LINK, "type", "bridge"])
    _run(["ip", "addr", "add", f"{NODE_IP}/32", "dev", NODE_LINK])
    _run(["ip", "link", "set", NODE_LINK, "up"])
    _run(["ip", "route", "add", SERVICE_CIDR, "dev", NODE_LINK, "src", NODE_IP])


def _save_artifacts(work: Path) -> Path:
    dest = Path(os.environ.get("E2E_ARTIFACTS") or REPO_ROOT / "e2e-artifacts") / "local-node"
    dest.mkdir(parents=True, exist_ok=True)
    for log in (work / "logs").glob("*.log"):
        shutil.copy2(log, dest / log.name)
    return dest


def _collect_cluster_state(work: Path) -> None:
    """What the cluster looked like at the failure: objects, events, and every container's log (into logs/)."""
    kubeconfig = work / "kubeconfig"
    if not kubeconfig.exists():
        return
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    logs = work / "logs"
    logs.mkdir(exist_ok=True)
    with (logs / "cluster-state.log").open("w") as out:
        for args in (
            ["get", "nodes,pods,services,endpointslices,networkpolicies,pdb,leases", "-A", "-o", "wide"],
            ["get", "trafficsplits", "-A", "-o", "yaml"],
            ["get", "events", "-A", "--sort-by=.lastTimestamp"],
            ["describe", "pods", "-A"],
        ):
            proc = _run(["kubectl", *args], check=False, env=env, timeout=60)
            out.write(f"$ kubectl {' '.join(args)}\n{proc.stdout}{proc.stderr}\n")
    pods = _run(["kubectl", "get", "pods", "-A", "-o", "json"], check=False, env=env).stdout or "{}"
    for pod in json.loads(pods).get("items", []):
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        proc = _run(["kubectl", "logs", "-n", ns, name, "--all-containers", "--prefix"], check=False, env=env)
        (logs / f"pod-{ns}-{name}.log").write_text(proc.stdout + proc.stderr)


@contextlib.contextmanager
def local_node(*, keep_logs: Callable[[], bool] = lambda: False) -> Iterator[LocalNode]:
    """Build what is missing, start the node, yield it, tear it down and put the machine back."""
    reason = unavailable_reason()
    if reason:
        raise RuntimeError(reason)
    for tool in ("containerd", "runc", "ctr", "iptables", "nft", "ipset", "conntrack"):
        if not shutil.which(tool):
            raise RuntimeError(f"local node: {tool} is not installed (hack/test.sh installs the node's packages)")
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    lock = LOCK_FILE.open("w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise RuntimeError(f"local node: another session holds {LOCK_FILE} (one node per machine)") from None
    sweep_stale()
    bins = ensure_binaries()
    node_bins = ensure_node_binaries()
    images = ensure_images(node_bins.pause)

    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{os.getpid()}-"))
    state = HostState.capture()
    state.save(work / "state.json")
    procs = Processes(work)
    failed = True
    # SIGTERM (a CI timeout, `kill`) must run the teardown below, not end the interpreter on the spot.
    previous = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        node = _start(work, procs, bins, node_bins, images, state, t0)
        yield node
        failed = False
    finally:
        keep = failed or keep_logs()
        try:
            if keep:
                _collect_cluster_state(work)
            _teardown(work, procs)
        finally:
            problems = restore_host(state, work)
            if keep:
                print(f"\nlocal node: component logs kept in {_save_artifacts(work)}")
            _unmount_under([str(work)])
            shutil.rmtree(work, ignore_errors=True)
            signal.signal(signal.SIGTERM, previous)
            lock.close()
            if problems:
                print("local node: teardown left: " + "; ".join(problems))


def _raise_keyboard_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _start(
    work: Path,
    procs: Processes,
    bins: Any,
    node_bins: NodeBinaries,
    images: Images,
    state: HostState,
    t0: float,
) -> LocalNode:
    pki = make_node_pki(work / "pki")
    server = f"https://{NODE_IP}:{API_PORT}"
    kubeconfigs = {
        "admin": write_kubeconfig(
            work / "kubeconfig",
            server,
            pki.ca_crt,
            user={"client-certificate": str(pki.admin_crt), "client-key": str(pki.admin_key)},
        ),
        "node": write_kubeconfig(
            work / "node.kubeconfig",
            server,
            pki.ca_crt,
            user={"client-certificate": str(pki.node_crt), "client-key": str(pki.node_key)},
        ),
    }
    configs = _write_configs(work, pki, images, kubeconfigs)
    _setup_links()
    for name, value in (
        ("net.ipv4.ip_forward", "1"),  # pod → ClusterIP → pod on the same bridge is routed through the host
        ("net.bridge.bridge-nf-call-iptables", "1"),  # bridged pod ↔ pod traffic meets kube-router's rules
    ):
        _sysctl_path(name).write_text(value)

    etcd_url = f"http://{NODE_IP}:2379"
    etcd = procs.start(
        "etcd",
        [
            bins.etcd,
            "--name=node",
            f"--data-dir={work / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls=http://{NODE_IP}:2380",
            f"--initial-advertise-peer-urls=http://{NODE_IP}:2380",
            f"--initial-cluster=node=http://{NODE_IP}:2380",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ],
    )
    wait_up(etcd, lambda: urllib.request.urlopen(f"{etcd_url}/health", timeout=2).status == 200, "healthy")

    api = procs.start(
        "kube-apiserver",
        [
            bins.kube_apiserver,
            f"--etcd-servers={etcd_url}",
            f"--bind-address={NODE_IP}",
            f"--advertise-address={NODE_IP}",
            f"--secure-port={API_PORT}",
            f"--cert-dir={work / 'apiserver-certs'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--tls-cert-file={pki.apiserver_crt}",
            f"--tls-private-key-file={pki.apiserver_key}",
            f"--client-ca-file={pki.ca_crt}",
            f"--kubelet-client-certificate={pki.apiserver_kubelet_client_crt}",
            f"--kubelet-client-key={pki.apiserver_kubelet_client_key}",
            f"--kubelet-certificate-authority={pki.ca_crt}",
            "--kubelet-preferred-address-types=InternalIP",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-account-issuer={SA_ISSUER}",
            "--allow-privileged=true",
            "--v=1",
        ],
    )
    admin_ctx = ssl.create_default_context(cafile=str(pki.ca_crt))
    admin_ctx.load_cert_chain(str(pki.admin_crt), str(pki.admin_key))
    wait_up(api, lambda: _https_ok(f"{server}/readyz", admin_ctx), "ready")

    cd = work / "containerd"
    cd.mkdir(parents=True, exist_ok=True)
    containerd = procs.start("containerd", ["containerd", "--config", configs["containerd"]])
    sock = cd / "containerd.sock"
    wait_up(
        containerd,
        lambda: _run(["ctr", "--address", str(sock), "version"], check=False, timeout=5).returncode == 0,
        "answering",
    )
    _import_images(sock, images, containerd)

    kcm = procs.start(
        "kube-controller-manager",
        [
            node_bins.kube_controller_manager,
            f"--kubeconfig={kubeconfigs['admin']}",
            f"--authentication-kubeconfig={kubeconfigs['admin']}",
            f"--authorization-kubeconfig={kubeconfigs['admin']}",
            f"--bind-address={NODE_IP}",
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            "--allocate-node-cidrs=true",
            f"--cluster-cidr={CLUSTER_CIDR}",
            "--node-cidr-mask-size=24",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca_crt}",
            "--v=1",
        ],
    )
    sched = procs.start(
        "kube-scheduler",
        [
            node_bins.kube_scheduler,
            f"--kubeconfig={kubeconfigs['admin']}",
            f"--authentication-kubeconfig={kubeconfigs['admin']}",
            f"--authorization-kubeconfig={kubeconfigs['admin']}",
            f"--bind-address={NODE_IP}",
            "--leader-elect=false",
            "--v=1",
        ],
    )
    kubelet = procs.start(
        "kubelet",
        [
            node_bins.kubelet,
            f"--config={configs['kubelet']}",
            f"--kubeconfig={kubeconfigs['node']}",
            f"--root-dir={work / 'kubelet'}",
            f"--node-ip={NODE_IP}",
            f"--hostname-override={NODE_NAME}",
            "--v=1",
        ],
    )
    proxy = procs.start("kube-proxy", [node_bins.kube_proxy, f"--config={configs['kube-proxy']}", "--v=1"])
    wait_up(kcm, lambda: _https_ok(f"https://{NODE_IP}:10257/healthz", _insecure()), "healthy")
    wait_up(sched, lambda: _https_ok(f"https://{NODE_IP}:10259/healthz", _insecure()), "healthy")
    wait_up(
        kubelet, lambda: urllib.request.urlopen("http://127.0.0.1:10248/healthz", timeout=2).status == 200, "healthy"
    )
    wait_up(proxy, lambda: urllib.request.urlopen(f"http://{NODE_IP}:10256/livez", timeout=2).status == 200, "live")

    cp = ControlPlane(
        kubeconfig=kubeconfigs["admin"],
        server=server,
        bin_dir=bins.bin_dir,
        ca_file=pki.ca_crt,
        admin_cert=pki.admin_crt,
        admin_key=pki.admin_key,
        namespace_prefix="e2e-",
        kubectl_bin=bins.kubectl,
        helm_bin=bins.helm,
        kube_version=bins.kube_version,
        helm_version=bins.helm_version,
        work_dir=work,
    )

    def node_ready() -> bool:
        doc = json.loads(cp.kubectl("get", "node", NODE_NAME, "-o", "json", check=False).stdout or "{}")
        conds = {c["type"]: c["status"] for c in doc.get("status", {}).get("conditions", [])}
        return conds.get("Ready") == "True" and bool(doc.get("spec", {}).get("podCIDR"))

    wait_up(kubelet, node_ready, "Ready")
    # kube-router identifies itself by its Node object: start it once the kubelet has registered one.
    router = procs.start(
        "kube-router",
        [
            node_bins.kube_router,
            f"--kubeconfig={kubeconfigs['admin']}",
            f"--hostname-override={NODE_NAME}",
            "--run-firewall=true",
            "--run-router=false",
            "--run-service-proxy=false",
            "--enable-cni=false",
            "--enable-ipv4=true",
            "--enable-ipv6=false",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--health-port=20244",
            "--metrics-port=0",
            "--v=1",
        ],
    )
    wait_up(
        router, lambda: urllib.request.urlopen("http://127.0.0.1:20244/healthz", timeout=2).status == 200, "healthy"
    )
    # Pods need the namespace's default ServiceAccount, which the controller-manager creates a few seconds in.
    wait_up(
        kcm,
        lambda: cp.kubectl("get", "serviceaccount", "default", "-n", "default", check=False).returncode == 0,
        "creating ServiceAccounts",
    )
    return LocalNode(cp=cp, images=images, work=work, containerd_sock=sock, started_seconds=time.monotonic() - t0)


def _import_images(sock: Path, images: Images, containerd: Component) -> None:
    for name, archive in images.archives.items():
        proc = _run(
            ["ctr", "--address", str(sock), "-n", "k8s.io", "images", "import", "--no-unpack=false", str(archive)],
            check=False,
            timeout=300,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"importing the {name} image ({archive}) failed: {proc.stderr.strip()}\n{_tail(containerd.log)}"
            )


def _teardown(work: Path, procs: Processes) -> None:
    """Pods go while the kubelet still runs (it stops their containers and releases their CNI addresses); then every
    process in reverse start order; then whatever containers containerd still holds."""
    names = [c.name for c in procs.running]
    kubeconfig = work / "kubeconfig"
    if "kubelet" in names and "kube-apiserver" in names and kubeconfig.exists():
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        # The controllers' objects first: a pod deleted before its ReplicaSet is recreated, and waiting for that one
        # too took most of the 52 s this teardown measured.
        workloads = "deployments,replicasets,daemonsets,statefulsets,jobs"
        _run(["kubectl", "delete", workloads, "--all", "-A", "--wait=false"], check=False, env=env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            _run(["kubectl", "delete", "pods", "--all", "-A", "--grace-period=1", "--wait=false"], check=False, env=env)
            out = _run(["kubectl", "get", "pods", "-A", "-o", "name"], check=False, env=env).stdout.strip()
            if not out:
                break
            time.sleep(1)
    for name in ("kube-router", "kube-proxy", "kube-scheduler", "kube-controller-manager", "kubelet"):
        procs.stop(name)
    sock = work / "containerd" / "containerd.sock"
    if "containerd" in names and sock.exists():
        ctr = ["ctr", "--address", str(sock), "-n", "k8s.io"]
        for task in _run([*ctr, "tasks", "ls", "-q"], check=False).stdout.split():
            _run([*ctr, "tasks", "kill", "-s", "SIGKILL", task], check=False)
            _run([*ctr, "tasks", "delete", "-f", task], check=False, timeout=30)
        for c in _run([*ctr, "containers", "ls", "-q"], check=False).stdout.split():
            _run([*ctr, "containers", "delete", c], check=False)
    for name in ("containerd", "kube-apiserver", "etcd"):
        procs.stop(name)
    for comp in list(procs.running):
        procs.stop(comp.name)
