# Release artifacts (issue 11). `make dist` builds every package into dist/
# and writes dist/SHA256SUMS; `make test-dist` checks the sums and runs the
# cross-build checks other mk files add to DIST_TEST_TARGETS (the Makefile
# makes them prerequisites). dist-go and dist-npm live in mk/go.mk and
# mk/node.mk. The install tests (`make test-install`, in `make test`) install
# the host's packages from dist/ in a temp directory with no cargo or rustc on
# PATH (scripts/without-rust.sh).

TEST_TARGETS += check-versions test-install

DIST := $(CURDIR)/dist
DIST_TMP := $(CURDIR)/.tmp/dist
DIST_CARGO_TARGET := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)
# The one version (scripts/check-versions.py holds everything else to it).
VERSION := $(shell sed -n '/^\[workspace\.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)

# The last commit's time for every timestamp inside an archive (maturin's
# wheel and sdist, gem build): rebuilding from the same commit gives the same
# bytes, so `make test`'s install tests leave dist/SHA256SUMS valid.
dist-python dist-ruby dist-c dist-crates: export SOURCE_DATE_EPOCH := \
  $(or $(shell git log -1 --format=%ct 2>/dev/null),315532800)

.PHONY: dist dist-python dist-ruby dist-c dist-crates test-dist check-versions \
	test-install test-install-c test-install-python test-install-ruby

dist: dist-go dist-npm dist-python dist-ruby dist-c dist-crates
	cd $(DIST) && find . -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort \
	  | xargs -r -d '\n' sha256sum -- >SHA256SUMS
	@echo "dist: $$(wc -l <$(DIST)/SHA256SUMS) files, $$(du -sh $(DIST) | cut -f1) in dist/"

# The sums are checked after the cross-build checks ran (they must not change
# an artifact), and every file in dist/ must be listed.
test-dist: dist
	scripts/check-dist.sh $(DIST) $(VERSION)

# The checker's own tests first, then the repository.
check-versions:
	python3 -m unittest -q scripts/test_check_versions.py
	python3 scripts/check-versions.py

# The abi3 wheel (CPython 3.9+) and the sdist, built by maturin in the venv.
dist-python: python-venv deps
	rm -rf $(DIST)/python
	cd python && $(PY) -m maturin build --quiet --release --out $(DIST)/python
	cd python && $(PY) -m maturin sdist --out $(DIST)/python

# The platform gem: ruby/ with ffi-c's shared library (debug info stripped)
# under lib/slidelimit/native/<platform>/, built by Debian's `gem`.
dist-ruby: ffi-lib
	rm -rf $(DIST)/ruby $(DIST_TMP)/ruby && mkdir -p $(DIST)/ruby $(DIST_TMP)/ruby
	cp -R ruby/lib ruby/slidelimit.gemspec $(DIST_TMP)/ruby/
	platform=$$(ruby -e 'print Gem::Platform.local') && \
	  mkdir -p $(DIST_TMP)/ruby/lib/slidelimit/native/$$platform && \
	  strip --strip-debug -o $(DIST_TMP)/ruby/lib/slidelimit/native/$$platform/libslidelimit_ffi.so \
	    $(DIST_CARGO_TARGET)/release/libslidelimit_ffi.so
	cd $(DIST_TMP)/ruby && gem build --quiet slidelimit.gemspec >/dev/null
	mv $(DIST_TMP)/ruby/slidelimit-$(VERSION)-*.gem $(DIST)/ruby/

# The header, both libraries (debug info stripped) and two pkg-config files
# whose prefix is wherever they are (${pcfiledir}): slidelimit links the
# shared library, slidelimit-static the archive and what Rust's std needs
# from the system (rustc --print native-static-libs on linux-gnu).
FFI_STATIC_DEPS := -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
dist-c: ffi-lib
	rm -rf $(DIST)/c && mkdir -p $(DIST)/c
	cp ffi-c/include/slidelimit.h $(DIST)/c/
	strip --strip-debug -o $(DIST)/c/libslidelimit_ffi.a $(DIST_CARGO_TARGET)/release/libslidelimit_ffi.a
	strip --strip-debug -o $(DIST)/c/libslidelimit_ffi.so $(DIST_CARGO_TARGET)/release/libslidelimit_ffi.so
	printf '%s\n' 'prefix=$${pcfiledir}' 'includedir=$${prefix}' 'libdir=$${prefix}' '' \
	  'Name: slidelimit' 'Description: slidelimit C ABI (shared library)' 'Version: $(VERSION)' \
	  'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -lslidelimit_ffi' >$(DIST)/c/slidelimit.pc
	printf '%s\n' 'prefix=$${pcfiledir}' 'includedir=$${prefix}' 'libdir=$${prefix}' '' \
	  'Name: slidelimit-static' 'Description: slidelimit C ABI (static library)' 'Version: $(VERSION)' \
	  'Cflags: -I$${includedir}' 'Libs: $${libdir}/libslidelimit_ffi.a $(FFI_STATIC_DEPS)' \
	  >$(DIST)/c/slidelimit-static.pc

# cargo package (and its verify build) for every crate not marked
# publish = false: core and the Rust binding today. cargo verifies the
# binding against core's packaged tarball (a local overlay registry), so no
# --no-verify is needed. --allow-dirty: a working tree with changes still
# packages (a release is cut from a clean checkout).
dist-crates: deps
	rm -rf $(DIST)/crates && mkdir -p $(DIST)/crates
	crates=$$($(CARGO) metadata --no-deps --format-version 1 | python3 -c \
	  'import json, sys; print(" ".join(p["name"] for p in json.load(sys.stdin)["packages"] if p["publish"] is None))') && \
	  $(CARGO) package --quiet --allow-dirty $$(printf -- '-p %s ' $$crates) && \
	  for c in $$crates; do cp $(DIST_CARGO_TARGET)/package/$$c-$(VERSION).crate $(DIST)/crates/; done

# Host-only install tests for `make test`; npm and Go add theirs in
# mk/node.mk and mk/go.mk.
test-install: test-install-c test-install-python test-install-ruby test-install-npm test-install-go

test-install-c: dist-c
	scripts/without-rust.sh scripts/install/c.sh $(DIST)/c $(VERSION)

test-install-python: dist-python
	scripts/with-redis.sh scripts/without-rust.sh scripts/install/python.sh $(DIST)/python $(VERSION)

test-install-ruby: dist-ruby
	scripts/with-redis.sh scripts/without-rust.sh scripts/install/ruby.sh $(DIST)/ruby $(VERSION)
