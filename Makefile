# Everything a fresh machine needs is installed by these targets (virtualenv + pinned Python
# dependencies, Debian packages, control-plane binaries and OLM tools built from Go modules).
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# Go's default install location, for shells that did not source a profile (CI runs bash .ci/run).
export PATH := $(PATH):/usr/local/go/bin:$(HOME)/go/bin
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
# The documentation site (mkdocs.yml, docs/), built with --strict: a broken link or anchor, or a
# page left out of the nav, fails. The variable hides Material's banner about its successor.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs
# Parallel test workers (pytest-xdist), each with a control plane of its own; the real-node tests
# keep to one worker (tests/conftest.py). Most of a worker's time is spent waiting on the API
# server, kwok and the real node, so there are more workers than cores.
WORKERS ?= $(shell echo $$(( $$(nproc) + 2 )))
CRDS := bundle/manifests/*.yaml
# The release and where its images go (bundle, catalog and images are rendered with them).
VERSION ?= 0.1.0
N ?= 100
REGISTRY ?= ghcr.io/k8s-operators-py
# docker, buildah or podman; empty: docker when a Docker engine answers, else buildah.
CONTAINER_TOOL ?=

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
	$(BIN)/python -m tools.generate.manifests

.PHONY: bundle
bundle: venv ## Render the OLM bundle and the operator Dockerfiles (VERSION, REGISTRY)
	$(BIN)/python -m tools.generate.bundle --version $(VERSION) --registry $(REGISTRY)

.PHONY: gotools
gotools: venv ## Build (or reuse) opm and operator-sdk from the pinned Go modules in localcluster/go/
	$(BIN)/python -m localcluster.gotools

.PHONY: olm
olm: venv ## Build (or reuse) OLM v0 (olm, catalog, cpb) and grpc_health_probe for the OLM install tests
	$(BIN)/python -m localcluster.gotools olm grpc-health-probe

.PHONY: olmv1
olmv1: venv ## Build (or reuse) OLM v1 (catalogd, operator-controller, olmv1-tool) and cert-manager for the OLM v1 tests
	$(BIN)/python -m localcluster.gotools olmv1 cert-manager

.PHONY: registry
registry: venv ## Build (or reuse) the CNCF distribution registry the OLM tests push images to
	$(BIN)/python -m localcluster.gotools registry

.PHONY: kstatus
kstatus: venv ## Build (or reuse) the kstatus command the status-condition tests judge our objects with
	$(BIN)/python -m localcluster.gotools kstatus

.PHONY: robfigcron
robfigcron: venv ## Build (or reuse) CronJob's schedule parser (robfig/cron v3) as a command, for the cron differential test
	$(BIN)/python -m localcluster.gotools robfigcron

.PHONY: catalog
catalog: gotools ## Render the file-based catalog with opm (offline) and validate it
	$(BIN)/python -m tools.generate.catalog --version $(VERSION) --registry $(REGISTRY)

.PHONY: validate
validate: gotools ## operator-sdk bundle validate (operatorframework suite) and opm validate
	$(BIN)/python -m tools.check.olm_validate

.PHONY: preflight
preflight: venv ## openshift-preflight's offline checks: the CSV's, and every built image's (make images first)
	$(BIN)/python -m tools.check.preflight operator
	$(BIN)/python -m tools.check.preflight container

.PHONY: signing-key
signing-key: venv ## Make (or reuse) this machine's cosign key pair (~/.cache/k8s-operators-py/signing), print cosign.pub
	$(BIN)/python -m localcluster.signing key

.PHONY: images
images: venv ## Build every image and its SPDX SBOM (CONTAINER_TOOL; offline with buildah: local stand-ins for public bases)
	$(BIN)/python -m localcluster.images --version $(VERSION) --registry $(REGISTRY) $(if $(CONTAINER_TOOL),--tool $(CONTAINER_TOOL))

.PHONY: release
release: venv ## Build the release pinned by digest: images, then bundle, install.yaml and catalog naming them by digest (tools/generate/release.py)
	$(BIN)/python -m tools.generate.release --version $(VERSION) --registry $(REGISTRY)

# The end-to-end and OLM suites and `make run`'s real node need root; without it there is
# nothing to run the images (or OLM) on, so they are not built (the tests say why they skip).
.PHONY: node-images
node-images: venv
	@if [ "$$(id -u)" -eq 0 ]; then $(MAKE) --no-print-directory olm olmv1 images release VERSION=$(VERSION) REGISTRY=$(REGISTRY); \
	else echo "==> not root: no real node, so the images and OLM are not built (make images, make olm build them)"; fi

.PHONY: lint
lint: venv ## ruff, import contracts, mypy, hadolint, generated files (CRDs, bundle, Dockerfiles, docs) up to date, strict docs build
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python -m tools.generate.bundle --check
	$(BIN)/python -m tools.generate.docs --check
	$(BIN)/python -m tools.check.crd_compat
	$(BIN)/python -m tools.check.preflight operator
	$(BIN)/hadolint images/*/Dockerfile bundle/bundle.Dockerfile catalog.Dockerfile
	$(MKDOCS) build --strict --quiet

