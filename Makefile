# llmfleet.vllm — the README's two commands: `make demo` and `make test`.
# Each target does all of its own set-up on a fresh Debian 12 machine: the virtualenv, a Docker
# engine (Debian's docker.io, dockerd started when none answers), and the test-bed images, which are
# cached by a content hash of their recipe (a second run rebuilds nothing).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON    ?= python3
VENV      := .venv
BIN       := $(VENV)/bin
CACHE     := .cache
VERSION   := $(shell sed -n 's/^version: *//p' galaxy.yml)
TARBALL   := $(CACHE)/dist/llmfleet-vllm-$(VERSION).tar.gz
TESTBED   := $(CACHE)/testbed.env
DOCS      := $(CACHE)/docs
export PATH := $(CURDIR)/$(BIN):$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/collections
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# Bound for each provoked failure of the real vLLM CPU engine (tests/integration/test_diagnose_cpu.py).
export LLMFLEET_DIAG_CASE_TIMEOUT ?= 240
# Molecule scenarios run by `make test`, in this order (the end-to-end spine last: it is the longest).
# `fleet` (3 hosts, two full deployments and rolling upgrades) runs in `make test-full`, with the
# full-deployment fault and secrets-audit tests (LLMFLEET_FULL=1): together they double the suite's time.
# `many_models` (one host serving several models, re-run, add, remove, upgrade one) runs there too: ~13 minutes.
SCENARIOS ?= $(shell ls -d molecule/*/ 2>/dev/null | xargs -rn1 basename | grep -vx 'default\|fleet\|multinode\|many_models') $(if $(wildcard molecule/default),default)
FULL_SCENARIOS ?= fleet multinode many_models
# The host-layer scenarios run again over each further distribution (a test-bed image recipe under tests/images/),
# with the host image as the distro variable (MOLECULE_HOST_IMAGE), as geerlingguy's roles do with MOLECULE_DISTRO.
HOST_SCENARIOS ?= docker_engine nvidia_container_toolkit nvidia_driver
DISTROS ?= debian13-systemd

.PHONY: help venv testbed lint changelog-lint docs-lint unit sanity install-test molecule molecule-distros integration test \
	test-full demo build clean ee docs docs-test chromium release-check
help:
	@echo "make demo   - serve the tiny test model on a local test host (no GPU) and print the endpoint"
	@echo "make test   - lint (ansible-lint production, changelog + docs lint), unit tests, ansible-test sanity, install test,"
	@echo "              Molecule scenarios, integration tests"
	@echo "make sanity - ansible-test sanity (every test that runs offline) on a copy laid out as a collection"
	@echo "make install-test - build the tarball, install it into an empty collections path, plan from outside"
	@echo "make build  - build the collection tarball (ansible-galaxy collection build)"
	@echo "make test-full - make test + the fleet scenario + full-deployment fault and secrets-audit tests"
	@echo "              + make molecule-distros (host-layer scenarios on Debian 13)"
	@echo "make ee    - build the execution environment (execution-environment.yml, docs/EE.md), cached by content hash"
	@echo "make docs  - build the docs site (antsibull-docs + Sphinx) into $(DOCS)/html"
	@echo "make docs-test - make docs, then open three of its pages in headless Chromium (screenshots: tests/output/docs/)"
	@echo "make release-check - what must hold before tagging a release (docs/RELEASING.md)"

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -U pip setuptools wheel
	$(BIN)/pip install -q -e '.[test]'
	touch $@

venv: $(BIN)/.installed

# Docker engine + test-bed images + local registry; writes the addresses tests need into $(TESTBED).
# Without a virtualenv (a fresh checkout) up.sh makes it, as a step beside the image builds (only the hub
# mirrors need it); with one, `venv` refreshes it first as before.
testbed: $(if $(wildcard $(BIN)/.installed),venv)
	tests/testbed/up.sh $(TESTBED)

# ansible-lint, then the two gates of Ansible's own collections: the changelog and the plugin docs.
lint: venv changelog-lint docs-lint
	$(BIN)/ansible-lint --profile production

# antsibull-changelog's fragments and changelogs/changelog.yaml are well-formed, and a change to plugins/ or roles/
# came with a fragment (tests/release/check_fragments.py says against which base; docs/RELEASING.md).
changelog-lint: venv
	$(BIN)/antsibull-changelog lint
	$(BIN)/python tests/release/check_fragments.py

# Every plugin's and role's documentation as antsibull-docs reads it (the docs site's source), and docs/docsite/.
docs-lint: venv
	$(BIN)/antsibull-docs lint-collection-docs --plugin-docs .

unit: venv
	$(BIN)/pytest -q tests/unit

# Ansible's own gate for collections, offline (tests/sanity/run.sh says how); ignores in tests/sanity/ignore-2.19.txt.
sanity: venv
	tests/sanity/run.sh

# The built tarball installs with ansible-galaxy into an empty collections path and runs from outside the checkout.
install-test: build
	tests/install/run.sh $(TARBALL)

molecule: testbed
	set -a; . $(TESTBED); set +a; \
	failed=""; for s in $(SCENARIOS); do echo "=== molecule test -s $$s"; \
	  start=$$(date +%s); $(BIN)/molecule test -s $$s || failed="$$failed $$s"; \
	  echo "=== molecule $$s: $$(( $$(date +%s) - start ))s"; done; \
	if [ -n "$$failed" ]; then echo "FAILED molecule scenarios:$$failed"; exit 1; fi

molecule-distros: testbed
	set -a; . $(TESTBED); set +a; \
	failed=""; for d in $(DISTROS); do image=$$(tests/testbed/image.sh $$d); \
	  for s in $(HOST_SCENARIOS); do echo "=== molecule test -s $$s on $$d ($$image)"; \
	    start=$$(date +%s); MOLECULE_HOST_IMAGE=$$image $(BIN)/molecule test -s $$s || failed="$$failed $$s@$$d"; \
	    echo "=== molecule $$s on $$d: $$(( $$(date +%s) - start ))s"; done; done; \
	if [ -n "$$failed" ]; then echo "FAILED molecule scenarios:$$failed"; exit 1; fi

integration: testbed
	set -a; . $(TESTBED); set +a; $(BIN)/pytest -q tests/integration

test: lint unit sanity install-test molecule integration

# Everything in `make test`, plus the fleet scenario, the full-deployment reliability tests and the docs site.
test-full: export LLMFLEET_FULL := 1
test-full: test docs-test
	$(MAKE) molecule SCENARIOS="$(FULL_SCENARIOS)"
	$(MAKE) molecule-distros
	set -a; . $(TESTBED); set +a; $(BIN)/python tests/reliability_report.py || true

# The execution environment (ansible-builder, execution-environment.yml; docs/EE.md): ee/build.sh stages the
# collection tarballs and tags the image with a content hash of its recipe, so a second run rebuilds nothing.
ee: venv
	ee/build.sh

build: venv
	mkdir -p $(CACHE)/dist
	$(BIN)/ansible-galaxy collection build --force --output-path $(CACHE)/dist .

# The docs site (docs/site/build.sh): a page per module, plugin and role entry point, and the guides of docs/.
docs: venv
	docs/site/build.sh $(DOCS)

# Debian's Chromium for the browser test, installed when missing (as the test bed installs Debian's docker.io).
chromium:
	test -x /usr/bin/chromium || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; }

# The built site in headless Chromium: the front page, vllm_plan's and vllm_server's pages (tests/docs/test_site.py).
docs-test: docs chromium
	LLMFLEET_DOCS_SITE=$(CURDIR)/$(DOCS)/html $(BIN)/pytest -q -p no:cacheprovider tests/docs

# Before tagging a release (docs/RELEASING.md): the version has its release in the changelog, no fragment is left
# unreleased, galaxy.yml's links are filled in, and the tarball of that version builds.
release-check: changelog-lint docs-lint build
	$(BIN)/python tests/release/check_release.py $(TARBALL)

demo: testbed
	set -a; . $(TESTBED); set +a; tests/testbed/demo.sh

clean:
	-for s in $(SCENARIOS); do $(BIN)/molecule destroy -s $$s; done
