# The Rust binding's driver (docs/driver.md): target/release/slidelimit-driver,
# launched by drivers/rust, for conformance/, audit/ and faults/.

DRIVER_TARGETS += driver-rust

.PHONY: driver-rust

driver-rust: deps
	$(CARGO) build --release -p slidelimit-cli --bin slidelimit-driver
