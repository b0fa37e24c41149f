# frozen_string_literal: true

require_relative "test_helper"
require "json"
require "sidekiq"
require "slidelimit/sidekiq"

Redis.sadd_returns_boolean = false

# The middleware called directly, pushing to a real Redis; test_sidekiq.rb
# runs it inside a real Sidekiq process.
class TestSidekiqMiddleware < Minitest::Test
  include TestHelper

  def setup
    @url = "#{redis_url.chomp('/')}/4"
    @redis = Redis.new(url: @url)
    @redis.flushdb
    Sidekiq.configure_client { |config| config.redis = { url: @url } }
    @now = 1_000.0
    @middleware = Slidelimit::Sidekiq::Middleware.new(clock: -> { @now }, random: Random.new(1))
  end

  def teardown
    @redis.flushdb
    @redis.close
  end

  def worker_with(**options)
    klass = Class.new do
      include Sidekiq::Worker
      include Slidelimit::Sidekiq::Limited
    end
    klass.slidelimit(**options)
    klass.new
  end

  def job(extra = {})
    { "class" => "SomeWorker", "queue" => "default", "args" => ["tenant-x", 7], "jid" => "abc123",
      "retry" => true, "created_at" => 1.0 }.merge(extra)
  end

  def scheduled
    @redis.zrange("schedule", 0, -1, with_scores: true).map { |payload, at| [JSON.parse(payload), at] }
  end

  def test_denied_job_goes_back_with_the_same_jid_and_no_retry
    limiter = Slidelimit::Limiter.memory(policy(limit: 1, window_ms: 60_000), clock: -> { 5_000 })
    worker = worker_with(limiter: limiter, tenant: ->(j) { j["args"][0] }, jitter_ms: 0)
    ran = 0
    @middleware.call(worker, job, "default") { ran += 1 }
    assert_equal 1, ran
    assert_nil @middleware.call(worker, job, "default") { ran += 1 }
    assert_equal 1, ran, "the body must not run when denied"
    (payload, at), = scheduled
    assert_equal "abc123", payload["jid"]
    assert_equal 1, payload["slidelimit_deferrals"]
    refute payload.key?("retry_count")
    assert_equal [7], payload["args"].drop(1)
    assert_in_delta @now + 60.0, at, 0.001 # retry_after 60 s, no jitter
  end

  # A client middleware that refuses every push (as a uniqueness lock
  # refuses a jid still running).
  class RefusesEveryPush
    def call(*)
      false
    end
  end

  def test_a_deferral_skips_client_middleware_that_would_drop_it
    limiter = Slidelimit::Limiter.memory(policy(limit: 1, window_ms: 60_000), clock: -> { 5_000 })
    worker = worker_with(limiter: limiter, tenant: ->(j) { j["args"][0] }, jitter_ms: 0)
    @middleware.call(worker, job, "default") {}
    Sidekiq.client_middleware { |chain| chain.add RefusesEveryPush }
    begin
      retried = job("retry_count" => 2, "error_message" => "boom", "failed_at" => 3.0)
      @middleware.call(worker, retried, "default") { flunk "ran" }
    ensure
      Sidekiq.client_middleware { |chain| chain.remove RefusesEveryPush }
    end
    (payload, at), = scheduled
    refute_nil payload, "the deferred job was lost"
    assert_equal "abc123", payload["jid"]
    assert_equal [2, "boom", 3.0], payload.values_at("retry_count", "error_message", "failed_at"),
                 "a deferral leaves the retry state as it was"
    refute payload.key?("at")
    assert_in_delta @now + 60.0, at, 0.001
  end

  # The middleware sees the class Sidekiq runs: a class that is no Sidekiq
  # worker (an ActiveJob one runs inside JobWrapper) would never be checked.
  def test_slidelimit_on_a_class_that_is_no_sidekiq_worker_is_refused
    limiter = Slidelimit::Limiter.memory(policy(limit: 1, window_ms: 60_000))
    plain = Class.new { include Slidelimit::Sidekiq::Limited }
    e = assert_raises(Slidelimit::InvalidArgument) { plain.slidelimit(limiter: limiter, tenant: ->(_) { "t" }) }
    assert_equal "worker", e.field
    assert_includes e.message, "ActiveJob"
  end

  # Under Sidekiq::Testing a deferral goes where any push in a test goes,
  # not to Redis.
  def test_under_sidekiq_testing_a_deferral_stays_in_the_fake_queue
    require "sidekiq/testing"
    Sidekiq::Testing.fake! do
      limiter = Slidelimit::Limiter.memory(policy(limit: 1, window_ms: 60_000), clock: -> { 5_000 })
      worker = worker_with(limiter: limiter, tenant: ->(j) { j["args"][0] }, jitter_ms: 0)
      @middleware.call(worker, job, "default") {}
      fake = Sidekiq::Queues["default"]
      fake.clear
      @middleware.call(worker, job, "default") { flunk "ran" }
      assert_equal 1, fake.size
      assert_equal "abc123", fake.first["jid"]
      assert_in_delta @now + 60.0, fake.first["at"], 0.001
    end
    assert_empty scheduled
  ensure
    Sidekiq::Testing.disable! if defined?(Sidekiq::Testing)
  end

  def test_a_denial_ends_an_outage_streak
    limiter = Slidelimit::Limiter.memory(policy(limit: 1, window_ms: 60_000), clock: -> { 5_000 })
    worker = worker_with(limiter: limiter, tenant: ->(j) { j["args"][0] }, jitter_ms: 0)
    @middleware.call(worker, job, "default") {}
    @middleware.call(worker, job("slidelimit_outage_deferrals" => 4), "default") { flunk "ran" }
    (payload, _at), = scheduled
    assert_equal 1, payload["slidelimit_deferrals"]
    refute payload.key?("slidelimit_outage_deferrals"), "the limiter answered: the outage count starts again"
  end

  def test_jitter_is_added_within_its_bound
    limiter = Slidelimit::Limiter.memory(policy(limit: 1, window_ms: 1_000), clock: -> { 5_000 })
    worker = worker_with(limiter: limiter, tenant: ->(_) { "t" }, jitter_ms: 500)
    @middleware.call(worker, job, "default") { nil }
    10.times { |i| @middleware.call(worker, job("jid" => "j#{i}"), "default") { flunk "ran" } }
    ats = scheduled.map(&:last)
    assert_equal 10, ats.size
    ats.each { |at| assert_operator at, :>=, @now + 1.0 - 0.001 }
    ats.each { |at| assert_operator at, :<=, @now + 1.5 + 0.001 }
    assert_operator ats.uniq.size, :>, 1
  end

  def test_cap_on_deferrals_hands_over_to_sidekiq_retries
    limiter = Slidelimit::Limiter.memory(policy(limit: 1, window_ms: 60_000), clock: -> { 5_000 })
    worker = worker_with(limiter: limiter, tenant: ->(_) { "t" }, max_deferrals: 3)
    @middleware.call(worker, job, "default") { nil }
    e = assert_raises(Slidelimit::Sidekiq::DeferralLimitExceeded) do
      @middleware.call(worker, job("slidelimit_deferrals" => 3), "default") { flunk "ran" }
    end
    assert_match(/deferred 3 times/, e.message)
    assert_empty scheduled
  end

  def test_unavailable_defers_with_backoff_or_runs_by_choice
    down = Slidelimit::Limiter.new(Slidelimit.redis(url: "redis://127.0.0.1:1/", timeout_ms: 200), policy)
    defer = worker_with(limiter: down, tenant: ->(_) { "t" }, jitter_ms: 0, outage_backoff_ms: 100,
                        outage_backoff_max_ms: 300)
    [0, 1, 2, 3].each do |n|
      @redis.del("schedule")
      @middleware.call(defer, job("slidelimit_outage_deferrals" => n), "default") { flunk "ran" }
      (payload, at), = scheduled
      assert_equal n + 1, payload["slidelimit_outage_deferrals"]
      assert_nil payload["slidelimit_deferrals"], "an outage is no rate-limit deferral"
      assert_in_delta @now + ([100 * (2**n), 300].min / 1000.0), at, 0.001
    end
    capped = worker_with(limiter: down, tenant: ->(_) { "t" }, max_outage_deferrals: 2)
    assert_raises(Slidelimit::Sidekiq::OutageLimitExceeded) do
      @middleware.call(capped, job("slidelimit_outage_deferrals" => 2), "default") { flunk "ran" }
    end
    open = worker_with(limiter: down, tenant: ->(_) { "t" }, on_unavailable: :run)
    ran = false
    @middleware.call(open, job, "default") { ran = true }
    assert ran, "on_unavailable: :run fails open"
  end

  def test_workers_without_a_limit_pass_through
    plain = Class.new { include Sidekiq::Worker }.new
    assert_equal :done, @middleware.call(plain, job, "default") { :done }
  end

  def test_config_errors_name_the_option
    limiter = Slidelimit::Limiter.memory(policy)
    {
      { limiter: :nope, tenant: ->(_) { "t" } } => "limiter",
      { limiter: limiter, tenant: "t" } => "tenant",
      { limiter: limiter, tenant: ->(_) { "t" }, cost: 1.5 } => "cost",
      { limiter: limiter, tenant: ->(_) { "t" }, on_unavailable: :maybe } => "on_unavailable",
      { limiter: limiter, tenant: ->(_) { "t" }, max_deferrals: -1 } => "max_deferrals",
      # A cost no check could spend (core's range), refused when set.
      { limiter: limiter, tenant: ->(_) { "t" }, cost: 0 } => "cost",
      { limiter: limiter, tenant: ->(_) { "t" }, cost: -1 } => "cost",
      { limiter: limiter, tenant: ->(_) { "t" }, cost: 2**64 } => "cost",
      # Over the policy's limit of 3: no check could ever pass it.
      { limiter: limiter, tenant: ->(_) { "t" }, cost: 4 } => "cost",
      # Callables that cannot take the job hash.
      { limiter: limiter, tenant: -> { "t" } } => "tenant",
      { limiter: limiter, tenant: ->(_job, _queue) { "t" } } => "tenant",
      { limiter: limiter, tenant: "t".method(:to_s) } => "tenant",
      { limiter: limiter, tenant: ->(_) { "t" }, cost: -> { 1 } } => "cost",
      { limiter: limiter, tenant: ->(_) { "t" }, cost: ->(_a, _b) { 1 } } => "cost",
      # No silent clamp of the backoff, and false is not "unbounded".
      { limiter: limiter, tenant: ->(_) { "t" }, outage_backoff_ms: 5000, outage_backoff_max_ms: 100 } =>
        "outage_backoff_max_ms",
      { limiter: limiter, tenant: ->(_) { "t" }, max_outage_deferrals: false } => "max_outage_deferrals",
    }.each do |options, field|
      e = assert_raises(Slidelimit::InvalidArgument, options.inspect) { Slidelimit::Sidekiq::Config.new(**options) }
      assert_equal field, e.field, options.inspect
      assert e.message.start_with?("#{field}: "), e.message
    end
  end

  def test_config_takes_what_can_be_called_with_the_job
    limiter = Slidelimit::Limiter.memory(policy)
    # The largest cost the policy's limit of 3 lets pass.
    ok = Slidelimit::Sidekiq::Config.new(limiter: limiter, tenant: proc { "t" }, cost: 3,
                                         outage_backoff_ms: 100, outage_backoff_max_ms: 100, max_outage_deferrals: nil)
    assert_equal 3, ok.cost
    assert_nil ok.max_outage_deferrals
    [proc { "t" }, ->(*) { "t" }, ->(job, _extra = nil) { job["args"][0] }, method(:String)].each do |tenant|
      assert_same tenant, Slidelimit::Sidekiq::Config.new(limiter: limiter, tenant: tenant, cost: proc { 1 }).tenant
    end
  end

  # The middleware writes only non-negative Integers into its counts: any
  # other value there fails the job naming the key, before the limiter is
  # asked (so alike whether it would allow or deny), instead of an error
  # from deep inside or a count read as something it is not.
  def test_a_count_in_the_job_that_is_no_count_is_invalid
    limiter = Slidelimit::Limiter.memory(policy(limit: 1, window_ms: 60_000), clock: -> { 5_000 })
    worker = worker_with(limiter: limiter, tenant: ->(_) { "t" }, jitter_ms: 0)
    [Slidelimit::Sidekiq::DEFERRALS_KEY, Slidelimit::Sidekiq::OUTAGE_DEFERRALS_KEY].each do |key|
      ["abc", nil, -5, 1.5, "2"].each do |bad|
        e = assert_raises(Slidelimit::InvalidArgument, "#{key} #{bad.inspect}") do
          @middleware.call(worker, job(key => bad), "default") { flunk "ran" }
        end
        assert_equal key, e.field
        assert e.message.start_with?("#{key}: "), e.message
      end
    end
    assert limiter.peek("t").allowed?, "no permit was taken"
    assert_empty scheduled
  end
end
