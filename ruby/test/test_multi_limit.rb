# frozen_string_literal: true

require_relative "test_helper"
require "json"

# Policies of several limits (Slidelimit::Limit, Policy.new(limits: ...)) on
# a real redis-server: every limit must allow a check, which is recorded in
# all of them or in none.
class TestMultiLimit < Minitest::Test
  include TestHelper

  T0 = 1_700_000_000_000
  HEADER = File.expand_path("../../ffi-c/include/slidelimit.h", __dir__)

  def setup
    @redis = Slidelimit.redis(url: redis_url, timeout_ms: 2000)
  end

  def teardown
    @redis&.close
  end

  def limit(**fields)
    Slidelimit::Limit.new(**fields)
  end

  # A sliding log of 2 per second and a bucketed window of 3 per minute in
  # 60 buckets of 1 s.
  def two_limits(resource: "res-#{SecureRandom.hex(4)}")
    Slidelimit::Policy.new(resource: resource, limits: [
                             limit(limit: 2, window_ms: 1000),
                             limit(algorithm: :bucketed_window, limit: 3, window_ms: 60_000, buckets: 60),
                           ])
  end

  def dumps(keys)
    keys.map { |k| @redis.dump(k) }
  end

  # The sizes the gem allocates are the header's (a multi-limit call has up
  # to 8 keys), and its struct has the header's fields in order.
  def test_constants_and_decision_struct_match_the_header
    header = File.read(HEADER)
    defines = header.scan(/^#define SLIDELIMIT_(\w+) (.+)$/).to_h
    max = Integer(defines.fetch("MAX_LIMITS"))
    assert_equal 8, max
    assert_equal max, Slidelimit::Native::MAX_LIMITS
    assert_equal Integer(defines.fetch("KEY_MAX")), Slidelimit::Native::KEY_MAX
    assert_equal Integer(defines.fetch("CALL_BUF_MAX")), Slidelimit::Native::CALL_BUF_MAX
    assert_equal Integer(defines.fetch("DECISION_WORDS")), Slidelimit::Native::DECISION_WORDS
    assert_equal Integer(defines.fetch("SERVER_ERROR_MESSAGE_EXTRA")), Slidelimit::Native::SERVER_ERROR_MESSAGE_EXTRA
    parts = defines.fetch("CALL_PARTS_MAX")
    assert_equal "((5 * SLIDELIMIT_MAX_LIMITS) + 2)", parts
    assert_equal (5 * max) + 2, Slidelimit::Native::CALL_PARTS_MAX
    c_struct = header[/typedef struct slidelimit_decision \{(.*?)\} slidelimit_decision;/m, 1]
    fields = c_struct.scan(/^\s*(bool|uint64_t|int32_t) (\w+);/)
    assert_equal [%w[bool allowed], %w[uint64_t remaining], %w[uint64_t retry_after_ms],
                  %w[uint64_t reset_after_ms], %w[uint64_t now_ms], %w[int32_t denied_by]], fields
    assert_equal fields.map { |_, name| name.to_sym }, Slidelimit::Native::DecisionStruct.members
    # C's natural alignment of those types: the int32_t after now_ms.
    struct = Slidelimit::Native::DecisionStruct
    assert_equal [0, 8, 16, 24, 32, 40], struct.members.map { |m| struct.offset_of(m) }
    assert_equal 48, struct.size
  end

  def test_limit_is_a_frozen_value_and_policy_resolves_buckets
    l = limit(limit: 2, window_ms: 1000)
    assert l.frozen?
    assert_equal :sliding_log, l.algorithm
    assert_equal l, limit(algorithm: "sliding_log", limit: 2, window_ms: 1000)
    p = Slidelimit::Policy.new(resource: "geocode", limits: [l, limit(algorithm: :bucketed_window, limit: 3,
                                                                      window_ms: 60_000)])
    assert p.frozen?
    assert p.limits.frozen?
    assert_equal [l, limit(algorithm: :bucketed_window, limit: 3, window_ms: 60_000, buckets: 60)], p.limits
    # The single getters report the first limit.
    assert_equal [:sliding_log, 2, 1000, nil], [p.algorithm, p.limit, p.window_ms, p.buckets]
    assert_equal p, Slidelimit::Policy.new(**p.to_h)
    # One limit in a list is the single form: equal, same key.
    one = Slidelimit::Policy.new(resource: "geocode", limits: [l])
    single = Slidelimit::Policy.new(resource: "geocode", limit: 2, window_ms: 1000)
    assert_equal single, one
    assert_equal [l], single.limits
    assert_equal Slidelimit::Limiter.memory(single).key("t"), Slidelimit::Limiter.memory(one).key("t")
  end

  def test_policy_errors_name_the_limit
    ok = limit(limit: 2, window_ms: 1000)
    cases = {
      [ok, limit(limit: 5, window_ms: 0)] => "limits[1].window_ms",
      [ok, limit(limit: 5, window_ms: "1000")] => "limits[1].window_ms",
      [ok, limit(limit: 0, window_ms: 60_000)] => "limits[1].limit",
      [ok, limit(limit: -1, window_ms: 60_000)] => "limits[1].limit",
      [ok, limit(algorithm: :nope, limit: 5, window_ms: 60_000)] => "limits[1].algorithm",
      [ok, limit(algorithm: 7, limit: 5, window_ms: 60_000)] => "limits[1].algorithm",
      [ok, limit(limit: 5, window_ms: 60_000, buckets: 60)] => "limits[1].buckets",
      [limit(limit: 5, window_ms: 0), ok] => "limits[0].window_ms",
      # One limit: the single form's field names.
      [limit(limit: 5, window_ms: 0)] => "window_ms",
      [] => "limits",
      [ok, ok] => "limits", # the same limit twice
      Array.new(9) { |i| limit(limit: 1, window_ms: 1000 + i) } => "limits",
      # Too many is the list's fault, whatever its entries hold.
      [*Array.new(8) { |i| limit(limit: 1, window_ms: 1000 + i) }, limit(limit: 1.5, window_ms: 10)] => "limits",
      [*Array.new(8) { |i| limit(limit: 1, window_ms: 1000 + i) }, { limit: 1 }] => "limits",
      [ok, { limit: 1, window_ms: 10 }] => "limits[1]",
    }
    cases.each do |limits, field|
      e = assert_raises(Slidelimit::InvalidArgument, limits.inspect) do
        Slidelimit::Policy.new(resource: "geocode", limits: limits)
      end
      assert_equal field, e.field, "#{limits.inspect}: #{e.message}"
      assert e.message.start_with?("#{field}: "), e.message
    end
    %i[algorithm limit window_ms buckets].each do |single|
      e = assert_raises(Slidelimit::InvalidArgument) do
        Slidelimit::Policy.new(resource: "geocode", single => 1, limits: [ok])
      end
      assert_equal single.to_s, e.field
    end
    assert_equal "limits", assert_raises(Slidelimit::InvalidArgument) {
      Slidelimit::Policy.new(resource: "geocode", limits: ok)
    }.field
    assert_equal "limit", assert_raises(Slidelimit::InvalidArgument) {
      Slidelimit::Policy.new(resource: "geocode", window_ms: 1000)
    }.field
  end

  # Log 2/s and bucketed 3/min at the caller's times, with each key read
  # back: allowed only when both allow; a denial records in neither.
  def test_every_limit_must_allow_and_a_denial_records_nothing
    l = Slidelimit::Limiter.new(@redis, two_limits, deny_cache: false)
    t = tenant
    log_key, bucketed_key = l.keys(t)
    assert_match(/:log:1000\z/, log_key)
    assert_match(/:bucketed:60000:60\z/, bucketed_key)
    assert_equal log_key, l.key(t)

    # remaining = the lower of the two (log 2 - 1 = 1, bucketed 3 - 1 = 2).
    d = l.acquire_at(t, T0)
    assert_equal [true, 1, 0, nil], [d.allowed?, d.remaining, d.retry_after_ms, d.denied_by]
    d = l.acquire_at(t, T0)
    assert_equal [true, 0, nil], [d.allowed?, d.remaining, d.denied_by]
    assert_equal 2, @redis.llen(log_key)
    before = dumps([log_key, bucketed_key])

    # The log is full (the bucketed window has 1 left): denied by limit 0,
    # retry when the log's oldest entry (T0) leaves the second.
    d = l.acquire_at(t, T0)
    assert_equal [false, 0, 1000, 0], [d.allowed?, d.remaining, d.retry_after_ms, d.denied_by]
    assert_equal before, dumps([log_key, bucketed_key]), "a denial wrote to a key"

    # A second later the log is empty again; the bucketed window takes its 3rd.
    d = l.acquire_at(t, T0 + 1000)
    assert_equal [true, 0], [d.allowed?, d.remaining]
    assert_equal 1, @redis.llen(log_key)
    before = dumps([log_key, bucketed_key])

    # Now the bucketed window (3 in the minute) denies though the log allows:
    # denied by limit 1, and the log did not record it either.
    d = l.acquire_at(t, T0 + 1001)
    refute d.allowed?
    assert_equal 1, d.denied_by
    # Its oldest bucket (T0's, [T0, T0 + 1000), 2 permits) covers the need
    # of 1; its permits count as admitted at its last ms, T0 + 999, so they
    # hold until T0 + 999 + 60_000 (docs/protocol.md, bucketed window).
    assert_equal T0 + 999 + 60_000 - (T0 + 1001), d.retry_after_ms
    assert_equal before, dumps([log_key, bucketed_key]), "a denial wrote to a key"
    assert_equal 1, @redis.llen(log_key)

    # Peeks from here on give what core's engine gives after the same admissions.
    redis_steps = [T0, T0, T0, T0 + 1000, T0 + 1001, T0 + 59_999, T0 + 60_000].map { |now| [now, l.peek(t, now_ms: now)] }
    mem = Slidelimit::Limiter.memory(two_limits(resource: l.policy.resource))
    [T0, T0, T0 + 1000].each { |now| assert mem.acquire_at(t, now).allowed? }
    redis_steps.each { |now, d2| assert_equal mem.peek(t, now_ms: now), d2, "peek at #{now}" }
    mem.close
  end

  def test_denied_by_on_server_time_and_one_limit_has_none
    l = Slidelimit::Limiter.new(@redis, two_limits, deny_cache: false)
    t = tenant
    2.times { assert l.acquire(t).allowed? }
    d = l.acquire(t)
    refute d.allowed?
    assert_equal 0, d.denied_by
    single = Slidelimit::Limiter.new(@redis, policy(limit: 1, window_ms: 60_000), deny_cache: false)
    assert single.acquire(t).allowed?
    d = single.acquire(t)
    refute d.allowed?
    assert_nil d.denied_by
    assert_nil l.acquire(tenant).denied_by
  end

  def test_cost_must_fit_every_limit
    l = Slidelimit::Limiter.new(@redis, two_limits, deny_cache: false)
    e = assert_raises(Slidelimit::InvalidArgument) { l.acquire(tenant, cost: 3) }
    assert_equal "cost", e.field
    assert l.acquire(tenant, cost: 2).allowed?
  end

  def test_reset_deletes_every_key
    l = Slidelimit::Limiter.new(@redis, two_limits)
    t = tenant
    keys = l.keys(t)
    assert_equal 2, keys.length
    l.acquire(t)
    assert_equal [1, 1], keys.map { |k| @redis.exists(k) }
    assert l.reset(t)
    assert_equal [0, 0], keys.map { |k| @redis.exists(k) }
    refute l.reset(t)
  end

  def test_memory_engine_runs_several_limits_and_reset_removes_every_key
    engine = Slidelimit::MemoryEngine.new
    l = Slidelimit::Limiter.memory(two_limits, engine: engine)
    refute l.deny_cache?
    t = tenant
    2.times { assert l.acquire_at(t, T0).allowed? }
    d = l.acquire_at(t, T0)
    assert_equal [false, 0, 1000], [d.allowed?, d.denied_by, d.retry_after_ms]
    assert_equal 2, engine.key_count
    assert l.reset(t)
    assert_equal 0, engine.key_count
    l.close
    engine.close
  end

  # The driver's `policy` op takes `limits` and prints denied_by.
  def test_driver_limits_and_denied_by
    driver = File.expand_path("../../drivers/ruby", __dir__)
    requests = [
      { op: "store", kind: "redis", url: redis_url },
      { op: "policy", resource: "res-#{SecureRandom.hex(4)}",
        limits: [{ algorithm: "sliding_log", limit: 1, window_ms: 1000 },
                 { algorithm: "bucketed_window", limit: 5, window_ms: 60_000, buckets: 60 }] },
      { op: "acquire_at", tenant: "t", now_ms: T0 },
      { op: "acquire_at", tenant: "t", now_ms: T0 },
      { op: "policy", resource: "r", limit: 1, limits: [{ limit: 1, window_ms: 1000 }] },
      { op: "policy", resource: "r", limits: [{ limit: 1, window_ms: 1000 }, { limit: 1, window_ms: 0 }] },
      { op: "policy", resource: "r", limits: [] },
    ]
    out = IO.popen([driver], "r+") do |io|
      requests.each { |r| io.puts(JSON.generate(r)) }
      io.close_write
      io.read
    end
    lines = out.lines.map(&:chomp)
    # reset_after is the later of the log's (1000) and the bucketed
    # window's (T0's bucket holds until T0 + 999 + 60_000).
    assert_equal '{"allowed":true,"remaining":0,"retry_after_ms":0,"reset_after_ms":60999,"now_ms":1700000000000}',
                 lines[2]
    assert_equal '{"allowed":false,"remaining":0,"retry_after_ms":1000,"reset_after_ms":60999,' \
                 '"now_ms":1700000000000,"denied_by":0}', lines[3]
    assert_equal "protocol", JSON.parse(lines[4])["error"]
    assert_equal "limits[1].window_ms", JSON.parse(lines[5])["field"]
    assert_equal "limits", JSON.parse(lines[6])["field"]
  end
end
