# frozen_string_literal: true

# Share one budget of 600 geocoding calls per rolling 60 s per API key with
# every other worker (Ruby, Rust, Go, Node, Python) of the same policy.
#   REDIS_URL=redis://127.0.0.1:6379/ ruby -Ilib examples/basic.rb
require "slidelimit"

redis = Slidelimit.redis(url: ENV.fetch("REDIS_URL", "redis://127.0.0.1:6379/"), timeout_ms: 1000)
policy = Slidelimit::Policy.new(resource: "geocode", limit: 600, window_ms: 60_000)
limiter = Slidelimit::Limiter.new(redis, policy)

begin
  decision = limiter.acquire("tenant-17")
  if decision.allowed?
    puts "allowed, #{decision.remaining} left in the window"
  else
    puts "denied, retry in #{decision.retry_after_ms} ms"
  end
rescue Slidelimit::Unavailable => e
  # Redis is down or slow: never a decision. Fail open or closed, your call.
  puts "unavailable: #{e.message}"
ensure
  limiter.close
end
