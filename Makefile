# The two commands a newcomer needs are `make run` and `make test` (see README.md).
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: run test lint unit control-plane debian-deps crds clean

# Debian packages: the node's runtime (runc, the CNI plugins, iptables, iproute2) and image tools (buildah,
# mmdebstrap, gcc and libc6-dev for the static pause binary); for the tests also promtool and a Prometheus
# (prometheus) for the alert rules and dashboards.
NODE_PACKAGES := runc containernetworking-plugins iptables iproute2 buildah mmdebstrap gcc libc6-dev
DEBIAN_PACKAGES := prometheus $(NODE_PACKAGES)

$(BIN)/.installed: pyproject.toml tools/pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]' -e ./tools
	touch $@

## run: the whole product locally (tatara up): a cluster with a real node, the image built, both charts installed (the controllers as pods), CRDs, real Flux (registry + git server), NATS + HTTP receiver, examples/ (root; the node's Debian packages are installed first)
run: $(BIN)/.installed
	@$(MAKE) --no-print-directory debian-deps DEBIAN_PACKAGES="$(NODE_PACKAGES)"
	$(BIN)/tatara up

## test: lint, type-check, then every test against a real local control plane, real Flux and a real node (root)
test: $(BIN)/.installed control-plane lint
	$(BIN)/pytest

## lint: ruff and mypy (strict) on the packages
lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/mypy

## unit: the fast tests only (no control plane)
unit: $(BIN)/.installed
	$(BIN)/pytest -m "not integration"

## control-plane: build kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl, etcd, containerd, the node's base and pause images, helm, kubeconform, the kstatus judge, the Flux controllers, the registry, oras and Jaeger if not cached
control-plane: $(BIN)/.installed debian-deps
	$(BIN)/tatara control-plane build
	$(BIN)/python -m tools.controlplane.containerd
	$(BIN)/python -m tools.controlplane.images
	$(BIN)/python -m tools.controlplane.flux
	$(BIN)/python -m tools.helm_bin
	$(BIN)/python -m tools.kubeconform_bin
	$(BIN)/python -m tools.controlplane.kstatus
	$(BIN)/python -m tools.controlplane.jaeger

## debian-deps: install the Debian packages above that are missing (apt-get; sudo when not root); a Prometheus
## service the package enables on a systemd host is stopped and disabled again (the tests run their own)
debian-deps:
	@missing=$$(for p in $(DEBIAN_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  sudo=""; [ "$$(id -u)" -ne 0 ] && sudo=sudo; \
	  echo "installing Debian packages: $$missing"; \
	  $$sudo apt-get update && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y --no-install-recommends $$missing; \
	  case " $$missing " in *" prometheus "*) \
	    if [ -d /run/systemd/system ]; then $$sudo systemctl disable --now prometheus >/dev/null 2>&1 || true; fi;; \
	  esac; \
	fi

## crds: regenerate charts/*/crds from the models (the drift test fails until you do)
crds: $(BIN)/.installed
	$(BIN)/python -m tools.gen_crds

clean:
	rm -rf $(VENV) .cache .pytest_cache .mypy_cache .ruff_cache
