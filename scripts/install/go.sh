#!/usr/bin/env bash
# make test-install-go (under scripts/with-redis.sh and scripts/without-rust.sh):
# scripts/install/go.sh DIST_GO VERSION [cross-cgo]
# A fresh module outside the repository requires github.com/slidelimit/slidelimit/go
# at VERSION from the GOPROXY directory dist/go (no replace), then:
#   - builds with cgo (the prebuilt archive inside the module) and runs one
#     check on the memory engine and one on Redis;
#   - builds with CGO_ENABLED=0 (wazero) and runs the same checks;
#   - cross-builds GOOS=linux GOARCH=arm64 CGO_ENABLED=0 (build only).
# With "cross-cgo" (make test-dist-go) it instead cross-builds linux/arm64
# with cgo (CC=aarch64-linux-gnu-gcc, the module's linux_arm64 archive).
set -euo pipefail
usage="usage: $0 DIST_GO VERSION [cross-cgo]"
proxy="$(cd "${1:?$usage}" && pwd)"
version="${2:?$usage}"
mode="${3:-host}"
module=github.com/slidelimit/slidelimit/go
! command -v cargo >/dev/null && ! command -v rustc >/dev/null || { echo "cargo or rustc is on PATH" >&2; exit 1; }
[[ -f "$proxy/$module/@v/v$version.zip" ]] || { echo "no $module v$version in $proxy: run make dist-go" >&2; exit 1; }
cd "${INSTALL_WORK:?run under scripts/without-rust.sh}"

# A module cache of its own, so the module comes from dist/go and not from a
# copy an earlier run left in the user's cache; other modules come from the
# user's cache (its download directory is a GOPROXY directory too), else the
# usual proxy. Only our module skips the checksum database (it is not
# published); everything else is verified as usual.
host_cache="$(go env GOMODCACHE)"
export GOPROXY="file://$proxy,file://$host_cache/cache/download,$(go env GOPROXY)"
export GOMODCACHE="$INSTALL_WORK/gomodcache"
# -trimpath: build cache entries then do not depend on where the module cache
# is, so reruns reuse compiled dependencies (go-redis, wazero).
export GONOSUMDB="$module" GOFLAGS="-mod=mod -modcacherw -trimpath" GOWORK=off GOTOOLCHAIN=local
unset GOPRIVATE GONOPROXY

# ELF e_machine 183 is aarch64 (no dependency on file(1)).
aarch64() { [[ "$(od -An -tu2 -j18 -N2 "$1" | tr -d ' ')" == 183 ]] || { echo "$1 is not an aarch64 ELF" >&2; exit 1; }; }

mkdir app && cd app
cat >go.mod <<MOD
module example.com/installcheck

go 1.26

require $module v$version
MOD
cat >main.go <<'GO'
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/slidelimit/slidelimit/go"
)

// Two checks, each limit 1 per minute: the first call is allowed, the second
// denied with a wait.
func twice(name string, l *slidelimit.Limiter, tenant string) {
	ctx := context.Background()
	first, err1 := l.Acquire(ctx, tenant)
	second, err2 := l.Acquire(ctx, tenant)
	if err1 != nil || err2 != nil || !first.Allowed || second.Allowed || second.RetryAfterMs == 0 {
		fmt.Fprintf(os.Stderr, "%s: got %+v %v, %+v %v; want allowed then denied with a wait\n", name, first, err1, second, err2)
		os.Exit(1)
	}
	fmt.Printf(" %s [true false] retry_after_ms=%d", name, second.RetryAfterMs)
}

func main() {
	if slidelimit.Version != os.Args[1] {
		fmt.Fprintf(os.Stderr, "slidelimit.Version is %q, want %q\n", slidelimit.Version, os.Args[1])
		os.Exit(1)
	}
	p := slidelimit.Policy{Resource: "install", Limit: 1, Window: time.Minute}
	mem, err := slidelimit.NewMemory(p)
	if err != nil {
		panic(err)
	}
	defer mem.Close()
	opt, err := redis.ParseURL(os.Getenv("SLIDELIMIT_TEST_REDIS_URL"))
	if err != nil {
		panic(err)
	}
	opt.ContextTimeoutEnabled = true
	client := redis.NewClient(opt)
	defer client.Close()
	rl, err := slidelimit.New(client, p)
	if err != nil {
		panic(err)
	}
	defer rl.Close()
	fmt.Printf("slidelimit %s:", slidelimit.Version)
	twice("memory", mem, "t")
	tenant := fmt.Sprintf("t-%d", os.Getpid())
	twice("redis", rl, tenant)
	if _, err := rl.Reset(context.Background(), tenant); err != nil {
		panic(err)
	}
	fmt.Println()
}
GO
# -mod=mod: the first build adds go-redis (main.go imports it) at the version
# slidelimit requires and writes go.sum; `go mod tidy` would fetch the test
# dependencies of every dependency as well.
go list -deps . >/dev/null
# The module resolved to the proxy's version, extracted into our cache.
got="$(go list -m -f '{{.Version}} {{.Replace}} {{.Dir}}' "$module")"
[[ "$got" == "v$version <nil> $GOMODCACHE/$module@v$version" ]] || { echo "resolved $module as: $got" >&2; exit 1; }
grep -q "^$module v$version h1:" go.sum || { echo "go.sum lacks $module v$version" >&2; exit 1; }

if [[ "$mode" == cross-cgo ]]; then
  command -v aarch64-linux-gnu-gcc >/dev/null || { echo "aarch64-linux-gnu-gcc is missing: scripts/deps-cross.sh installs it" >&2; exit 1; }
  CGO_ENABLED=1 GOOS=linux GOARCH=arm64 CC=aarch64-linux-gnu-gcc go build -o app-arm64-cgo .
  aarch64 app-arm64-cgo
  # The Rust code is in: a symbol of the C ABI from the linux_arm64 archive.
  go tool nm app-arm64-cgo >app-arm64-cgo.nm
  grep -q ' slidelimit_memory_acquire$' app-arm64-cgo.nm || { echo "app-arm64-cgo lacks the C ABI" >&2; exit 1; }
  echo "test-dist-go: $module v$version cross-built for linux/arm64 with cgo ($(stat -c %s app-arm64-cgo) bytes)"
  exit 0
fi

: "${SLIDELIMIT_TEST_REDIS_URL:?run under scripts/with-redis.sh}"
# Does the binary carry the C ABI? (nm's output to a file: grep -q would cut its pipe.)
has_c_abi() { go tool nm "$1" >"$1.nm" && grep -q ' slidelimit_memory_acquire$' "$1.nm"; }
CGO_ENABLED=1 go build -o app-cgo .
has_c_abi app-cgo || { echo "app-cgo does not link the C ABI" >&2; exit 1; }
echo "test-install-go: cgo: $(./app-cgo "$version")"
CGO_ENABLED=0 go build -o app-nocgo .
! has_c_abi app-nocgo || { echo "app-nocgo links the C ABI" >&2; exit 1; }
echo "test-install-go: CGO_ENABLED=0: $(./app-nocgo "$version")"
CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -o app-arm64 .
aarch64 app-arm64
echo "test-install-go: linux/arm64 CGO_ENABLED=0 build ok ($(stat -c %s app-arm64) bytes)"
