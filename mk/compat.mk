# The compatibility matrix (docs/compatibility.md): every binding on Redis
# 6.2, Redis 7.0 (Debian's), Redis 7.2 and Valkey 8, standalone, plus Valkey 8
# as a six-node Cluster. Not part of `make test` (.ci/run runs it after).
#   make compat                              # builds the servers once (.tmp/servers), runs it all
#   make compat COMPAT_SERVERS="redis-6.2.16" COMPAT_CLUSTER_SERVERS=
#   make compat-servers                      # only check the archives and build the servers
# The servers are built from source archives in SLIDELIMIT_SERVERS_DIR
# (default ../shared/servers next to the checkout), checked against its
# SHA256SUMS first; without them make compat says what to put where and fails.

# A server is an archive name (without .tar.gz) or `debian` (redis-server on PATH).
COMPAT_SERVERS ?= redis-6.2.16 debian redis-7.2.6 valkey-8.0.1
COMPAT_CLUSTER_SERVERS ?= valkey-8.0.1
COMPAT_ARCHIVES = $(filter-out debian,$(sort $(COMPAT_SERVERS) $(COMPAT_CLUSTER_SERVERS)))

.PHONY: compat compat-servers compat-archives

# Archives and servers first (a machine without them fails here, before
# building anything else); then the CLI (the server-time check runs it) and
# every registered driver (docs/driver.md), which conformance/all and
# audit/run drive and never build.
compat-servers:
	@$(if $(COMPAT_ARCHIVES),scripts/compat-servers.sh build $(COMPAT_ARCHIVES),:)

compat: compat-servers
	$(MAKE) --no-print-directory build drivers
	scripts/compat.sh --bindings "$(CONFORMANCE_BINDINGS)" --vectors $(call sh_quote,$(VECTORS)) \
		--servers "$(COMPAT_SERVERS)" --cluster "$(COMPAT_CLUSTER_SERVERS)"

# The archive names make compat needs (.ci/run asks).
compat-archives:
	@echo $(COMPAT_ARCHIVES)
