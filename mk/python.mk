# Python binding (python/: PyO3 extension + the `slidelimit` package, Celery
# integration). See docs/python.md. Everything it needs (maturin, redis-py,
# celery, pytest, mypy, ruff, ...) goes into a venv under .tmp/ from the pins
# in python/requirements-dev.txt.

TEST_TARGETS += test-python
BENCH_TARGETS += bench-python
CONFORMANCE_BINDINGS += python python:memory
DRIVER_TARGETS += driver-python

PY_DIR := .tmp/python
PY_VENV := $(PY_DIR)/venv
PY := $(CURDIR)/$(PY_VENV)/bin/python
PY_DIST := $(PY_DIR)/dist
PYTHON3 ?= python3

.PHONY: python-venv python-build python-lint test-python bench-python driver-python

# Re-made when the pins change.
python-venv: $(PY_VENV)/.installed

$(PY_VENV)/.installed: python/requirements-dev.txt
	rm -rf $(PY_VENV)
	$(PYTHON3) -m venv $(PY_VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r python/requirements-dev.txt
	@touch $@

# Builds the abi3 wheel and the sdist, and installs the wheel into the venv
# (not editable: tests and the driver see what a user installs).
python-build: python-venv deps
	rm -rf $(PY_DIST)
	cd python && $(PY) -m maturin build --release --out $(CURDIR)/$(PY_DIST)
	cd python && $(PY) -m maturin sdist --out $(CURDIR)/$(PY_DIST)
	$(PY) -m pip install --quiet --force-reinstall --no-deps $(PY_DIST)/slidelimit-*.whl

driver-python: python-build

python-lint: python-venv
	cd python && $(PY) -m ruff check . && $(PY) -m ruff format --check .
	cd python && $(PY) -m mypy slidelimit examples

# A hang guard (scripts/with-deadline.sh), far above the suite's time
# (31 s here on 2026-12-05, the servers' start included).
PYTEST_DEADLINE_S ?= 600
# The suite runs on a fresh Redis and a six-node Cluster, then the packaging
# test (a fresh venv outside the repository).
test-python: python-build python-lint
	cd python && ../scripts/with-redis.sh ../scripts/with-cluster.sh ../scripts/with-ttl-check.sh \
	  ../scripts/with-deadline.sh $(PYTEST_DEADLINE_S) ABRT $(PY) -I -m pytest -q -p no:cacheprovider tests
	scripts/with-redis.sh python/tests/packaging.sh $(PY_DIST)

bench-python: python-build
	cd python && ../scripts/with-redis.sh $(PY) -I bench/bench.py
