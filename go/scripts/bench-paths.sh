#!/usr/bin/env bash
# Both Go paths side by side (make bench-go, against the Redis in
# SLIDELIMIT_TEST_REDIS_URL): builds the package's test binary with cgo and
# without (the wasm path), runs them in turn for ROUNDS rounds (default 5) so
# that load from elsewhere on the machine hurts both alike, and prints the
# median of each figure, with the ratio of the two paths.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${SLIDELIMIT_TEST_REDIS_URL:?run under scripts/with-redis.sh (make bench-go)}"
rounds="${ROUNDS:-5}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

go test -c -o "$tmp/cgo.test" .
CGO_ENABLED=0 go test -c -o "$tmp/nocgo.test" .
for ((r = 1; r <= rounds; r++)); do
  for path in cgo nocgo; do
    "$tmp/$path.test" -test.run '^$' -test.bench '^Benchmark(CgoCheck|CheckParallel|MemoryAcquire|Ratios)$' \
      -test.benchmem -test.count 1 | awk -v path="$path" '
        /^Benchmark/ {
          name = $1; sub(/-[0-9]+$/, "", name)
          for (i = 3; i < NF; i += 2) print path, name "|" $(i + 1), $i
        }' >>"$tmp/figures"
  done
done

# One line per path and figure: the median of its rounds.
sort -k1,1 -k2,2 -k3,3g "$tmp/figures" | awk '
  function flush() { if (n) print key, (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2) }
  { k = $1 " " $2; if (k != key) { flush(); key = k; n = 0 } v[++n] = $3 }
  END { flush() }' >"$tmp/medians"

fig() { awk -v k="$1 $2" '$1 " " $2 == k { print $3 }' "$tmp/medians"; }
row() { # label, benchmark|unit
  local c n
  c="$(fig cgo "$2")" n="$(fig nocgo "$2")"
  awk -v l="$1" -v c="$c" -v n="$n" 'BEGIN {
    f = (c >= 100 || (c == int(c) && n == int(n)) ? "%12.0f" : "%12.3f")
    printf "%-44s " f " " f " %9.2fx\n", l, c, n, (c > 0 ? n / c : 0) }'
}
echo
echo "Go paths, median of $rounds rounds (GOMAXPROCS $(nproc)); last column: without cgo / with cgo"
printf "%-44s %12s %12s %10s\n" "" "cgo" "wasm" "ratio"
row "check cost (build call + parse), ns/op" "BenchmarkCgoCheck|ns/op"
row "check cost, allocs/op" "BenchmarkCgoCheck|allocs/op"
row "check cost, all cores at once, ns/op" "BenchmarkCheckParallel|ns/op"
row "memory engine AcquireAt, ns/op" "BenchmarkMemoryAcquire|ns/op"
row "Acquire on Redis, ns" "BenchmarkRatios|acquire-ns"
row "raw go-redis EVALSHA, ns" "BenchmarkRatios|raw-evalsha-ns"
row "Acquire speed vs raw EVALSHA (1 = as fast)" "BenchmarkRatios|acquire-speed-vs-raw"
row "Acquire speed vs redis_rate" "BenchmarkRatios|acquire-speed-vs-redis_rate"
