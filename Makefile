# `make run` and `make test` work on a fresh machine that has only python3.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: run test test-fast bench lint browser services wrk

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

venv: $(STAMP)

# The embedded default: SQLite under var/, a filesystem broker, the offline LLM provider.
# config/embedded.py: one instance per var/ (a second `make run` refuses), PORT (default 8000),
# server + worker + beat supervised and restarted if one dies, logs in var/log/, Ctrl-C stops all.
PORT ?= 8000
run: $(STAMP)
	@PORT=$(PORT) $(PY) -m config.embedded

# Debian's chromium for the Playwright test (Playwright's own browser download is not reachable).
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)

# The import contracts first (pyproject's [tool.importlinter]), then the suite.
# Runs on PostgreSQL + Redis when they are reachable (started if down); under CI=true they must be.
test: $(STAMP) browser
	$(VENV)/bin/lint-imports
	@mkdir -p var
	@$(PY) -m tests.services > var/test-env
	env $$(cat var/test-env | xargs) $(PY) -m pytest --durations=15 $(PYTEST_ARGS)

# The fast loop: everything but the real-worker (`worker`) and browser (`e2e`) tests, on the same
# PostgreSQL + Redis as `make test`, spread over the cores by pytest-xdist: each xdist worker has a
# test database (test_…_gw0, _gw1 …) and a Redis database (REDIS_URL's + N) of its own, see
# tests/settings.py. TEST_WORKERS is one per core plus one (the tests wait on subprocesses and
# servers often enough that a third worker on two cores finishes sooner). Bytecode is cached (__pycache__/, ignored
# by git) even where PYTHONDONTWRITEBYTECODE is set: each worker and subprocess otherwise compiles
# every module again. No test run (pytest's exit 5) fails it like a failed test.
# Two shortcuts `make test` does not take: the test databases are built from the models, not by
# running the migrations (tests/test_migrations.py proves both give one schema), and the schema
# fuzzers draw TEST_FUZZ_EXAMPLES examples per operation instead of 25, without schemathesis's
# coverage phase (TEST_FUZZ_COVERAGE=0; tests/test_schema.py).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
TEST_FUZZ_EXAMPLES ?= 5
test-fast: $(STAMP)
	@mkdir -p var
	@$(PY) -m tests.services > var/test-env
	env $$(cat var/test-env | xargs) PYTHONDONTWRITEBYTECODE= TEST_FUZZ_EXAMPLES=$(TEST_FUZZ_EXAMPLES) \
	  TEST_FUZZ_COVERAGE=0 \
	  $(PY) -m pytest -n $(TEST_WORKERS) --nomigrations \
	  -m "not worker and not e2e" --durations=10 $(PYTEST_ARGS)

BENCHES := api serving roster assign sweep collaboration mcp runtime costs scale bigorg

# wrk, the HTTP load generator of the benchmarks (bench/load.py), from Debian's packages.
wrk:
	@command -v wrk >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq wrk >/dev/null)

# Every benchmark on PostgreSQL + Redis; each makes and drops a database of its own.
# A missed target is reported on its RESULT line and in the exit status, after all have run.
bench: $(STAMP) wrk
	@mkdir -p var
	@$(PY) -m tests.services > var/test-env
	@status=0; for b in $(BENCHES); do echo "== bench/$$b.py"; \
	  env $$(cat var/test-env | xargs) $(PY) bench/$$b.py || status=1; done; exit $$status

lint: $(STAMP)
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .
