# The cross-language audit (audit/run, docs/audit.md): Rust, Go, Node-native
# and Node-wasm worker processes share one tenant's budget at the same time;
# no rolling window may hold more than the limit. And the conformance vectors
# of every binding on a six-node Redis Cluster.
#   make audit         # full: 9 windows of 2 s per run, log and counter,
#                      # uniform and burst, standalone, Cluster and Cluster
#                      # with a failover one window in
#   make test-audit    # short (part of make test): the log, uniform,
#                      # 3 windows, standalone, Cluster, Cluster + failover
#   make conformance-cluster

AUDIT_WINDOWS ?= 9
AUDIT_RUNS ?= log:uniform,log:burst,counter:uniform,counter:burst

TEST_TARGETS += test-audit conformance-cluster

.PHONY: audit audit-deps test-audit conformance-cluster

# The Node package (addon, wasm, node_modules); audit/run builds the Rust
# and Go workers itself.
audit-deps: deps node-build node-deps

test-audit: audit-deps
	python3 -m unittest -q audit/test_check.py
	scripts/with-redis.sh scripts/with-cluster.sh audit/run --windows 3 \
		--targets standalone,cluster,cluster-failover --runs log:uniform --out .tmp/audit-short

audit: audit-deps
	scripts/with-redis.sh scripts/with-cluster.sh audit/run --windows $(AUDIT_WINDOWS) \
		--targets standalone,cluster,cluster-failover --runs $(AUDIT_RUNS) --out .tmp/audit

# Every binding's runner on the Cluster (SLIDELIMIT_CONFORMANCE_CLUSTER=1
# makes the runners use SLIDELIMIT_TEST_CLUSTER_URLS); the same table and
# byte-identity check as `make conformance`.
conformance-cluster: build node-build node-deps
	scripts/with-cluster.sh env SLIDELIMIT_CONFORMANCE_CLUSTER=1 \
		conformance/all $(VECTORS) $(CONFORMANCE_BINDINGS)
