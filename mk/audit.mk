# The cross-language audit (audit/run, docs/audit.md): one driver process per
# registered binding (docs/driver.md) shares one tenant's budget with the
# others at the same time; no rolling window may hold more than the limit.
# And the conformance vectors of every binding on a six-node Redis Cluster.
#   make audit         # full: 9 windows of 2 s per run, log, bucketed window
#                      # and counter, uniform and burst, standalone, Cluster
#                      # and Cluster with a failover one window in; then
#                      # log, bucketed window and a policy of several
#                      # limits on caller clocks skewed over ±50 ms
#                      # (issue 12), standalone and Cluster; the deny
#                      # cache; then mixed costs (AUDIT_COSTS permits a
#                      # call), on server time with a failover, and skewed;
#                      # then AUDIT_TENANTS tenants at once, each checked
#                      # apart, with a failover
#   make test-audit    # short (part of make test): the log, then the
#                      # bucketed window, uniform, 3 windows, standalone,
#                      # Cluster, Cluster + failover; then the bucketed
#                      # window and a policy of several limits on clocks
#                      # skewed ±50 ms, standalone (~25 s);
#                      # then both exact algorithms at limit 3 per 1.5 s on
#                      # clocks skewed ±200 ms, where keys go idle between
#                      # admissions (the caller-time TTL margin, ~18 s);
#                      # then a policy of several limits and the log with
#                      # the local deny cache on, standalone and Cluster;
#                      # then the bucketed window and a policy of several
#                      # limits with mixed costs (1, 2, 3 and 5 permits a
#                      # call), standalone and Cluster; then a policy of
#                      # several limits over AUDIT_TENANTS tenants at once
#                      # (each checked apart) with the deny cache, standalone,
#                      # Cluster, Cluster + failover (~1 min); and the load
#                      # op's tenants in every driver (audit/test_load.py)
#   make audit-reshard # the tenant's slot moved to another master one window
#                      # in (MIGRATING/IMPORTING, MIGRATE, SETSLOT NODE),
#                      # log and several limits, 4 windows: never over the
#                      # limit, at most AUDIT_RESHARD_MAX_ERRORS failed calls
#                      # per driver (docs/audit.md, "Slot migration")
#   make bench-flood   # the deny cache's figure: Redis calls per attempt
#                      # in a denial flood (audit/flood), 10x and 100x
#   make conformance-cluster
#   make audit AUDIT_DRIVERS=rust,go   # only these drivers (default: all registered)

AUDIT_WINDOWS ?= 9
AUDIT_RUNS ?= log:uniform,log:burst,bucketed:uniform,bucketed:burst,counter:uniform,counter:burst,multi:uniform,multi:burst
AUDIT_DRIVERS ?=
AUDIT_SKEW_MS ?= 50
AUDIT_COSTS ?= 1,2,3,5
AUDIT_TENANTS ?= 8
AUDIT_DRIVER_FLAG = $(if $(AUDIT_DRIVERS),--drivers $(AUDIT_DRIVERS))
AUDIT_RESHARD_MAX_ERRORS ?= 32

TEST_TARGETS += test-audit conformance-cluster
BENCH_TARGETS += bench-flood

.PHONY: audit audit-deps audit-reshard test-audit conformance-cluster bench-flood

# audit/run builds nothing: every registered driver is built first.
audit-deps: deps drivers

