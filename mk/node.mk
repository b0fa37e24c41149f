# Node binding (node/: napi-rs addon + JS package `slidelimit`) and the wasm
# build (wasm/), which the package falls back to. See docs/node.md.

TEST_TARGETS += test-node
BENCH_TARGETS += bench-node
# drivers/node and drivers/wasm (docs/driver.md) run node/scripts/driver.js.
DRIVER_TARGETS += driver-node
CONFORMANCE_BINDINGS += node node:memory wasm wasm:memory

NODE_TOOLS := $(CURDIR)/.tmp/tools
# wasm-bindgen-cli must match the wasm-bindgen crate exactly; the pin lives in wasm/Cargo.toml.
WASM_BINDGEN_VERSION := $(shell sed -n 's/^wasm-bindgen = "=\([0-9.]*\)".*/\1/p' wasm/Cargo.toml)
WASM_BINDGEN := $(NODE_TOOLS)/bin/wasm-bindgen
NODE_TARGET_DIR := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)
NODE_TEST_FILES := test/limiter.test.js test/multi_limit.test.js test/deny_cache.test.js test/cluster.test.js test/faults.test.js test/exports.test.mjs
# BullMQ's own queue keys never expire (they are the app's, not slidelimit's):
# dropped after the BullMQ tests so that the TTL check sees only ours.
NODE_DROP_BULLMQ_KEYS := redis-cli -u "$$SLIDELIMIT_TEST_REDIS_URL" --scan --pattern "bull:*" \
  | xargs -r redis-cli -u "$$SLIDELIMIT_TEST_REDIS_URL" del >/dev/null

.PHONY: node-build node-addon node-wasm node-wasm-bindgen node-deps node-typecheck test-node bench-node driver-node \
  node-addon-cross dist-npm test-install-npm

node-addon:
	$(CARGO) build --release -p slidelimit-node
	node node/scripts/install-addon.js $(NODE_TARGET_DIR)

# Installs wasm-bindgen-cli at the pinned version into .tmp/tools (cached).
# Not --locked: the CLI's own lock file pins a webpki-roots release that
# crates.io no longer serves.
node-wasm-bindgen:
	@if [[ "$$($(WASM_BINDGEN) --version 2>/dev/null)" != "wasm-bindgen $(WASM_BINDGEN_VERSION)" ]]; then \
	  echo "installing wasm-bindgen-cli $(WASM_BINDGEN_VERSION) into .tmp/tools" >&2; \
	  $(CARGO) install --quiet wasm-bindgen-cli --version "=$(WASM_BINDGEN_VERSION)" --root $(NODE_TOOLS); \
	fi

node-wasm: node-wasm-bindgen
	rustup target add wasm32-unknown-unknown
	$(CARGO) build --release -p slidelimit-wasm --target wasm32-unknown-unknown
	$(WASM_BINDGEN) --target nodejs --out-dir node/dist/wasm \
	  $(NODE_TARGET_DIR)/wasm32-unknown-unknown/release/slidelimit_wasm.wasm

node-build: node-addon node-wasm

# npm packages, napi-rs style (node/npm/*/package.json, node/scripts/pack-npm.js):
# slidelimit, @slidelimit/linux-x64-gnu, @slidelimit/linux-arm64-gnu, @slidelimit/wasm.
# Cross builds: only node-addon-cross (the linux-arm64-gnu addon, with Debian's
# aarch64 gcc as linker; scripts/deps-cross.sh installs it) and dist-npm, which
# needs it. make test never cross-builds: test-install-npm packs the host's only.
NODE_CROSS_TRIPLES := aarch64-unknown-linux-gnu

node-addon-cross:
	scripts/deps-cross.sh
	for triple in $(NODE_CROSS_TRIPLES); do \
	  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
	    $(CARGO) build --release -p slidelimit-node --target $$triple; \
	  node node/scripts/install-addon.js $(NODE_TARGET_DIR) $$triple; \
	done

dist-npm: node-build node-addon-cross
	rm -rf dist/npm
	node node/scripts/pack-npm.js dist/npm --platforms=all

# Installs the packed main, host-platform and wasm packages into a fresh
# project outside the repo, without cargo/rustc on PATH (node/scripts/test-install.sh).
test-install-npm: deps node-build node-deps
	scripts/with-redis.sh node/scripts/test-install.sh

driver-node: node-build node-deps

# npm ci from the committed package-lock.json; redone when the lock changes.
node-deps: node/node_modules/.package-lock.json

node/node_modules/.package-lock.json: node/package-lock.json node/package.json
	cd node && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

node-typecheck: node-deps
	cd node && npx --no-install tsc -p tsconfig.json

# A test stuck on a promise fails after 10 min, and a handle a failed hook
# left open does not keep a file's process (and make test) running.
NODE_TEST = node --test --test-force-exit --test-timeout=600000

# The Redis suites run on a fresh Redis and a six-node Cluster (three masters,
# three replicas); with-cluster.sh wraps with-ttl-check.sh so that the TTL
# check SCANs the Cluster's masters too.
test-node: deps node-build node-deps node-typecheck
	$(CARGO) test --quiet -p slidelimit-js-glue shells  # no fn body in both shells
	cd node && SLIDELIMIT_IMPL=native ../scripts/with-redis.sh ../scripts/with-cluster.sh ../scripts/with-ttl-check.sh \
	  $(NODE_TEST) $(NODE_TEST_FILES)
	cd node && SLIDELIMIT_IMPL=wasm ../scripts/with-redis.sh ../scripts/with-cluster.sh ../scripts/with-ttl-check.sh \
	  $(NODE_TEST) $(NODE_TEST_FILES)
	cd node && ../scripts/with-redis.sh ../scripts/with-ttl-check.sh \
	  bash -c '$(NODE_TEST) test/bullmq.test.js test/peer-range.test.js test/docs.test.js && $(NODE_DROP_BULLMQ_KEYS)'
	cd node && $(NODE_TEST) test/packaging.test.js

bench-node: deps node-build node-deps
	cd node && SLIDELIMIT_IMPL=native ../scripts/with-redis.sh node bench/bench.js
	cd node && SLIDELIMIT_IMPL=wasm ../scripts/with-redis.sh node bench/bench.js --skip-micro

# The node and wasm conformance runners need the package built (only when
# they run: CONFORMANCE_BINDINGS may be narrowed on the command line).
ifneq ($(filter node wasm,$(CONFORMANCE_BINDINGS)),)
conformance: node-build node-deps
endif
