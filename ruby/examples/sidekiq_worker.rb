# frozen_string_literal: true

# A Sidekiq worker limited per API key: over the limit, the job goes back on
# Sidekiq's schedule for retry_after (+ jitter) without spending a retry.
#   sidekiq -r ./examples/sidekiq_worker.rb
require "slidelimit/sidekiq"

Sidekiq.configure_server do |config|
  config.server_middleware { |chain| chain.add Slidelimit::Sidekiq::Middleware }
end

GEOCODE = Slidelimit::Limiter.new(
  Slidelimit.redis(url: ENV.fetch("REDIS_URL", "redis://127.0.0.1:6379/")),
  Slidelimit::Policy.new(resource: "geocode", limit: 600, window_ms: 60_000)
)

class GeocodeWorker
  include Sidekiq::Worker
  include Slidelimit::Sidekiq::Limited

  # The tenant is the API key, the job's first argument.
  slidelimit limiter: GEOCODE, tenant: ->(job) { job["args"][0] }, max_deferrals: 50

  def perform(api_key, address)
    # call the geocoding API with api_key for address
  end
end
