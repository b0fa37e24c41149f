#!/usr/bin/env bash
# The packaging test (docs/bindings.md, step 7): builds the gem as users get
# it, with ffi-c's shared library inside, installs it into an empty GEM_HOME
# outside the repository, and runs a check against a real Redis from there
# (SLIDELIMIT_TEST_REDIS_URL, scripts/with-redis.sh). Leaves the gem in
# .tmp/ruby-gem/.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
lib="${CARGO_TARGET_DIR:-$root/target}/release/libslidelimit_ffi.so"
stage="$root/.tmp/ruby-gem/stage"
platform="$(ruby -e 'print Gem::Platform.local')"
rm -rf "$stage"
mkdir -p "$stage/lib/slidelimit/native/$platform"
cp -R "$root/ruby/lib" "$root/ruby/slidelimit.gemspec" "$stage/"
cp "$lib" "$stage/lib/slidelimit/native/$platform/"
# The release profile keeps debug info; users of the gem need none of it.
if command -v strip >/dev/null; then strip --strip-debug "$stage/lib/slidelimit/native/$platform/$(basename "$lib")"; fi
(cd "$stage" && gem build --quiet slidelimit.gemspec >/dev/null)
gem_file="$(ls "$stage"/slidelimit-*.gem)"
mv "$gem_file" "$root/.tmp/ruby-gem/"
gem_file="$root/.tmp/ruby-gem/$(basename "$gem_file")"
echo "built $gem_file"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# An empty GEM_HOME; ffi and redis resolve from Debian's system gems.
env -u SLIDELIMIT_FFI_LIB -u RUBYLIB GEM_HOME="$work/gems" gem install --local --no-document --quiet "$gem_file" >/dev/null
cd "$work"
env -u SLIDELIMIT_FFI_LIB -u RUBYLIB GEM_HOME="$work/gems" ruby -e '
  require "slidelimit"
  lib = Slidelimit::Native.library_path
  abort "the gem loaded #{lib}, not its own copy" unless lib.start_with?(ENV["GEM_HOME"])
  abort "the gem was loaded from #{$LOADED_FEATURES.grep(/slidelimit\.rb/)}" unless $LOADED_FEATURES.grep(/slidelimit\.rb\z/).all? { |f| f.start_with?(ENV["GEM_HOME"]) }
  redis = Slidelimit.redis(url: ENV.fetch("SLIDELIMIT_TEST_REDIS_URL"))
  policy = Slidelimit::Policy.new(resource: "package-check", limit: 2, window_ms: 60_000)
  limiter = Slidelimit::Limiter.new(redis, policy)
  tenant = "t-#{Process.pid}"
  got = Array.new(3) { limiter.acquire(tenant).allowed? }
  abort "decisions #{got}, want [true, true, false]" unless got == [true, true, false]
  abort "the key is missing" unless redis.llen(limiter.key(tenant)) == 2
  limiter.reset(tenant)
  puts "package check: slidelimit #{Gem.loaded_specs["slidelimit"].version} (#{Gem.loaded_specs["slidelimit"].platform}) from #{lib}: #{got}"
'
