# frozen_string_literal: true

# The e2e run's Sidekiq app (docs/e2e.md), loaded by `sidekiq -r`: it pushes
# the jobs the run feeds it (Redis list e2e:feed:sidekiq) to Sidekiq and works
# them behind Slidelimit::Sidekiq::Middleware: a job calls the provider for
# its tenant's API key only after slidelimit admits it, and goes back on the
# schedule (no retry spent) when denied. Each completed job is recorded in
# e2e:done with its retry_count. slidelimit's metrics are served on
# E2E_METRICS_PORT.
require "json"
require "net/http"
require "socket"
require "sidekiq"
require "slidelimit"
require "slidelimit/sidekiq"

# Sidekiq 6.4 ignores SADD's reply; redis-rb 4.8 warns about it on every push.
Redis.sadd_returns_boolean = false
# ... and calls brpop the way redis-rb 4.8 deprecates, on every fetch.
Redis.silence_deprecations = true

module E2E
  REDIS_URL = ENV.fetch("E2E_REDIS_URL")
  # Sidekiq's own data in a database of its own, apart from the limiter's keys.
  SIDEKIQ_URL = "#{REDIS_URL.chomp('/')}/2"
  PROVIDER = URI(ENV.fetch("E2E_PROVIDER_URL"))
  JITTER_MS = Integer(ENV.fetch("E2E_JITTER_MS"))
  METRICS = Slidelimit::Metrics.new(tenant_label: true)
  RECORDS = Redis.new(url: REDIS_URL)

  # Job class per algorithm: one limiter (middleware gate) per class.
  CLASSES = { "sliding_log" => "E2E::LogGeocode", "bucketed_window" => "E2E::BucketedGeocode",
              "sliding_counter" => "E2E::CounterGeocode", "multi" => "E2E::MultiGeocode" }.freeze

  def self.limiter(algorithm, buckets: nil)
    # Buckets only for the bucketed window: core refuses them with another algorithm.
    extra = buckets ? { buckets: buckets } : {}
    policy = Slidelimit::Policy.new(namespace: "rl", resource: "geocode", algorithm: algorithm,
                                    limit: Integer(ENV.fetch("E2E_LIMIT")),
                                    window_ms: Integer(ENV.fetch("E2E_WINDOW_MS")), **extra)
    Slidelimit::Limiter.new(Slidelimit.redis(url: REDIS_URL), policy, metrics: METRICS)
  end

  # The provider's two limits, checked and recorded together: the short one
  # as a log, the long one as a bucketed window.
  def self.multi_limiter
    policy = Slidelimit::Policy.new(namespace: "rl", resource: "geocode", limits: [
      Slidelimit::Limit.new(limit: Integer(ENV.fetch("E2E_SHORT_LIMIT")),
                            window_ms: Integer(ENV.fetch("E2E_SHORT_WINDOW_MS"))),
      Slidelimit::Limit.new(algorithm: :bucketed_window, limit: Integer(ENV.fetch("E2E_LIMIT")),
                            window_ms: Integer(ENV.fetch("E2E_WINDOW_MS")),
                            buckets: Integer(ENV.fetch("E2E_BUCKETS")))
    ])
    Slidelimit::Limiter.new(Slidelimit.redis(url: REDIS_URL), policy, metrics: METRICS)
  end

  # Calls the provider and records the completion; a 429 is recorded, not
  # retried (the run counts it: the counter's overshoot).
  def self.geocode(job)
    id, tenant, alg = job["args"]
    status = Net::HTTP.start(PROVIDER.host, PROVIDER.port) do |http|
      http.get("/geocode?address=#{id}", { "X-Api-Key" => tenant, "X-Job-Id" => id, "X-System" => "sidekiq",
                                           "X-Sent-Ms" => (Time.now.to_f * 1000).round.to_s }).code
    end
    RECORDS.rpush("e2e:done", JSON.generate(
      "id" => id, "system" => "sidekiq", "tenant" => tenant, "alg" => alg, "status" => Integer(status),
      "attempt" => job["retry_count"], "deferrals" => job[Slidelimit::Sidekiq::DEFERRALS_KEY] || 0,
      "ms" => (Time.now.to_f * 1000).round
    ))
  end

  # Serves METRICS.text to Prometheus (one request per connection).
  def self.serve_metrics(port)
    server = TCPServer.new("127.0.0.1", port)
    Thread.new do
      loop do
        client = server.accept
        begin
          nil while (line = client.gets) && line != "\r\n"
          body = METRICS.text
          client.write("HTTP/1.1 200 OK\r\nContent-Type: #{Slidelimit::Metrics::CONTENT_TYPE}\r\n" \
                       "Content-Length: #{body.bytesize}\r\nConnection: close\r\n\r\n#{body}")
        rescue IOError, SystemCallError
          nil
        ensure
          client.close
        end
      end
    end
  end

  # Moves the run's jobs from e2e:feed:sidekiq into Sidekiq.
  def self.feed
    Thread.new do
      redis = Redis.new(url: REDIS_URL)
      loop do
        _, item = redis.blpop("e2e:feed:sidekiq", timeout: 1)
        next unless item

        data = JSON.parse(item)
        klass = CLASSES.fetch(data["alg"])
        Sidekiq::Client.push("class" => klass, "queue" => "default", "args" => [data["id"], data["tenant"], data["alg"]])
      end
    end
  end

  # Hands the job hash to the body (perform gets only the args), after slidelimit's middleware.
  class CurrentJob
    def call(_worker, job, _queue)
      Thread.current[:e2e_job] = job
      yield
    ensure
      Thread.current[:e2e_job] = nil
    end
  end

  class LogGeocode
    include Sidekiq::Worker
    include Slidelimit::Sidekiq::Limited
    sidekiq_options retry: 5
    slidelimit limiter: E2E.limiter("sliding_log"), tenant: ->(job) { job["args"][1] },
               jitter_ms: JITTER_MS, max_deferrals: 100_000

    def perform(_id, _tenant, _alg)
      E2E.geocode(Thread.current[:e2e_job])
    end
  end

  class BucketedGeocode
    include Sidekiq::Worker
    include Slidelimit::Sidekiq::Limited
    sidekiq_options retry: 5
    slidelimit limiter: E2E.limiter("bucketed_window", buckets: Integer(ENV.fetch("E2E_BUCKETS"))),
               tenant: ->(job) { job["args"][1] }, jitter_ms: JITTER_MS, max_deferrals: 100_000

    def perform(_id, _tenant, _alg)
      E2E.geocode(Thread.current[:e2e_job])
    end
  end

  class MultiGeocode
    include Sidekiq::Worker
    include Slidelimit::Sidekiq::Limited
    sidekiq_options retry: 5
    slidelimit limiter: E2E.multi_limiter, tenant: ->(job) { job["args"][1] },
               jitter_ms: JITTER_MS, max_deferrals: 100_000

    def perform(_id, _tenant, _alg)
      E2E.geocode(Thread.current[:e2e_job])
    end
  end

  class CounterGeocode
    include Sidekiq::Worker
    include Slidelimit::Sidekiq::Limited
    sidekiq_options retry: 5
    slidelimit limiter: E2E.limiter("sliding_counter"), tenant: ->(job) { job["args"][1] },
               jitter_ms: JITTER_MS, max_deferrals: 100_000

    def perform(_id, _tenant, _alg)
      E2E.geocode(Thread.current[:e2e_job])
    end
  end
end

Sidekiq.configure_server do |config|
  config.redis = { url: E2E::SIDEKIQ_URL }
  # Deferred jobs come back through the schedule: poll it often (docs/ruby.md).
  config.options[:poll_interval_average] = Float(ENV.fetch("E2E_SIDEKIQ_POLL", "0.2"))
  config.server_middleware do |chain|
    chain.add Slidelimit::Sidekiq::Middleware
    chain.add E2E::CurrentJob
  end
  config.on(:startup) do
    E2E.serve_metrics(Integer(ENV.fetch("E2E_METRICS_PORT")))
    E2E.feed
    Sidekiq.logger.info("sidekiq worker ready (metrics on :#{ENV.fetch('E2E_METRICS_PORT')})")
  end
end

Sidekiq.configure_client do |config|
  config.redis = { url: E2E::SIDEKIQ_URL }
end
