# The C ABI (ffi-c/) and the Go binding (go/): static library, header drift
# check, the C test under valgrind, go vet/gofmt, go test with a real Redis and
# a real PostgreSQL (River), the Go driver (docs/driver.md) and benchmarks.
export PATH := $(PATH):/usr/local/go/bin

GO ?= go
CBINDGEN_VERSION := 0.29.4
TOOLS_DIR := .tmp/tools
CBINDGEN := $(TOOLS_DIR)/cbindgen-$(CBINDGEN_VERSION)/bin/cbindgen
FFI_LIB := target/release/libslidelimit_ffi.a
FFI_HEADER := ffi-c/include/slidelimit.h
FFI_TEST := .tmp/ffi/ffi_test

# go's build cache does not see a rebuilt C library: a flag carrying its hash
# makes every test binary relink when it changes (an absolute path: the
# commands that use it run from go/).
GO_LIBFLAGS = GOFLAGS="-buildvcs=false -ldflags=-X=github.com/slidelimit/slidelimit/go.ffiLibHash=$$(sha256sum $(CURDIR)/$(FFI_LIB) | cut -c1-16)"

TEST_TARGETS += test-go
BENCH_TARGETS += bench-go
DRIVER_TARGETS += driver-go
GO_DRIVER := .tmp/go/bin/slidelimit-driver
CONFORMANCE_BINDINGS += go go:memory

.PHONY: ffi-lib ffi-header ffi-header-check test-ffi go-lint test-postgres-helper test-go bench-go driver-go

# cbindgen's version is pinned: another version may write another header.
$(CBINDGEN):
	$(CARGO) install cbindgen --version $(CBINDGEN_VERSION) --locked --quiet \
		--root $(TOOLS_DIR)/cbindgen-$(CBINDGEN_VERSION)

ffi-lib: deps
	$(CARGO) build --release -p slidelimit-ffi

# Regenerates the checked-in header (commit the result).
ffi-header: $(CBINDGEN)
	$(CBINDGEN) --quiet --config ffi-c/cbindgen.toml --crate slidelimit-ffi --output $(FFI_HEADER) ffi-c

# Fails when the checked-in header differs from what the sources generate.
ffi-header-check: $(CBINDGEN)
	@mkdir -p .tmp/ffi
	$(CBINDGEN) --quiet --config ffi-c/cbindgen.toml --crate slidelimit-ffi --output .tmp/ffi/slidelimit.h ffi-c
	@diff -u $(FFI_HEADER) .tmp/ffi/slidelimit.h || \
		{ echo "$(FFI_HEADER) is stale: run 'make ffi-header' and commit it" >&2; exit 1; }

# The C test program calls every function (NULL, zero-length, invalid input)
# and must be clean under valgrind: no leak, no invalid read.
test-ffi: ffi-lib ffi-header-check
	@mkdir -p .tmp/ffi
	cc -std=c11 -Wall -Wextra -Werror -pedantic -g -I ffi-c/include ffi-c/tests/ffi_test.c \
		$(FFI_LIB) -lpthread -ldl -lm -o $(FFI_TEST)
	valgrind -q --leak-check=full --show-leak-kinds=definite,indirect,possible \
		--errors-for-leak-kinds=definite,indirect,possible --error-exitcode=1 $(FFI_TEST)

go-lint: ffi-lib
	@out=$$(cd go && gofmt -l .); if [[ -n $$out ]]; then echo "gofmt needed: $$out" >&2; exit 1; fi
	cd go && $(GO_LIBFLAGS) $(GO) vet ./...

# go test runs twice: as users run it, and with GODEBUG=cgocheck=1 spelled
# out; River's tests get a PostgreSQL of their own, the rest a fresh Redis and
# a six-node Cluster (three masters, three replicas). Afterwards
# scripts/check-ttl.py SCANs that Redis and the Cluster's masters (so
# with-cluster.sh wraps with-ttl-check.sh): no key the Go tests left may lack
# a TTL (servers the tests start themselves check it before they stop).
# The PostgreSQL helper runs the server as another user when run as root; it
# must work from a checkout under a private (0700) directory.
# Two tests run the go command themselves (so it must be on PATH): go list
# -deps (no Prometheus in the main package's graph) and the Installing steps
# of docs/go.md in a fresh project under .tmp/go/install-project.
test-postgres-helper: deps
	go/scripts/test-with-postgres.sh

test-go: test-ffi go-lint test-postgres-helper
	go/scripts/with-postgres.sh scripts/with-redis.sh scripts/with-cluster.sh scripts/with-ttl-check.sh bash -c '\
		export $(GO_LIBFLAGS) && cd go && $(GO) test -count=1 ./... && \
		GODEBUG=cgocheck=1 $(GO) test -count=1 ./...'

bench-go: ffi-lib
	scripts/with-redis.sh bash -c 'export $(GO_LIBFLAGS) && cd go && $(GO) test -run "^$$" -bench . -benchmem -count 1 .'

# The Go driver, launched by drivers/go. Incremental: cheap when nothing changed.
driver-go: ffi-lib
	@mkdir -p $(dir $(GO_DRIVER))
	cd go && $(GO_LIBFLAGS) $(GO) build -o $(CURDIR)/$(GO_DRIVER) ./cmd/slidelimit-driver