test-audit: audit-deps
	python3 -m unittest -q audit/test_audit_check.py audit/test_run.py audit/test_load.py
	scripts/with-redis.sh scripts/with-cluster.sh audit/run --windows 3 $(AUDIT_DRIVER_FLAG) \
		--targets standalone,cluster,cluster-failover --runs log:uniform,bucketed:uniform --out .tmp/audit-short
	scripts/with-redis.sh audit/run --windows 3 $(AUDIT_DRIVER_FLAG) --skew-ms $(AUDIT_SKEW_MS) \
		--targets standalone --runs bucketed:uniform,multi:uniform --out .tmp/audit-short
	scripts/with-redis.sh audit/run --windows 3 $(AUDIT_DRIVER_FLAG) --skew-ms 200 --limit 3 --window-ms 1500 \
		--targets standalone --runs log:uniform,bucketed:uniform --out .tmp/audit-short-sparse
	scripts/with-redis.sh scripts/with-cluster.sh audit/run --windows 4 $(AUDIT_DRIVER_FLAG) --deny-cache --jitter-ms 20 \
		--targets standalone,cluster --runs multi:uniform,log:uniform --out .tmp/audit-short-cache
	scripts/with-redis.sh scripts/with-cluster.sh audit/run --windows 3 $(AUDIT_DRIVER_FLAG) --costs $(AUDIT_COSTS) \
		--targets standalone,cluster --runs bucketed:uniform,multi:uniform --out .tmp/audit-short-costs
	scripts/with-redis.sh scripts/with-cluster.sh audit/run --windows 3 $(AUDIT_DRIVER_FLAG) --tenants $(AUDIT_TENANTS) \
		--deny-cache --targets standalone,cluster,cluster-failover --runs multi:uniform --out .tmp/audit-short-tenants

audit: audit-deps
	scripts/with-redis.sh scripts/with-cluster.sh audit/run --windows $(AUDIT_WINDOWS) $(AUDIT_DRIVER_FLAG) \
		--targets standalone,cluster,cluster-failover --runs $(AUDIT_RUNS) --out .tmp/audit
	scripts/with-redis.sh scripts/with-cluster.sh audit/run --windows $(AUDIT_WINDOWS) $(AUDIT_DRIVER_FLAG) \
		--skew-ms $(AUDIT_SKEW_MS) --targets standalone,cluster --runs log:uniform,bucketed:uniform,multi:uniform,multi:burst \
		--out .tmp/audit
	scripts/with-redis.sh scripts/with-cluster.sh audit/run --windows $(AUDIT_WINDOWS) $(AUDIT_DRIVER_FLAG) \
		--deny-cache --jitter-ms 20 --targets standalone,cluster,cluster-failover --runs log:burst,multi:uniform \
		--out .tmp/audit-cache
	scripts/with-redis.sh scripts/with-cluster.sh audit/run --windows $(AUDIT_WINDOWS) $(AUDIT_DRIVER_FLAG) \
		--costs $(AUDIT_COSTS) --targets standalone,cluster,cluster-failover --runs log:uniform,bucketed:burst,multi:uniform \
		--out .tmp/audit-costs
	scripts/with-redis.sh scripts/with-cluster.sh audit/run --windows $(AUDIT_WINDOWS) $(AUDIT_DRIVER_FLAG) \
		--costs $(AUDIT_COSTS) --skew-ms $(AUDIT_SKEW_MS) --targets standalone,cluster --runs log:uniform,bucketed:uniform \
		--out .tmp/audit-costs
	scripts/with-redis.sh scripts/with-cluster.sh audit/run --windows $(AUDIT_WINDOWS) $(AUDIT_DRIVER_FLAG) \
		--tenants $(AUDIT_TENANTS) --targets standalone,cluster,cluster-failover --runs log:uniform,bucketed:burst,multi:uniform \
		--out .tmp/audit-tenants

bench-flood: audit-deps
	scripts/with-redis.sh audit/flood $(AUDIT_DRIVER_FLAG) --factor 10
	scripts/with-redis.sh audit/flood $(AUDIT_DRIVER_FLAG) --factor 100

# Every conformance column on the Cluster (SLIDELIMIT_CONFORMANCE_CLUSTER=1
# makes the Redis columns use SLIDELIMIT_TEST_CLUSTER_URLS); the same table
# and byte-identity check as `make conformance`.
conformance-cluster: drivers
	scripts/with-cluster.sh env SLIDELIMIT_CONFORMANCE_CLUSTER=1 \
		conformance/all $(call sh_quote,$(VECTORS)) $(CONFORMANCE_BINDINGS)

audit-reshard: audit-deps
	scripts/with-cluster.sh audit/run --windows 4 $(AUDIT_DRIVER_FLAG) --max-errors $(AUDIT_RESHARD_MAX_ERRORS) \
		--targets cluster-reshard --runs log:uniform,multi:uniform --out .tmp/audit-reshard
