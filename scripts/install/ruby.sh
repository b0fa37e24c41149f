#!/usr/bin/env bash
# make test-install-ruby (under scripts/with-redis.sh and scripts/without-rust.sh):
# scripts/install/ruby.sh DIST_RUBY VERSION
# gem install --local of the gem in dist/ruby into an empty GEM_HOME (ffi
# and redis resolve from Debian's system gems), then one check on the memory
# engine and one on Redis.
set -euo pipefail
dist="$(cd "${1:?usage: $0 DIST_RUBY VERSION}" && pwd)"
version="${2:?usage: $0 DIST_RUBY VERSION}"
: "${SLIDELIMIT_TEST_REDIS_URL:?run under scripts/with-redis.sh}"
! command -v cargo >/dev/null || { echo "cargo is on PATH" >&2; exit 1; }
cd "${INSTALL_WORK:?run under scripts/without-rust.sh}"
gems=("$dist"/slidelimit-"$version"-*.gem)
[[ ${#gems[@]} == 1 && -f "${gems[0]}" ]] || { echo "want one platform gem of $version in $dist, found: ${gems[*]}" >&2; exit 1; }
export GEM_HOME="$INSTALL_WORK/gems"
unset SLIDELIMIT_FFI_LIB RUBYLIB
gem install --local --no-document --quiet "${gems[0]}" >/dev/null
ruby -e '
  version = ARGV.fetch(0)
  require "slidelimit"
  abort "slidelimit #{Slidelimit::VERSION}, want #{version}" unless Slidelimit::VERSION == version
  lib = Slidelimit::Native.library_path
  abort "loaded #{lib}, not the gem'"'"'s copy" unless lib.start_with?(ENV.fetch("GEM_HOME"))

  policy = Slidelimit::Policy.new(resource: "install", limit: 1, window_ms: 60_000)
  memory = Slidelimit::Limiter.memory(policy)
  got = Array.new(2) { memory.acquire("t").allowed? }
  abort "memory decisions #{got}, want [true, false]" unless got == [true, false]

  limiter = Slidelimit::Limiter.new(Slidelimit.redis(url: ENV.fetch("SLIDELIMIT_TEST_REDIS_URL")), policy)
  tenant = "t-#{Process.pid}"
  first, second = limiter.acquire(tenant), limiter.acquire(tenant)
  abort "redis decisions #{[first, second].inspect}" unless first.allowed? && !second.allowed? && second.retry_after_ms.positive?
  limiter.reset(tenant)
  puts "test-install-ruby: slidelimit #{version} (#{Gem.loaded_specs["slidelimit"].platform}): " \
       "memory #{got}, redis [#{first.allowed?}, #{second.allowed?}] retry_after_ms=#{second.retry_after_ms}"
' "$version"
