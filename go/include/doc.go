// Package include holds slidelimit.h, the C ABI's header (a copy of
// ffi-c/include/slidelimit.h that `make go-libs` refreshes and `make test`
// compares); it has no Go code.
package include
