# frozen_string_literal: true

# Limiter#acquire against raw redis-rb EVALSHA of the same script with the
# same KEYS and ARGV, on one connection to SLIDELIMIT_TEST_REDIS_URL
# (`make bench-ruby` runs it under scripts/with-redis.sh). Rounds of each
# alternate so both see the same machine load; the ratio is the raw time per
# call over acquire's (1.0 = acquire costs nothing over the raw call), i.e.
# acquire's throughput as a fraction of the raw call's: `ratio` is the median
# over rounds of each round's ratio, `of means` the ratio of the mean times.

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "slidelimit"

# Many short alternating chunks: on a shared machine the load changes by
# the second, and both paths must see the same share of it.
CALLS = Integer(ENV.fetch("BENCH_CALLS", "250"))
ROUNDS = Integer(ENV.fetch("BENCH_ROUNDS", "60"))
TENANTS = 500

def clock
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

redis = Slidelimit.redis(url: ENV.fetch("SLIDELIMIT_TEST_REDIS_URL"), timeout_ms: 5000)
puts format("%-16s %12s %12s %8s %8s", "algorithm", "raw µs/call", "acquire µs", "of means", "ratio")
ratios = []
[
  [:sliding_counter, 1_000_000_000],
  [:sliding_log, 10_000],
].each do |algorithm, limit|
  policy = Slidelimit::Policy.new(namespace: "bench", resource: "r-#{algorithm}", algorithm: algorithm,
                                  limit: limit, window_ms: 60_000)
  limiter = Slidelimit::Limiter.new(redis, policy)
  tenants = Array.new(TENANTS) { |i| "tenant-#{i}" }
  keys = tenants.map { |t| [limiter.key(t)] }
  native = Slidelimit::Policy.native_policy(policy)
  sha, = Slidelimit::Limiter.script(native, Slidelimit::Native::MODE_ACQUIRE)
  Slidelimit::Native.slidelimit_policy_free(native)
  argv = [limit.to_s, "60000", "1", ""]
  # Warm up both paths (script cache, connection).
  200.times { |i| limiter.acquire(tenants[i % TENANTS]) }
  200.times { |i| redis.evalsha(sha, keys[i % TENANTS], argv) }

  raw_times = []
  acquire_times = []
  run_raw = lambda do
    started = clock
    CALLS.times { |i| redis.evalsha(sha, keys[i % TENANTS], argv) }
    raw_times << (clock - started) / CALLS
  end
  run_acquire = lambda do
    started = clock
    CALLS.times { |i| limiter.acquire(tenants[i % TENANTS]) }
    acquire_times << (clock - started) / CALLS
  end
  # Which goes first alternates, so neither always follows the other.
  ROUNDS.times { |round| round.even? ? (run_raw.call; run_acquire.call) : (run_acquire.call; run_raw.call) }
  raw = raw_times.sum / raw_times.length
  acquire = acquire_times.sum / acquire_times.length
  # Each round's two chunks ran back to back under the same load: the median
  # of the rounds' ratios is what a load spike in one round cannot move.
  paired = raw_times.zip(acquire_times).map { |r, a| r / a }.sort
  ratio = paired[paired.length / 2]
  ratios << ratio
  puts format("%-16s %12.1f %12.1f %7.2fx %7.2fx", algorithm, raw * 1e6, acquire * 1e6, raw / acquire, ratio)
  tenants.each { |t| limiter.reset(t) }
  limiter.close
end
puts format("%d calls of each per algorithm, in %d alternating chunks; ruby %s, redis-rb %s, ffi %s",
            CALLS * ROUNDS, ROUNDS * 2, RUBY_VERSION, Redis::VERSION, FFI::VERSION)
