# Run `make help` for the list of targets.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CONFIG ?= examples/dev-config.yml
# The embedded PostgreSQL of `make run`: one per checkout, removed by `make clean`.
DATA_DIR ?= $(CURDIR)/.data
# uv installs exactly what uv.lock pins. It lives in a venv of its own, so that
# syncing .venv to the lock never removes it.
UV_VERSION := 0.13.8
UV_DIR ?= $(CURDIR)/.uv
UV := $(UV_DIR)/bin/uv
# --locked: refuses a uv.lock that pyproject.toml no longer agrees with (`make lock`).
SYNC := UV_PROJECT_ENVIRONMENT=$(VENV) $(UV) sync --locked --no-python-downloads --python $(PYTHON)
# pytest-xdist workers: the suite mostly waits (processes, PostgreSQL, timers), so
# more workers than cores is fastest (docs/development.md has the measurements).
TEST_WORKERS ?= 4
# The random order's seed, one for both of `make test`'s runs and shown in the commands
# make prints (-q hides pytest's header): `make test TEST_SEED=N` repeats an order.
ifndef TEST_SEED
TEST_SEED := $(shell $(PYTHON) -c 'import random; print(random.randrange(10**9))')
endif

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-12s %s\n", $$1, $$2}'

$(UV):
	$(PYTHON) -m venv $(UV_DIR)
	$(UV_DIR)/bin/pip install --quiet uv==$(UV_VERSION)

# --inexact: the service's packages as locked, leaving those of `make dev` in place.
$(BIN)/workqueue-service: pyproject.toml uv.lock | $(UV)
	$(SYNC) --inexact --quiet
	@touch $@

$(VENV)/.dev-installed: pyproject.toml uv.lock | $(UV)
	$(SYNC) --extra dev --quiet
	@touch $@

.PHONY: install
install: $(BIN)/workqueue-service ## Create .venv and install the service

.PHONY: dev
dev: $(VENV)/.dev-installed ## Create .venv with the development dependencies

# exec: the shell make starts becomes the server, so a signal to make (which
# passes SIGTERM on to its child) reaches the server, which stops PostgreSQL.
.PHONY: run
run: install ## Install and run the service (embedded PostgreSQL in ./.data unless DATABASE_URL is set; SERVE_FLAGS="--port 9000")
	exec env WORKQUEUE_SERVICE_CONFIG="$${WORKQUEUE_SERVICE_CONFIG:-$(CONFIG)}" \
	  WORKQUEUE_SERVICE_DATA_DIR="$${WORKQUEUE_SERVICE_DATA_DIR:-$(DATA_DIR)}" \
	  $(BIN)/workqueue-service serve $(SERVE_FLAGS)

.PHONY: demo
demo: install ## Install and show a whole MR life against a simulated GitLab (DEMO_FLAGS=--keep to stay)
	exec $(BIN)/workqueue-service demo $(DEMO_FLAGS)

.PHONY: clean
clean: ## Remove .venv, .uv and the data directory of `make run` (stop the service first)
	rm -rf $(VENV) $(UV_DIR) $(DATA_DIR)

.PHONY: lock
lock: $(UV) ## Update uv.lock after a change to the dependencies in pyproject.toml
	$(UV) lock

.PHONY: lint
lint: dev ## ruff + mypy --strict
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

.PHONY: lint-deploy
lint-deploy: dev ## ruff, mypy --strict and yamllint on the deployment files and docs tooling
	$(BIN)/ruff check deploy/container docs/hooks
	$(BIN)/ruff format --check deploy/container docs/hooks
	$(BIN)/mypy --strict deploy/container/wait_for_schema.py docs/hooks/reference_pages.py
	$(BIN)/yamllint --strict deploy mkdocs.yml .yamllint

.PHONY: docs
docs: dev ## Build the documentation site into build/site (strict: a broken link fails)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The docs site is built (strictly) by tests/deploy/test_docs_site.py. Random order,
# the seed in each run's header; the tests marked serial (tests/conftest.py) run alone.
.PHONY: test
test: lint lint-deploy ## Install dev dependencies from uv.lock, lint, run the whole test suite (docs site included)
	$(BIN)/pytest -q -p randomly --randomly-seed=$(TEST_SEED) --durations=10 \
	  -n $(TEST_WORKERS) -m "not serial"
	$(BIN)/pytest -q -p randomly --randomly-seed=$(TEST_SEED) --durations=10 -m serial

# Without uv.lock, as users install: each extra into a fresh venv with Python's bundled pip.
.PHONY: check-installs
check-installs: dev ## pip install of the package and of every extra, each in a fresh venv (needs the package index)
	WORKQUEUE_INSTALL_CHECKS=1 $(BIN)/pytest -q -p no:cacheprovider -n 3 tests/install

.PHONY: chaos
chaos: dev ## Chaos suite at full size: kills, database cuts, GitLab storms, webhook abuse (~20 min on 2 cores)
	WORKQUEUE_CHAOS=full $(BIN)/pytest -q -m chaos -p no:cacheprovider --timeout 1800 tests/chaos

.PHONY: bench
bench: dev ## Engine benchmark (starts its own embedded PostgreSQL)
	$(BIN)/python benchmarks/engine.py

SOAK_MINUTES ?= 30

.PHONY: scale
scale: dev ## Scale benchmark: 100k and 1.1M items, hot queries, API, prune (about 20 minutes)
	$(BIN)/python benchmarks/scale.py

.PHONY: soak
soak: dev ## Soak: steady mixed load on one serve process for SOAK_MINUTES (default 30), drift slopes
	$(BIN)/python benchmarks/soak.py --minutes $(SOAK_MINUTES)

.PHONY: format
format: dev ## Format the code
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks
