"""Shared test harness: drives every binding through its driver (docs/driver.md)."""
