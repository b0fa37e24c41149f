# Fuzzing core's pure code with cargo-fuzz (libFuzzer, nightly Rust): the
# reply parser, the key builder and the memory engine (the contract's
# promises: never over a limit, exact retries), FUZZ_SECONDS each. Not part
# of `make test`, which only checks that they build (fuzz-check, below).
#   make fuzz                 # 60 s per target
#   make fuzz FUZZ_SECONDS=600
# A crash leaves its input in fuzz/artifacts/<target>/; turn it into a unit
# test in core (or a conformance vector) before fixing it.

FUZZ_SECONDS ?= 60
FUZZ_TARGETS := reply key engine
CARGO_FUZZ_VERSION := 0.13.2
CARGO_FUZZ := .tmp/tools/cargo-fuzz-$(CARGO_FUZZ_VERSION)/bin/cargo-fuzz

.PHONY: fuzz fuzz-toolchain fuzz-check

# In `make test`: the targets type-checked and linted against core as it is
# (stable Rust, libFuzzer not built), so they cannot fall behind core's API
# unseen, as the reply target once did. Running them is `make fuzz`.
TEST_TARGETS += fuzz-check
fuzz-check: deps
	$(CARGO) clippy --manifest-path fuzz/Cargo.toml --bins --locked --no-default-features -- -D warnings
	$(CARGO) fmt --manifest-path fuzz/Cargo.toml --check

$(CARGO_FUZZ):
	$(CARGO) install cargo-fuzz --version $(CARGO_FUZZ_VERSION) --locked --quiet \
		--root .tmp/tools/cargo-fuzz-$(CARGO_FUZZ_VERSION)

# libFuzzer's instrumentation needs nightly; rustup fetches it once.
fuzz-toolchain:
	rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal

fuzz: $(CARGO_FUZZ) fuzz-toolchain
	cd fuzz && for target in $(FUZZ_TARGETS); do \
		RUSTUP_TOOLCHAIN=nightly ../$(CARGO_FUZZ) fuzz run $$target -- \
			-max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 || exit 1; \
	done
