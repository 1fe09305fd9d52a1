# The README's two commands. Both install what they need on a fresh machine.
.PHONY: demo test e2e conformance soak images kind release

# Runs the product locally on loopback: Envoy + extproc + operator (file source on examples/) + sample backends.
# Needs Python 3.11+; installs into the project's venv (.venv, hack/venv.sh), never into the system Python.
# A failed set-up stops here with its cause (hack/venv.sh logs it on stderr), never runs a python that is not there.
# The ready block says where the CLI is (.venv/bin/trafficsplit: the venv is not on PATH).
demo:
	@out=$$(bash hack/venv.sh demo) || { echo "make demo: the venv set-up failed (hack/venv.sh demo, exit $$?; its log is above)" >&2; exit 1; }; \
	bin=$$(printf '%s\n' "$$out" | tail -n 1); \
	[ -x "$$bin/python" ] || { echo "make demo: hack/venv.sh printed no venv bin directory (got '$$bin')" >&2; exit 1; }; \
	exec "$$bin/python" -m trafficsplit.cli demo

# Installs everything, builds (or reuses) the control plane, runs static checks and every test tier.
test:
	bash hack/test.sh

# The upstream Gateway API conformance suite (v1.6.3, GATEWAY-HTTP) against the chart on the local node (Linux,
# root); writes conformance/reports/v1.6.3/trafficsplit/ and prints every test's result. ARGS=--quick runs
# HTTPRouteWeight and one test of every group (docs/gateway-api.md, "Running the conformance suite").
conformance:
	bash hack/conformance.sh $(ARGS)

# Bounded soak (10 minutes): steady load, a weight change every 10 s, a processor restart every minute; JSON report in
# bench/results/ (failed requests outside the restart window, processor RSS, fds and asyncio tasks at start and end).
soak:
	PYTHONPATH=src:operator:extproc:. python3 bench/soak.py --duration 600

# Only the end-to-end tier: a local single-node Kubernetes (Linux, root), the chart installed with helm, real pods.
# Builds the node binaries and images it lacks (cached in ~/.cache/trafficsplit).
e2e:
	bash hack/test.sh --e2e

# The operator, extproc and Envoy images from this repository, with docker, podman or buildah (hack/images.sh says
# where each builder leaves them). REGISTRY=... TAG=... PUSH=1 push them for a cluster to pull (docs/helm.md).
images:
	bash hack/images.sh

# A kind cluster with the chart installed from this repository and the images built here loaded into it (needs
# Docker or Podman, kind, kubectl and helm): then `kubectl apply -f examples/kubernetes/` as in the README.
kind:
	bash hack/kind.sh

# Everything a tag publishes, built into dist/ and checked (docs/release.md): the wheel and sdist, the chart package,
# the krew archive and manifest, the Argo Rollouts plugin for linux amd64 and arm64, the operator/extproc/Envoy images
# as OCI archives, SHA256SUMS and release-notes.md. ARGS="--only python,krew,chart,plugin" skips the images (root).
release:
	bash hack/release.sh $(ARGS)
