# The whole system end to end (e2e/, docs/e2e.md): River, BullMQ, Sidekiq and
# Celery workers spending the same tenants' budgets at a fake provider that
# enforces its own rolling window, watched by a real Prometheus (Debian's).
# `make e2e` is scaled (60 per 6 s); `make e2e-full` runs 600 per 60 s. Not
# part of `make test`; test-ops (the ops/ rules under promtool) and
# test-e2e-tools (the provider and the run's checks, no servers) are.

TEST_TARGETS += test-ops test-e2e-tools

E2E_RIVER := .tmp/e2e/river
# Extra flags for e2e/run.py, e.g. E2E_ARGS="--systems river,bullmq".
E2E_ARGS ?=

.PHONY: e2e e2e-full e2e-build e2e-river test-ops test-e2e-tools

# The River worker, linked against this checkout's Go binding (replace in e2e/river/go.mod).
e2e-river: ffi-lib
	@mkdir -p $(dir $(E2E_RIVER))
	cd e2e/river && $(GO_LIBFLAGS) $(GO) build -o $(CURDIR)/$(E2E_RIVER) .

# The packages as their users get them: slidelimit for Node resolves through
# a node_modules of the run's own (a link to node/).
e2e-build: deps e2e-river node-build node-deps driver-ruby python-build
	@mkdir -p .tmp/e2e/node_modules
	ln -sfn ../../../node .tmp/e2e/node_modules/slidelimit

e2e: e2e-build
	go/scripts/with-postgres.sh scripts/with-redis.sh python3 e2e/run.py $(E2E_ARGS)

e2e-full: e2e-build
	go/scripts/with-postgres.sh scripts/with-redis.sh python3 e2e/run.py \
	  --limit 600 --window-ms 60000 --steady-windows 1 --jitter-ms 10000 --scrape-s 5 --out e2e/out-full $(E2E_ARGS)

test-ops: deps
	promtool check rules ops/rules/*.yml
	promtool test rules ops/tests/*.yml
	python3 ops/grafana/check.py ops/grafana/slidelimit.json ops/rules/*.yml

test-e2e-tools:
	python3 -m unittest discover -s e2e -p 'test_*.py' -q
