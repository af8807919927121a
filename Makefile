# One set of targets for people and CI (.ci/run calls these), so they never drift apart.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install setup jars schemas toxiproxy demo test test-unit reliability soak bench bench-quick lint format dashboards dashboard-picture docker-constraints clean

$(BIN)/mirror: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(BIN)/mirror

## install: a virtualenv with mirror and its dev tools
install: $(BIN)/mirror

## setup: a virtualenv with mirror and its dev tools, plus the Apache Kafka jars and the schemas
setup: $(BIN)/mirror jars schemas

## jars: resolve the Apache Kafka jars from Maven Central into ~/.cache/mirror
jars: $(BIN)/mirror
	$(BIN)/mirror local jars

COMPOSE_SPEC_DIR := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/mirror/compose-spec

## schemas: the Compose specification's JSON schema, as docker-compose 1.29.2 ships it (tests/unit/test_deployment_files.py)
schemas: $(BIN)/mirror
	@ls $(COMPOSE_SPEC_DIR)/docker_compose-1.29.2-*.whl >/dev/null 2>&1 || \
		$(BIN)/pip download --quiet --no-deps --dest $(COMPOSE_SPEC_DIR) docker-compose==1.29.2

## toxiproxy: Shopify's TCP fault proxy, built with Go (network partitions in the tests, `bench --wan`)
toxiproxy: $(BIN)/mirror
	@$(BIN)/python -c "from mirror.local.toxiproxy import server_binary; server_binary()" 2>/dev/null || \
		go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0

## demo: start local clusters A and B, write sample orders into A, replicate A->B until Ctrl-C
demo: setup
	$(BIN)/mirror local up
	$(BIN)/mirror local seed --topic orders --records 10000
	$(BIN)/mirror run mm2.local.yaml

# `make test` spreads the modules over this many processes, a whole module each at a time (its
# module fixtures start once), each process with its own session clusters; 0 runs them in this one.
TEST_WORKERS ?= 2

## test: the whole suite, integration tests included (they start their own brokers); the solo modules run last, alone
test: setup toxiproxy
	@status=0; \
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not solo and not soak" || status=$$?; \
	$(BIN)/python -m pytest -m "solo and not soak" || status=$$?; \
	exit $$status

## test-unit: pure-Python tests only, seconds
test-unit: $(BIN)/mirror schemas
	$(BIN)/python -m pytest tests/unit

## reliability: the fault, bad-input and security suite alone; rewrites docs/reliability.md (~15 min)
reliability: setup toxiproxy
	MIRROR_RELIABILITY_REPORT=docs/reliability.md $(BIN)/python -m pytest -m "reliability and not soak"

## soak: the long drills on replicated clusters (rolling restarts, leaders moved, the KRaft controllers killed, a broker of each side down ten minutes, network partitions; ~50 min)
soak: setup toxiproxy
	$(BIN)/python -m pytest -m soak -s

$(VENV)/.bench: $(BIN)/mirror pyproject.toml
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	touch $@

## bench: mirror vs real MirrorMaker 2 vs the broker ceiling, full workloads (~30 min); bench/results/
bench: $(VENV)/.bench jars
	$(BIN)/python -m bench

## bench-quick: the same with small workloads (~12 min), for development
bench-quick: $(VENV)/.bench jars
	$(BIN)/python -m bench --quick

## dashboards: regenerate dashboards/*.json from dashboards/build.py (CI checks they match)
dashboards: $(BIN)/mirror
	$(BIN)/python dashboards/build.py

## dashboard-picture: redraw dashboards/overview.png from a live run scraped by Prometheus (~4 min)
dashboard-picture: setup
	MIRROR_DASHBOARD_PICTURE=dashboards/overview.png $(BIN)/python -m pytest tests/integration/test_live_observability.py

## lint: ruff and mypy, as CI runs them
lint: $(BIN)/mirror
	$(BIN)/ruff check mirror tests bench dashboards
	$(BIN)/ruff format --check mirror tests bench dashboards
	$(BIN)/mypy mirror bench
	$(BIN)/lint-imports --no-cache

## docker-constraints: pin the image's dependencies to the versions installed (and tested) here
docker-constraints: $(BIN)/mirror
	$(BIN)/python docker/freeze_constraints.py > docker/constraints.txt

format: $(BIN)/mirror
	$(BIN)/ruff format mirror tests bench dashboards
	$(BIN)/ruff check --fix mirror tests bench dashboards

clean:
	-$(BIN)/mirror local down --purge
	rm -rf $(VENV) .mirror-state mm2.local.yaml
