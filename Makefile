# The README's two commands. Both install what they need on a fresh machine.
.PHONY: demo test e2e

# Runs the product locally on loopback: Envoy + extproc + operator (file source on examples/) + sample backends.
demo:
	python3 -m pip install -q --disable-pip-version-check .
	python3 -m trafficsplit.cli demo

# Installs everything, builds (or reuses) the control plane, runs static checks and every test tier.
test:
	bash hack/test.sh

# Only the end-to-end tier: a local single-node Kubernetes (Linux, root), the chart installed with helm, real pods.
# Builds the node binaries and images it lacks (cached in ~/.cache/trafficsplit).
e2e:
	bash hack/test.sh --e2e
