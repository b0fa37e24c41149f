# slidelimit: `make demo` (no Redis needed) and `make test` (everything, from scratch).
# Bindings add their own targets in mk/*.mk: TEST_TARGETS, BENCH_TARGETS,
# DRIVER_TARGETS and CONFORMANCE_BINDINGS (conformance columns) collect them;
# DIST_TEST_TARGETS the cross-build checks of `make test-dist` (mk/dist.mk).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
export PATH := $(HOME)/.cargo/bin:$(PATH)

CARGO ?= cargo
VECTORS ?= conformance/vectors
CONFORMANCE_BINDINGS := memory rust
TEST_TARGETS :=
BENCH_TARGETS :=
# Each binding adds the make target that builds its driver (docs/driver.md).
DRIVER_TARGETS :=
DIST_TEST_TARGETS :=

.PHONY: all demo test deps build lint test-rust conformance conformance-lint bench bench-rust clean drivers

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

test-rust: deps
	scripts/with-redis.sh scripts/with-cluster.sh scripts/with-ttl-check.sh $(CARGO) test --workspace

conformance-lint: deps
	conformance/lint
	python3 -m unittest -q conformance/test_check.py

# A column is a driver (docs/driver.md): DRIVER on Redis, DRIVER:memory on the
# binding's embedded engine; `memory` is rust:memory.
conformance: drivers
	scripts/with-redis.sh conformance/all $(VECTORS) $(CONFORMANCE_BINDINGS)

bench-rust: deps
	$(BENCH_RUST_CMD)

bench: bench-rust

clean:
	$(CARGO) clean
	rm -rf .tmp dist

-include mk/*.mk

test: lint test-rust conformance-lint conformance $(TEST_TARGETS)
	@echo "make test: all passed"

bench: $(BENCH_TARGETS)

# After every mk file's additions; the recipe (mk/dist.mk) then checks dist/.
test-dist: $(DIST_TEST_TARGETS)

# Every registered driver, built (drivers/<name> launches it).
drivers: $(DRIVER_TARGETS)
