# slidelimit: `make demo` (no Redis needed) and `make test` (everything, from scratch).
# Bindings add their own targets in mk/*.mk: TEST_TARGETS, BENCH_TARGETS,
# DRIVER_TARGETS and CONFORMANCE_BINDINGS (conformance columns) collect them;
# DIST_TEST_TARGETS the cross-build checks of `make test-dist` (mk/dist.mk).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
export PATH := $(HOME)/.cargo/bin:$(PATH)

CARGO ?= cargo
# A build from scratch gains nothing from incremental state, and it is half a
# GB of disk (CARGO_INCREMENTAL=1 make ... keeps it for an edit-test loop).
export CARGO_INCREMENTAL ?= 0
VECTORS ?= conformance/vectors
# A make variable handed to the shell as one word, whatever it holds (a
# VECTORS path with spaces or quotes).
sh_quote = '$(subst ','\'',$(1))'
CONFORMANCE_BINDINGS := memory rust
TEST_TARGETS :=
BENCH_TARGETS :=
# Each binding adds the make target that builds its driver (docs/driver.md).
DRIVER_TARGETS :=
DIST_TEST_TARGETS :=

.PHONY: all demo test disk-room deps build lint harness-lint test-scripts test-rust conformance conformance-random conformance-lint bench bench-rust clean drivers

all: build

demo:
	$(CARGO) run --quiet --release -p slidelimit-cli --bin slidelimit -- simulate

deps:
	@scripts/deps.sh

build: deps
	$(CARGO) build --release -p slidelimit-cli --bin slidelimit

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# The hang guard's own tests (scripts/with-deadline.sh, which the test
# targets run under).
test-scripts:
	python3 -m unittest -q scripts/test_with_deadline.py scripts/test_make_vectors.py scripts/test_disk_room.py

# What make test from scratch writes at its fullest: 4,119 MB measured
# (fresh-clone-test at d2f0dd7 with an empty Go build cache of its own, which
# took 1.5 GB of it), plus Cargo's registry (about 0.5 GB) where it is not
# there yet. Debian's packages come on top when missing.
TEST_DISK_NEED_MB ?= 4600
disk-room:
	scripts/disk-room.sh $(TEST_DISK_NEED_MB)

# A hang guard (scripts/with-deadline.sh), far above the suite's time:
# 2 min here on 2026-12-05, building its test binaries included.
CARGO_TEST_DEADLINE_S ?= 1200
test-rust: deps
	scripts/with-redis.sh scripts/with-cluster.sh scripts/with-ttl-check.sh \
	  scripts/with-deadline.sh $(CARGO_TEST_DEADLINE_S) TERM $(CARGO) test --workspace

# The shared harness's Python under these folders, the suffix-less scripts
# included (ruff.toml lists them); python/ is linted by test-python. mypy
# (mypy.ini) checks the folders in one run and each of those scripts in a run
# of its own, as it names every script __main__.
HARNESS_PY := audit conformance e2e faults harness ops scripts
harness-lint: python-venv
	$(PY) -m ruff check $(HARNESS_PY)
	$(PY) -m ruff format --check $(HARNESS_PY)
	$(PY) -m mypy $(HARNESS_PY)
	scripts=$$($(PY) -c 'import tomllib; print(*tomllib.load(open("ruff.toml", "rb"))["extend-include"])') \
		&& for script in $$scripts; do $(PY) -m mypy "$$script" || exit 1; done

conformance-lint: deps
	conformance/lint
	python3 -m unittest -q conformance/test_check.py

# A column is a driver (docs/driver.md): DRIVER on Redis, DRIVER:memory on the
# binding's embedded engine; `memory` is rust:memory.
conformance: drivers
	scripts/with-redis.sh conformance/all $(call sh_quote,$(VECTORS)) $(CONFORMANCE_BINDINGS)

# Random vectors (conformance/derive/random_vectors.py), every expectation
# from the independent model, through every column: a fixed seed in make
# test; a new seed looks where the scenarios did not, e.g.
#   make conformance-random RANDOM_SEED=$$RANDOM RANDOM_COUNT=200
RANDOM_SEED ?= 1
RANDOM_COUNT ?= 40
RANDOM_VECTORS := .tmp/random-vectors/seed-$(RANDOM_SEED)-$(RANDOM_COUNT).json
conformance-random: drivers
	mkdir -p .tmp/random-vectors
	python3 conformance/derive/random_vectors.py --count $(RANDOM_COUNT) --seed $(RANDOM_SEED) --out $(RANDOM_VECTORS)
	conformance/lint --schema-only $(RANDOM_VECTORS)
	scripts/with-redis.sh conformance/all $(RANDOM_VECTORS) $(CONFORMANCE_BINDINGS)

bench-rust: deps
	$(BENCH_RUST_CMD)

bench: bench-rust

clean:
	$(CARGO) clean
	rm -rf .tmp dist

-include mk/*.mk

test: disk-room lint harness-lint test-scripts test-rust conformance-lint conformance conformance-random $(TEST_TARGETS)
	@echo "make test: all passed"

bench: $(BENCH_TARGETS)

# After every mk file's additions; the recipe (mk/dist.mk) then checks dist/.
test-dist: $(DIST_TEST_TARGETS)

# Every registered driver, built (drivers/<name> launches it).
drivers: $(DRIVER_TARGETS)
