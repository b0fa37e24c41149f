# frozen_string_literal: true

# The Sidekiq app of test_sidekiq.rb, loaded by a real `sidekiq -r` process.
# Two limited workers; test-only middlewares record every attempt (before
# slidelimit's) and every run of a job body (after it) in Redis.

$LOAD_PATH.unshift(File.expand_path("../../lib", __dir__))
require "json"
require "sidekiq"
require "slidelimit/sidekiq"

REDIS_URL = ENV.fetch("SLIDELIMIT_TEST_REDIS_URL")

# Every time Sidekiq hands a job to the middleware chain.
class RecordAttempts
  def call(_worker, job, _queue)
    Sidekiq.redis do |r|
      r.rpush("test:attempts", JSON.generate(job.slice("jid", "retry_count", "slidelimit_deferrals",
                                                       "slidelimit_outage_deferrals")))
    end
    yield
  end
end

# Every time a job body is let through.
class RecordRuns
  def call(_worker, job, _queue)
    Sidekiq.redis do |r|
      r.rpush("test:runs", JSON.generate(job.slice("jid", "retry_count", "slidelimit_deferrals",
                                                   "slidelimit_outage_deferrals")
                                          .merge("at_ms" => (Time.now.to_f * 1000).round)))
    end
    yield
  end
end

WINDOW_MS = Integer(ENV.fetch("TEST_WINDOW_MS", "1000"))

# One run per tenant per window.
class LimitedWorker
  include Sidekiq::Worker
  include Slidelimit::Sidekiq::Limited

  slidelimit limiter: Slidelimit::Limiter.new(
    Slidelimit.redis(url: REDIS_URL),
    Slidelimit::Policy.new(resource: ENV.fetch("TEST_RESOURCE"), limit: 1, window_ms: WINDOW_MS)
  ), tenant: ->(job) { job["args"][0] }, jitter_ms: 100

  def perform(tenant, n)
    Sidekiq.redis { |r| r.rpush("test:bodies", "#{tenant}:#{n}") }
  end
end

# Its limiter's Redis is down until the test starts it.
class OutageWorker
  include Sidekiq::Worker
  include Slidelimit::Sidekiq::Limited

  slidelimit limiter: Slidelimit::Limiter.new(
    Slidelimit.redis(url: "redis://127.0.0.1:#{ENV.fetch('TEST_OUTAGE_PORT')}/", timeout_ms: 300),
    Slidelimit::Policy.new(resource: ENV.fetch("TEST_RESOURCE"), limit: 5, window_ms: 60_000)
  ), tenant: ->(job) { job["args"][0] }, jitter_ms: 50, outage_backoff_ms: 200, outage_backoff_max_ms: 400

  def perform(tenant)
    Sidekiq.redis { |r| r.rpush("test:bodies", "outage:#{tenant}") }
  end
end

# Last: the middlewares above must exist when this block runs (at once, in
# the server).
Sidekiq.configure_server do |config|
  config.redis = { url: REDIS_URL }
  # Lowered from the default 5 s average so the test runs in seconds.
  config.options[:poll_interval_average] = Float(ENV.fetch("SIDEKIQ_POLL_INTERVAL", "0.2"))
  config.server_middleware do |chain|
    chain.add RecordAttempts
    chain.add Slidelimit::Sidekiq::Middleware
    chain.add RecordRuns
  end
end

Sidekiq.configure_client do |config|
  config.redis = { url: REDIS_URL }
end
