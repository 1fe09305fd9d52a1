# The README's two commands. Both install what they need on a fresh machine.
.PHONY: demo test

# Runs the product locally on loopback: Envoy + extproc + operator (file source on examples/) + sample backends.
demo:
	python3 -m pip install -q --disable-pip-version-check .
	python3 -m trafficsplit.cli demo

# Installs everything, builds (or reuses) the control plane, runs static checks and every test tier.
test:
	bash hack/test.sh
