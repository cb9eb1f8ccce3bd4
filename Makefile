# Everything a fresh machine needs is installed by these targets (virtualenv + pinned Python
# dependencies, Debian's prometheus for promtool, control-plane binaries built from Go modules).
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# Go's default install location, for shells that did not source a profile (CI runs bash .ci/run).
export PATH := $(PATH):/usr/local/go/bin:$(HOME)/go/bin
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
CRDS := bundle/manifests/*.yaml

# Versions of the control plane live in localcluster/binaries.py; override per run, e.g.
#   make test K8S_VERSION=v1.35.4
export K8S_VERSION KWOK_VERSION LOCALCLUSTER_BIN_DIR LOCALCLUSTER_CACHE USE_EXISTING_CLUSTER

.PHONY: help
help: ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 16

$(VENV)/.installed: pyproject.toml constraints.txt
	@echo "==> virtualenv $(VENV) with the pinned dependencies (constraints.txt)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -c constraints.txt -e '.[dev]'
	@touch $@

.PHONY: venv
venv: $(VENV)/.installed ## Create the virtualenv and install dependencies

.PHONY: system-deps
system-deps: ## Install OS packages the tests use (prometheus, iproute2, netperf from non-free); check Go
	@command -v go >/dev/null || { echo "Go >= 1.24 is needed to build the control plane (https://go.dev/dl)"; exit 1; }
	@bash tools/system-deps.sh

.PHONY: testbin
testbin: venv ## Build (or reuse) kube-apiserver, controller-manager, scheduler, etcd, kwok
	$(BIN)/python -m localcluster build

.PHONY: manifests
manifests: venv ## Generate the CRDs in bundle/manifests/ from each operator's schema.py
	$(BIN)/python -m tools.manifests

.PHONY: lint
lint: venv ## ruff check, ruff format --check, import contracts, generated files up to date
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/python -m tools.manifests --check
	$(BIN)/hadolint images/*/Dockerfile

.PHONY: fmt
fmt: venv ## Format and auto-fix
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

.PHONY: unit
unit: venv system-deps ## Unit tests only (no cluster)
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

.PHONY: test
test: lint system-deps testbin ## Lint, unit and integration tests on a local control plane
	$(BIN)/pytest -ra --durations=15 tests $(PYTEST_ARGS)

.PHONY: run
run: venv system-deps testbin ## Local control plane + CRDs + the operators; Ctrl-C stops everything
	$(BIN)/python -m localcluster run --crds '$(CRDS)' --operators operators

.PHONY: clean
clean: ## Remove the virtualenv and local state (the binary cache stays)
	rm -rf $(VENV) .localcluster .pytest_cache .ruff_cache
