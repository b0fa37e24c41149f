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

# The Go package links the prebuilt archives checked into the module
# (go/lib/<goos>_<goarch>/, `make go-libs`), so the tests run what users get;
# go-libs-check fails first when they lag behind the sources. go's build cache
# does not see a replaced C archive: a flag carrying the hash of
# go/lib/inputs.txt (which records the archives' sums) makes every test binary
# relink when they change (an absolute path: the commands run from go/).
GO_LIB_SUMS := go/lib/inputs.txt
GO_LIBFLAGS = GOFLAGS="-buildvcs=false -ldflags=-X=github.com/slidelimit/slidelimit/go.ffiLibHash=$$(sha256sum $(CURDIR)/$(GO_LIB_SUMS) | cut -c1-16)"

TEST_TARGETS += test-go
BENCH_TARGETS += bench-go
DRIVER_TARGETS += driver-go
GO_DRIVER := .tmp/go/bin/slidelimit-driver
CONFORMANCE_BINDINGS += go go:memory
# Without cgo (go/ffi_nocgo.go): the same C ABI compiled to wasm32
# (go/internal/wasm, `make go-wasm`) under wazero, with columns of its own.
DRIVER_TARGETS += driver-go-nocgo
GO_NOCGO_DRIVER := .tmp/go/bin/slidelimit-driver-nocgo
CONFORMANCE_BINDINGS += go-nocgo go-nocgo:memory

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

go-lint: go-libs-check go-wasm-check
	@out=$$(cd go && gofmt -l .); if [[ -n $$out ]]; then echo "gofmt needed: $$out" >&2; exit 1; fi
	cd go && $(GO_LIBFLAGS) $(GO) vet ./...
	cd go && CGO_ENABLED=0 $(GO) vet ./...

# go test runs three times: as users run it, with GODEBUG=cgocheck=1 spelled
# out, and with CGO_ENABLED=0 (the wasm path: every behaviour test runs on
# both; a few tests of one path's internals carry its build tag); River's tests get a PostgreSQL of their own, the rest a fresh Redis and
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

test-go: test-ffi go-libs-check go-wasm-check go-lint test-postgres-helper
	go/scripts/with-postgres.sh scripts/with-redis.sh scripts/with-cluster.sh scripts/with-ttl-check.sh bash -c '\
		export $(GO_LIBFLAGS) && cd go && $(GO) test -count=1 ./... && \
		GODEBUG=cgocheck=1 $(GO) test -count=1 ./... && \
		CGO_ENABLED=0 $(GO) test -count=1 ./...'

# Every benchmark with cgo, then both paths side by side in one table
# (go/scripts/bench-paths.sh: check cost, Acquire against raw EVALSHA).
bench-go: go-libs-check go-wasm-check
	scripts/with-redis.sh bash -c 'export $(GO_LIBFLAGS) && cd go && $(GO) test -run "^$$" -bench . -benchmem -count 1 . && \
		scripts/bench-paths.sh'

# The Go driver, launched by drivers/go. Incremental: cheap when nothing changed.
driver-go: go-libs-check
	@mkdir -p $(dir $(GO_DRIVER))
	cd go && $(GO_LIBFLAGS) $(GO) build -o $(CURDIR)/$(GO_DRIVER) ./cmd/slidelimit-driver

# The driver without cgo, launched by drivers/go-nocgo (the wasm path).
driver-go-nocgo: go-wasm-check
	@mkdir -p $(dir $(GO_NOCGO_DRIVER))
	cd go && CGO_ENABLED=0 $(GO) build -o $(CURDIR)/$(GO_NOCGO_DRIVER) ./cmd/slidelimit-driver

# ---- The wasm module of the cgo-free path (go/internal/wasm)

.PHONY: go-wasm go-wasm-check driver-go-nocgo

# Rebuilds go/internal/wasm/slidelimit.wasm (ffi-c/ for wasm32, small and
# path-independent: scripts/go-wasm.sh) and records its inputs; commit
# go/internal/wasm afterwards.
go-wasm: deps
	scripts/go-wasm.sh build

# Fast (no build): the recorded inputs and the module's sum still hold.
go-wasm-check:
	scripts/go-wasm.sh check

# ---- Prebuilt libraries, the module proxy directory, the install test (issue 11)

.PHONY: go-libs go-libs-check dist-go test-install-go test-dist-go

# Rebuilds go/lib/linux_{amd64,arm64}/libslidelimit_ffi.a (profile go-lib in
# Cargo.toml, arm64 cross-built: a staticlib needs no linker, only
# aarch64-linux-gnu-strip), copies the header into go/include/ and records
# go/lib/inputs.txt. Commit go/lib and go/include afterwards.
go-libs: deps
	scripts/deps-cross.sh
	scripts/go-libs.sh build

# Fast (no build): the recorded inputs of go/lib (sources, Cargo.lock, the
# profile, rustc -vV) and the archives' sums still hold (scripts/go-libs.sh).
go-libs-check:
	scripts/go-libs.sh check

# dist/go: a GOPROXY directory (GOPROXY=file://$(DIST)/go) holding this
# module at v$(VERSION). The zip is golang.org/x/mod/zip's (scripts/go-modzip,
# a module of its own) over what git would commit under go/; the .info time is
# the last commit's, so a rebuild gives the same bytes. Both checks first: the
# zip carries the prebuilt archives and the wasm module.
GO_MODULE := github.com/slidelimit/slidelimit/go
GO_MODULE_VERSION = v$(shell sed -n 's/^const Version = "\(.*\)"$$/\1/p' go/version.go)
dist-go: go-libs-check go-wasm-check
	rm -rf $(CURDIR)/dist/go && mkdir -p $(CURDIR)/dist/go
	cd go && git ls-files -co --exclude-standard . | while read -r f; do [[ -f $$f ]] && echo "$$f"; done \
	  | (cd $(CURDIR)/scripts/go-modzip && $(GO) run . -dir $(CURDIR)/go -module $(GO_MODULE) \
	      -version $(GO_MODULE_VERSION) -time "$$(git log -1 --format=%ct 2>/dev/null || echo 315532800)" \
	      -out $(CURDIR)/dist/go)

# A fresh module outside the repo, no cargo or rustc on PATH: gets the module
# from dist/go (no replace), builds it with cgo on and off, runs a check on the
# memory engine and one on Redis with each, and cross-builds linux/arm64 with
# CGO_ENABLED=0 (scripts/install/go.sh). Host only: for `make test`.
test-install-go: dist-go
	scripts/with-redis.sh scripts/without-rust.sh scripts/install/go.sh $(CURDIR)/dist/go $(GO_MODULE_VERSION:v%=%)

# The cgo cross-build for linux/arm64 (the module's linux_arm64 archive,
# Debian's aarch64-linux-gnu-gcc): `make test-dist` only.
DIST_TEST_TARGETS += test-dist-go
test-dist-go: dist-go
	scripts/deps-cross.sh
	scripts/without-rust.sh scripts/install/go.sh $(CURDIR)/dist/go $(GO_MODULE_VERSION:v%=%) cross-cgo
