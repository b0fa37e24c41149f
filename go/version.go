package slidelimit

// Version is the release of this module, the same number as every crate,
// package and gem of slidelimit (the workspace version in Cargo.toml;
// scripts/check-versions.py keeps them equal). Its Go tag is "v" + Version.
const Version = "0.1.0"
