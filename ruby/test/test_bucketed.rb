# frozen_string_literal: true

require_relative "test_helper"

# The bucketed window (docs/protocol.md): the algorithm and the buckets
# keyword reach core, on a real redis-server (scripts/with-redis.sh) and on
# the memory engine.
class TestBucketed < Minitest::Test
  include TestHelper

  def setup
    @redis = Slidelimit.redis(url: redis_url, timeout_ms: 2000)
  end

  def teardown
    @redis&.close
  end

  # One random sequence of acquires and peeks at caller times: `a` decides
  # as `b` at every step, and the sequence both allows and denies. It spans
  # less than a window of real time, so no key expires on Redis's clock.
  def replay(a, b, seed:, max_step:, max_cost:, steps: 300)
    rng = Random.new(seed)
    tenants = [tenant, "b{c}-#{SecureRandom.hex(3)}", "zoë 東京 #{SecureRandom.hex(3)}"]
    now = 1_700_000_000_000
    allowed = 0
    steps.times do |i|
      now += rng.rand(0...max_step)
      t = tenants.sample(random: rng)
      cost = rng.rand(1..max_cost)
      got, want = if rng.rand < 0.2
                    [a.peek(t, cost: cost, now_ms: now), b.peek(t, cost: cost, now_ms: now)]
                  else
                    [a.acquire_at(t, now, cost: cost), b.acquire_at(t, now, cost: cost)]
                  end
      assert_equal want, got, "step #{i} (#{t} cost #{cost} at #{now})"
      allowed += 1 if got.allowed?
    end
    assert allowed.between?(1, steps - 1), "allowed #{allowed} of #{steps}"
  end

  def test_redis_agrees_with_memory
    [
      [{ limit: 5, window_ms: 1000, buckets: 10 }, 120, 3],
      [{ limit: 20, window_ms: 6000 }, 700, 4], # core's default count, 60
      [{ limit: 4, window_ms: 1000, buckets: 1 }, 150, 2],
    ].each_with_index do |(fields, max_step, max_cost), i|
      p = policy(algorithm: :bucketed_window, **fields)
      redis = Slidelimit::Limiter.new(@redis, p)
      memory = Slidelimit::Limiter.memory(p, clock: -> { 0 })
      replay(redis, memory, seed: 7 + i, max_step: max_step, max_cost: max_cost)
    end
  end

  # With one bucket per millisecond the bucketed window is the sliding log.
  def test_one_millisecond_buckets_are_the_log
    bucketed = Slidelimit::Limiter.new(@redis, policy(algorithm: :bucketed_window, limit: 5, window_ms: 1000,
                                                      buckets: 1000))
    log = Slidelimit::Limiter.memory(policy(algorithm: :sliding_log, limit: 5, window_ms: 1000), clock: -> { 0 })
    replay(bucketed, log, seed: 11, max_step: 120, max_cost: 3)
  end

  def test_bad_buckets_name_the_field
    [
      { algorithm: :sliding_log, buckets: 10 },
      { algorithm: :sliding_counter, buckets: 1 },
      { buckets: 10 }, # the default algorithm, the log
      { algorithm: :bucketed_window, buckets: 3 }, # does not divide 1000
      { algorithm: :bucketed_window, window_ms: 7200, buckets: 3601 },
      { algorithm: :bucketed_window }, # the default, 60, does not divide 1000
      { algorithm: :bucketed_window, buckets: -1 },
      { algorithm: :bucketed_window, buckets: 2**64 },
      { algorithm: :bucketed_window, buckets: 2.5 },
      { algorithm: :bucketed_window, buckets: "10" },
    ].each do |override|
      e = assert_raises(Slidelimit::InvalidArgument, override.inspect) do
        Slidelimit::Policy.new(**{ resource: "geocode", limit: 3, window_ms: 1000 }.merge(override))
      end
      assert_equal "buckets", e.field, override.inspect
      assert_equal :invalid_argument, e.code
      assert e.message.start_with?("buckets: "), e.message
    end
    assert_equal 3600, policy(algorithm: :bucketed_window, window_ms: 7200, buckets: 3600).buckets
  end

  # buckets: 0 is a count of 0 for core, never "not given": refused where
  # core's default (60) would divide the window, and by the other algorithms.
  def test_zero_buckets_is_cores_error_not_the_default
    %i[bucketed_window sliding_log sliding_counter].each do |algorithm|
      e = assert_raises(Slidelimit::InvalidArgument, algorithm.inspect) do
        Slidelimit::Policy.new(resource: "geocode", algorithm: algorithm, limit: 3, window_ms: 60_000, buckets: 0)
      end
      assert_equal "buckets", e.field
      assert_equal :invalid_argument, e.code
      want = algorithm == :bucketed_window ? "buckets: must be at least 1" : "buckets: only the bucketed_window"
      assert e.message.start_with?(want), e.message
    end
  end

  # policy.buckets is the count core uses: its default for nil, the count
  # given, nil for the algorithms without buckets.
  def test_buckets_reports_cores_effective_count
    defaulted = policy(resource: "geocode", algorithm: :bucketed_window, window_ms: 60_000)
    assert_equal 60, defaulted.buckets
    assert_equal 60, defaulted.to_h[:buckets]
    assert_equal defaulted, policy(resource: "geocode", algorithm: :bucketed_window, window_ms: 60_000, buckets: 60)
    assert_equal 12, policy(algorithm: :bucketed_window, window_ms: 60_000, buckets: 12).buckets
    assert_nil policy(algorithm: :sliding_log).buckets
    assert_nil policy(algorithm: :sliding_counter).buckets
    # The limiter's policy is the same object, and its key has that count.
    limiter = Slidelimit::Limiter.memory(defaulted, clock: -> { 0 })
    assert_equal 60, limiter.policy.buckets
    assert limiter.key("t").end_with?(":bucketed:60000:60"), limiter.key("t")
  end

  def test_key_and_policy_fields
    ns = "rl-rb-bucketed-#{SecureRandom.hex(4)}"
    defaulted = Slidelimit::Policy.new(namespace: ns, resource: "geocode", algorithm: :bucketed_window, limit: 2,
                                       window_ms: 60_000)
    ten = Slidelimit::Policy.new(namespace: ns, resource: "geocode", algorithm: "bucketed_window", limit: 2,
                                 window_ms: 60_000, buckets: 10)
    assert_equal :bucketed_window, defaulted.algorithm
    assert_equal 60, defaulted.buckets # core's default, as core uses it
    assert_equal 10, ten.buckets
    assert_equal ten, Slidelimit::Policy.new(**ten.to_h)
    assert_equal defaulted, Slidelimit::Policy.new(**defaulted.to_h)
    refute_equal defaulted, ten
    assert_nil policy.buckets # the log has none
    t = "a}b"
    [[defaulted, "#{ns}:{geocode:a%7Db}:bucketed:60000:60", 1000],
     [ten, "#{ns}:{geocode:a%7Db}:bucketed:60000:10", 6000]].each do |p, want, bucket_ms|
      l = Slidelimit::Limiter.new(@redis, p)
      assert_equal want, l.key(t)
      assert_equal want, Slidelimit::Limiter.memory(p).key(t)
      assert l.acquire(t).allowed?
      assert_equal "string", @redis.type(want)
      # Held to the bucket's last millisecond plus the window.
      assert @redis.pttl(want).between?(59_000, 60_000 + bucket_ms - 1), @redis.pttl(want).to_s
    end
    # Two counts, two keys: each policy still has its own budget.
    [defaulted, ten].each do |p|
      l = Slidelimit::Limiter.new(@redis, p)
      d = l.acquire(t)
      assert d.allowed?
      assert_equal 0, d.remaining
      refute l.acquire(t).allowed?
      assert l.reset(t)
    end
  end
end
