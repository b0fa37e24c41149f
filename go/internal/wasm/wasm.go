// Package wasm carries the C ABI of slidelimit (ffi-c/) compiled to wasm32,
// which the package runs under wazero when cgo is off. `make go-wasm`
// rebuilds slidelimit.wasm and records the checksum of its inputs in
// slidelimit.wasm.inputs; `make test` fails when the sources moved on.
package wasm

import _ "embed" // for go:embed

// Module is the module's bytes (wasm32-unknown-unknown, no imports).
//
//go:embed slidelimit.wasm
var Module []byte