.PHONY: docs
docs: venv ## Regenerate the API reference and metrics table (tools/generate/docs.py), build the site into site/
	$(BIN)/python -m tools.generate.docs
	$(MKDOCS) build --strict

.PHONY: docs-serve
docs-serve: venv ## Serve the documentation at http://127.0.0.1:8000, rebuilt on every edit
	$(BIN)/python -m tools.generate.docs
	$(MKDOCS) serve

.PHONY: fmt
fmt: venv ## Format and auto-fix
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Python alone: no Go, no Debian packages, no cluster. What needs a Go-built tool or a Debian
# package (promtool, Lua, opm, kstatus, robfig/cron) is in tests/external, which make test runs.
# make unit is the inner loop: the dev Hypothesis profile (a tenth of each property test's
# examples) and no test marked slow (renders of the bundle or docs, subprocesses, real timers).
# A worker per core: what is left waits on short real timers, which the workers overlap (on a
# machine whose cores are busy with other work, PYTEST_ARGS=-n0 spends less CPU).
# make unit-full runs what make test runs of tests/unit: every test, every example.
.PHONY: unit
unit: venv ## Unit tests, the inner loop: Python alone, seconds (fewer property examples, no slow tests)
	$(BIN)/pytest -n auto tests/unit --hypothesis-profile=dev -m "not slow" $(PYTEST_ARGS)

.PHONY: unit-full
unit-full: venv ## Every unit test with every example, as make test runs them (Python alone)
	$(BIN)/pytest -n auto tests/unit $(PYTEST_ARGS)

.PHONY: test
test: lint system-deps testbin catalog validate kstatus robfigcron registry node-images ## Lint, OLM validation, unit, integration and end-to-end tests
	git diff --exit-code -- catalog catalog.Dockerfile || { echo "catalog out of date: run make catalog"; exit 1; }
	$(BIN)/pytest -ra --durations=15 -n $(WORKERS) --dist loadgroup tests $(PYTEST_ARGS)

.PHONY: test-loaded
test-loaded: ## make test beside a CPU hog (stress-ng on every core): no test may depend on an idle machine
	@command -v stress-ng >/dev/null || $(MAKE) --no-print-directory system-deps
	stress-ng --cpu $$(nproc) --timeout 90m --quiet & hog=$$!; \
	trap 'kill $$hog 2>/dev/null' EXIT; $(MAKE) --no-print-directory test

.PHONY: chaos
chaos: venv system-deps testbin ## SIGKILL the operators at random points N times (N=100) and check each converges
	$(BIN)/python -m tools.bench.chaos --trials $(N)

.PHONY: run
run: venv system-deps testbin node-images ## Local cluster (a real node as root) + CRDs + the operators; Ctrl-C stops all
	$(BIN)/python -m localcluster run --crds '$(CRDS)' --operators operators

.PHONY: clean
clean: ## Remove the virtualenv and local state (the binary cache stays)
	rm -rf $(VENV) .localcluster .pytest_cache .ruff_cache .mypy_cache site
