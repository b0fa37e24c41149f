// Package linux_arm64 holds the prebuilt libslidelimit_ffi.a that cgo links on
// linux/arm64 (see ffi.go's #cgo lines); it has no Go code. `make go-libs`
// rebuilds it from the Rust sources.
package linux_arm64
