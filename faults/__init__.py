"""The shared fault and bad-input harness (faults/run, docs/driver.md)."""
