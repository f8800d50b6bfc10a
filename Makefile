# Run `make help` for the list of targets.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CONFIG ?= examples/dev-config.yml
# The embedded PostgreSQL of `make run`: one per checkout, removed by `make clean`.
DATA_DIR ?= $(CURDIR)/.data

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-12s %s\n", $$1, $$2}'

$(BIN)/workqueue-service: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	@touch $@

$(VENV)/.dev-installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
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
clean: ## Remove .venv and the data directory of `make run` (stop the service first)
	rm -rf $(VENV) $(DATA_DIR)

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

.PHONY: test
test: lint lint-deploy docs ## Install dev dependencies, lint, build the docs, run the whole test suite
	$(BIN)/pytest -q

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
