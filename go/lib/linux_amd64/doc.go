// Package linux_amd64 holds the prebuilt libslidelimit_ffi.a that cgo links on
// linux/amd64 (see ffi.go's #cgo lines); it has no Go code. `make go-libs`
// rebuilds it from the Rust sources.
package linux_amd64
