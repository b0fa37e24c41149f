# frozen_string_literal: true

require_relative "test_helper"

# The gem's Ruby surface on the memory engine: types, defaults, errors and
# bad input. Decisions themselves are core's, pinned by the conformance
# vectors (drivers/ruby); these tests check what Ruby adds.
class TestApi < Minitest::Test
  include TestHelper

  def test_version_is_cores
    assert_equal Slidelimit::VERSION, Slidelimit.core_version
  end

  def test_policy_defaults_come_from_core_and_policy_is_frozen
    p = Slidelimit::Policy.new(resource: "geocode", limit: 600, window_ms: 60_000)
    assert_equal "rl", p.namespace
    assert_equal :sliding_log, p.algorithm
    assert p.frozen?
    assert p.namespace.frozen?
    assert_equal p, Slidelimit::Policy.new(namespace: "rl", resource: "geocode", algorithm: "sliding_log",
                                           limit: 600, window_ms: 60_000)
    c = Slidelimit::Policy.new(resource: "geocode", algorithm: :sliding_counter, limit: 5, window_ms: 10)
    assert_equal :sliding_counter, c.algorithm
    assert_equal "rl:{geocode:t}:counter:10", Slidelimit::Limiter.memory(c).key("t")
  end

  def test_policy_errors_name_the_field
    cases = {
      { limit: 0 } => "limit",
      { window_ms: 0 } => "window_ms",
      { limit: 10_001 } => "limit", # the sliding log's cap
      { limit: 1.5 } => "limit",
      { limit: -1 } => "limit",
      { window_ms: 2**64 } => "window_ms",
      { window_ms: "1000" } => "window_ms",
      { namespace: "a b" } => "namespace",
      { namespace: :rl } => "namespace",
      { resource: "" } => "resource",
      { algorithm: :fixed_window } => "algorithm",
      { algorithm: 1 } => "algorithm",
      { algorithm: false } => "algorithm", # only nil is "not given"
      { algorithm: "\xFF" } => "algorithm", # not valid UTF-8: no Symbol can be made of it
    }
    cases.each do |override, field|
      e = assert_raises(Slidelimit::InvalidArgument, override.inspect) do
        Slidelimit::Policy.new(**{ resource: "geocode", limit: 3, window_ms: 1000 }.merge(override))
      end
      assert_equal field, e.field, override.inspect
      assert e.message.start_with?("#{field}: "), e.message
    end
  end

  def test_invalid_argument_is_an_argument_error_and_a_slidelimit_error
    e = assert_raises(ArgumentError) { Slidelimit::Policy.new(resource: "geocode", limit: 0, window_ms: 1) }
    assert_kind_of Slidelimit::Error, e
    assert_kind_of Slidelimit::InvalidArgument, e
    assert_equal :invalid_argument, e.code
    # rescue Slidelimit::Error catches it too (rescue matches modules by ===).
    caught = begin
      Slidelimit::Policy.new(resource: "geocode", limit: 0, window_ms: 1)
    rescue Slidelimit::Error => err
      err
    end
    assert_same Slidelimit::InvalidArgument, caught.class
  end

  def test_one_class_per_core_code
    expected = { 1 => :invalid_argument, 2 => :unavailable, 3 => :script_error, 4 => :wrong_type,
                 5 => :malformed_reply, 6 => :permission_denied, 7 => :internal }
    expected.each do |number, code|
      klass = Slidelimit::ERROR_CLASSES.fetch(number)
      assert_equal code, klass::CODE
      assert_equal code.to_s, Slidelimit::Native.slidelimit_result_name(number)
      assert klass.include?(Slidelimit::Error)
      assert klass <= StandardError, "#{klass} must be rescued by a bare rescue"
      assert_equal number == 1, klass <= ArgumentError ? true : false
    end
  end

  def test_decision_is_frozen_with_predicates
    l = Slidelimit::Limiter.memory(policy(limit: 1))
    t = tenant
    d = l.acquire_at(t, 1000)
    assert d.frozen?
    assert d.allowed?
    assert_equal decision(true, 0, 0, 1000, 1000), d
    denied = l.acquire_at(t, 1500)
    refute denied.allowed?
    assert denied.denied?
    assert_equal 500, denied.retry_after_ms
    assert_in_delta 0.5, denied.retry_after
    assert_raises(FrozenError) { denied.instance_variable_set(:@allowed, true) }
  end

  # A Decision built by hand (tests, fakes) is checked by name: allowed? must
  # answer true or false, and #retry_after must not meet a String.
  def test_decision_new_checks_its_fields
    good = { allowed: false, remaining: 0, retry_after_ms: 5, reset_after_ms: 5, now_ms: 1 }
    assert_equal 5, Slidelimit::Decision.new(**good).retry_after_ms
    assert_equal 2, Slidelimit::Decision.new(**good, denied_by: 2).denied_by
    [[:allowed, 1], [:allowed, "false"], [:allowed, nil], [:remaining, -1], [:retry_after_ms, nil],
     [:retry_after_ms, "5"], [:reset_after_ms, 1.5], [:now_ms, 2**64], [:denied_by, -1]].each do |field, value|
      e = assert_raises(Slidelimit::InvalidArgument, "#{field}: #{value.inspect}") do
        Slidelimit::Decision.new(**good, field => value)
      end
      assert_equal field.to_s, e.field
    end
  end

  def test_peek_records_nothing_and_reset_forgets
    l = Slidelimit::Limiter.memory(policy(limit: 2))
    t = tenant
    3.times { assert l.peek(t, now_ms: 10).allowed? }
    assert_equal 1, l.acquire_at(t, 10).remaining
    # A peek answers as the acquire would (remaining after it), twice alike.
    2.times { assert_equal decision(true, 0, 0, 1000, 10), l.peek(t, now_ms: 10) }
    assert_equal decision(true, 0, 0, 1000, 10), l.acquire_at(t, 10)
    refute l.peek(t, now_ms: 10).allowed?
    assert l.reset(t)
    refute l.reset(t)
    assert_equal 1, l.acquire_at(t, 10).remaining
  end

  def test_memory_clock_stands_in_for_redis_time
    now = 5_000
    l = Slidelimit::Limiter.memory(policy(limit: 1, window_ms: 100), clock: -> { now })
    t = tenant
    assert_equal 5_000, l.acquire(t).now_ms
    refute l.acquire(t).allowed?
    now += 100
    assert l.acquire(t).allowed?
  end

  def test_limiters_can_share_an_engine
    engine = Slidelimit::MemoryEngine.new
    p = policy(limit: 1)
    a = Slidelimit::Limiter.memory(p, engine: engine)
    b = Slidelimit::Limiter.memory(p, engine: engine)
    t = tenant
    assert a.acquire_at(t, 1).allowed?
    refute b.acquire_at(t, 1).allowed?
    assert_equal 1, engine.key_count
    a.close
    refute engine.closed?, "a limiter does not close an engine it was given"
    refute b.acquire_at(t, 2).allowed?
  end

  # Every bad input of the issue: InvalidArgument naming the field, and no
  # key written (the engine holds none afterwards).
  def test_bad_input_names_the_field_and_writes_nothing
    engine = Slidelimit::MemoryEngine.new
    l = Slidelimit::Limiter.memory(policy(limit: 5), engine: engine)
    bad = [
      [-> { l.acquire(:tenant) }, "tenant"],
      [-> { l.acquire(17) }, "tenant"],
      [-> { l.acquire(nil) }, "tenant"],
      [-> { l.acquire("t\xff\xfe".b) }, "tenant"],
      [-> { l.acquire("caf\xC3".dup.force_encoding("UTF-8")) }, "tenant"],
      [-> { l.acquire("") }, "tenant"],
      [-> { l.acquire("x" * 513) }, "tenant"],
      [-> { l.acquire("t", cost: 1.0) }, "cost"],
      [-> { l.acquire("t", cost: 2.5) }, "cost"],
      [-> { l.acquire("t", cost: -1) }, "cost"],
      [-> { l.acquire("t", cost: 0) }, "cost"],
      [-> { l.acquire("t", cost: 6) }, "cost"],
      [-> { l.acquire("t", cost: 2**64) }, "cost"],
      [-> { l.acquire("t", cost: 2**100) }, "cost"],
      [-> { l.acquire("t", cost: "1") }, "cost"],
      [-> { l.acquire("t", cost: nil) }, "cost"],
      [-> { l.acquire_at("t", 1.0) }, "now_ms"],
      [-> { l.acquire_at("t", -5) }, "now_ms"],
      [-> { l.acquire_at("t", 2**52 + 1) }, "now_ms"],
      [-> { l.acquire_at("t", 2**64) }, "now_ms"],
      [-> { l.peek("t", now_ms: 3.5) }, "now_ms"],
      [-> { l.peek("t", cost: -2) }, "cost"],
      [-> { l.reset(:t) }, "tenant"],
      [-> { l.key("a\x80".b) }, "tenant"],
    ]
    bad.each_with_index do |(call, field), i|
      e = assert_raises(Slidelimit::InvalidArgument, "case #{i}") { call.call }
      assert_equal field, e.field, "case #{i}: #{e.message}"
      assert e.message.start_with?("#{field}: "), "case #{i}: #{e.message}"
    end
    assert_equal 0, engine.key_count
  end

  def test_strings_in_other_encodings_are_read_as_their_text
    l = Slidelimit::Limiter.memory(policy)
    latin1 = "caf\xE9".dup.force_encoding("ISO-8859-1")
    assert_equal l.key("café"), l.key(latin1)
    # A valid UTF-8 byte string is the same tenant as its text.
    assert_equal l.key("café"), l.key("café".b)
  end

  def test_closed_limiter_raises_and_close_is_idempotent
    l = Slidelimit::Limiter.memory(policy)
    l.close
    l.close
    assert l.closed?
    e = assert_raises(Slidelimit::InvalidArgument) { l.acquire("t") }
    assert_equal "limiter", e.field
    assert_raises(Slidelimit::InvalidArgument) { l.key("t") }
  end

  def test_limiter_refuses_what_is_no_redis_client
    e = assert_raises(Slidelimit::InvalidArgument) { Slidelimit::Limiter.new(Object.new, policy) }
    assert_equal "redis", e.field
    e = assert_raises(Slidelimit::InvalidArgument) { Slidelimit::Limiter.new(Redis.new, { limit: 1 }) }
    assert_equal "policy", e.field
    e = assert_raises(Slidelimit::InvalidArgument) { Slidelimit::Limiter.memory(policy, clock: 5) }
    assert_equal "clock", e.field
  end

  # false is no "not given": refused like any other value that is not one,
  # as is a clock that cannot be called with no argument.
  def test_memory_options_refuse_false_and_unusable_callables
    {
      { clock: false } => "clock",
      { clock: ->(_now) { 1 } } => "clock",
      { clock: 1.method(:+) } => "clock",
      { engine: false } => "engine",
      { metrics: false } => "metrics",
    }.each do |options, field|
      e = assert_raises(Slidelimit::InvalidArgument, options.inspect) { Slidelimit::Limiter.memory(policy, **options) }
      assert_equal field, e.field, options.inspect
      assert e.message.start_with?("#{field}: "), e.message
    end
    # Procs take any number of arguments; a lambda with only optional ones
    # takes none.
    assert Slidelimit::Limiter.memory(policy, clock: proc { |_x| 7 }).acquire("t").allowed?
    assert Slidelimit::Limiter.memory(policy, clock: ->(now = 7) { now }).acquire("t").allowed?
  end

  # A clock past core's 2^52 ms (nanoseconds, microseconds) is refused by
  # core naming it before anything is recorded, not read back as a malformed
  # reply. With a caller time the clock only expires keys.
  def test_memory_clock_past_2_52_ms_is_invalid_and_records_nothing
    engine = Slidelimit::MemoryEngine.new
    nanos = -> { Process.clock_gettime(Process::CLOCK_REALTIME, :nanosecond) }
    [nanos, -> { 2**60 }, -> { 2**52 + 1 }].each do |clock|
      l = Slidelimit::Limiter.memory(policy, engine: engine, clock: clock)
      [-> { l.acquire("t") }, -> { l.acquire("t", cost: 2) }, -> { l.peek("t") }].each do |call|
        e = assert_raises(Slidelimit::InvalidArgument) { call.call }
        assert_equal "clock", e.field
        assert_match(/\Aclock: read \d+, past 2\^52 ms/, e.message)
      end
    end
    assert_equal 0, engine.key_count
    assert_equal 2**52, Slidelimit::Limiter.memory(policy, clock: -> { 2**52 }).acquire("t").now_ms
    assert Slidelimit::Limiter.memory(policy, clock: nanos).acquire_at("t", 10).allowed?
  end

  def test_policy_check_cost_is_the_rule_every_check_applies
    p = policy
    assert_equal 3, p.check_cost(3)
    { 0 => "cost: must be at least 1", 4 => "cost: 4 exceeds the limit 3", -1 => "cost: must not be negative",
      1.5 => "cost: must be an Integer" }.each do |cost, says|
      e = assert_raises(Slidelimit::InvalidArgument, cost.inspect) { p.check_cost(cost) }
      assert_equal "cost", e.field
      assert e.message.start_with?(says), e.message
      # The same refusal as a check's.
      assert_equal e.message, assert_raises(Slidelimit::InvalidArgument) { Slidelimit::Limiter.memory(p).acquire("t", cost: cost) }.message
    end
    several = Slidelimit::Policy.new(resource: "geo", limits: [Slidelimit::Limit.new(limit: 5, window_ms: 1000),
                                                               Slidelimit::Limit.new(limit: 2, window_ms: 60_000)])
    e = assert_raises(Slidelimit::InvalidArgument) { several.check_cost(3) }
    assert_includes e.message, "limits[1]"
  end

  def test_timeout_rule_is_cores
    assert_equal 1, Slidelimit.check_timeout_ms(1)
    assert_equal 2**31 - 1, Slidelimit.check_timeout_ms(2**31 - 1)
    [0, 2**31, -1, 1.5].each do |bad|
      e = assert_raises(Slidelimit::InvalidArgument, bad.inspect) { Slidelimit.redis(url: "redis://127.0.0.1:1/", timeout_ms: bad) }
      assert_equal "timeout_ms", e.field
    end
  end

  # redis-rb's own errors for these (ArgumentError, URI::InvalidURIError)
  # name no field, and quote the URL with any password in it.
  def test_redis_urls_are_checked_by_name
    {
      { url: 5 } => "url",
      { url: "http://:hunter2@127.0.0.1:6379" } => "url",
      { url: "redis://:hunter2@127.0.0.1:abc/0" } => "url",
      { url: "nonsense" } => "url",
      { cluster: [nil] } => "cluster",
      { cluster: ["redis://127.0.0.1:1", "unix:///tmp/redis.sock"] } => "cluster",
      { url: "redis://127.0.0.1:1", cluster: ["redis://127.0.0.1:2"] } => "url",
      # redis-rb would ignore it next to the three timeouts set from timeout_ms.
      { url: "redis://127.0.0.1:1", timeout: 5 } => "timeout",
    }.each do |options, field|
      e = assert_raises(Slidelimit::InvalidArgument, options.inspect) { Slidelimit.redis(**options) }
      assert_equal field, e.field, options.inspect
      assert e.message.start_with?("#{field}: "), e.message
      refute_includes e.message, "hunter2"
      assert_nil e.cause, options.inspect
    end
    # Every scheme redis-rb serves still passes (no connection is made yet).
    %w[redis://127.0.0.1:1/0 rediss://127.0.0.1:1 unix:///tmp/redis.sock].each do |url|
      assert_kind_of ::Redis, Slidelimit.redis(url: url)
    end
  end

  def test_key_slot
    l = Slidelimit::Limiter.memory(Slidelimit::Policy.new(resource: "geocode", limit: 1, window_ms: 60_000))
    assert_equal "rl:{geocode:tenant-17}:log:60000", l.key("tenant-17")
    assert_equal 4660, Slidelimit.key_slot(l.key("tenant-17"))
  end

  def test_a_missing_library_is_a_load_error_naming_the_make_target
    require "open3"
    out, status = Open3.capture2e({ "SLIDELIMIT_FFI_LIB" => "/nonexistent/libslidelimit_ffi.so" }, RbConfig.ruby,
                                  "-I", File.expand_path("../lib", __dir__), "-e", 'require "slidelimit"')
    refute status.success?
    assert_includes out, "LoadError"
    assert_includes out, "make driver-ruby"
    assert_includes out, "/nonexistent/libslidelimit_ffi.so"
  end

  # The driver's load op (docs/driver.md) with skew_ms: every call is on the
  # caller's clock, the wall clock plus the skew (an hour behind here, far
  # from the clock a memory store would use); each decision record carries
  # reset_after_ms; a skew beyond an hour is a protocol error.
  def test_driver_load_with_skew_ms_calls_on_the_caller_clock
    require "json"
    require "open3"
    require "tmpdir"
    Dir.mktmpdir do |dir|
      out = File.join(dir, "ruby.jsonl")
      skew = 3_600_000
      before = Process.clock_gettime(Process::CLOCK_REALTIME, :millisecond)
      start = before + 2000 # after the driver has started, even on a busy machine
      load = { "op" => "load", "lang" => "ruby", "tenant" => "t", "concurrency" => 4, "out" => out }
      bad = [3_600_001, -3_600_001, 1.5, "5"].map do |skew_ms|
        load.merge("start_at_ms" => 0, "end_at_ms" => 0, "skew_ms" => skew_ms)
      end
      requests = [{ "op" => "store", "kind" => "memory" },
                  { "op" => "policy", "resource" => "r", "limit" => 5, "window_ms" => 1000 },
                  load.merge("start_at_ms" => start, "end_at_ms" => start + 300, "jitter_ms" => 2, "skew_ms" => -skew),
                  *bad]
      stdout, stderr, status = Open3.capture3(RbConfig.ruby, "-I", File.expand_path("../lib", __dir__),
                                              File.expand_path("../driver/slidelimit-driver.rb", __dir__),
                                              stdin_data: requests.map { |r| JSON.generate(r) }.join("\n") + "\n")
      after = Process.clock_gettime(Process::CLOCK_REALTIME, :millisecond)
      assert status.success?, stderr
      replies = stdout.lines.map { |l| JSON.parse(l) }
      records = File.readlines(out).map { |l| JSON.parse(l) }
      assert_equal({ "ok" => true, "calls" => records.length, "errors" => 0 }, replies[2])
      assert_operator records.length, :>, 5
      caller_clock = (start - skew)..(after - skew)
      records.each do |r|
        assert_includes caller_clock, r["now_ms"]
        assert_kind_of Integer, r["reset_after_ms"]
        # The log records at now + reset_after - W, on the caller clock too.
        assert_includes caller_clock, r["now_ms"] + r["reset_after_ms"] - 1000 if r["allowed"]
      end
      assert_equal 5, records.count { |r| r["allowed"] }
      replies[3..].each do |reply|
        assert_equal "protocol", reply["error"]
        assert_match(/\Aload: skew_ms must be/, reply["message"])
      end
    end
  end

  def test_threads_share_one_budget
    l = Slidelimit::Limiter.memory(policy(limit: 50, window_ms: 60_000))
    t = tenant
    allowed = Array.new(8) { Thread.new { Array.new(20) { l.acquire(t).allowed? }.count(true) } }.sum(&:value)
    assert_equal 50, allowed
  end
end
