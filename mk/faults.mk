# The shared fault and bad-input harness (faults/, docs/driver.md): every
# scenario against every registered driver, one scenario x driver table.
# First its self-tests: broken drivers (faults/fake_driver.py, wrapping the
# Rust driver) must FAIL the scenarios meant to catch them.
# Narrow it with FAULTS_ARGS, e.g. FAULTS_ARGS="--drivers rust,go --scenarios tls".

TEST_TARGETS += faults
FAULTS_ARGS ?=

.PHONY: faults faults-selftest

faults-selftest: driver-rust
	python3 -m unittest -q faults/test_harness.py

faults: drivers faults-selftest
	faults/run $(FAULTS_ARGS)
