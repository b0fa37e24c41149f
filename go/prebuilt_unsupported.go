//go:build cgo && !slidelimit_source && !(linux && (amd64 || arm64))

package slidelimit

// The module carries prebuilt libraries for linux/amd64 and linux/arm64 only
// (go/lib). Anywhere else a cgo build stops here, with the way out, rather
// than at the linker with a list of undefined slidelimit_* symbols.

/*
#error "slidelimit: no prebuilt library for this GOOS/GOARCH (the module ships linux/amd64 and linux/arm64). Build with CGO_ENABLED=0 (the pure-Go wasm path), or build the C library from source with Rust: in a checkout, cargo rustc --profile go-lib -p slidelimit-ffi --lib --crate-type staticlib, then go build -tags slidelimit_source with CGO_LDFLAGS=/abs/path/to/target/go-lib/libslidelimit_ffi.a (docs/go.md, Building from source)"
*/
import "C"
