//go:build slidelimit_vendor

package slidelimit

// Never built (no one sets the tag). `go mod vendor` copies a directory only
// when some file imports it as a package, whatever that file's build tags
// (golang/go#26366): these imports make vendor/ carry the header and the
// prebuilt archives that the #cgo lines point at, as wasmtime-go does.
import (
	_ "github.com/slidelimit/slidelimit/go/include"
	_ "github.com/slidelimit/slidelimit/go/lib/linux_amd64"
	_ "github.com/slidelimit/slidelimit/go/lib/linux_arm64"
)
