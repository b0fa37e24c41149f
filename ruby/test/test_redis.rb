# frozen_string_literal: true

require_relative "test_helper"
require "socket"
require "connection_pool"

# The gem on a real redis-server (scripts/with-redis.sh).
class TestRedis < Minitest::Test
  include TestHelper

  def setup
    @redis = Slidelimit.redis(url: redis_url, timeout_ms: 2000)
  end

  def teardown
    @redis&.close
  end

  def limiter(**policy_overrides)
    Slidelimit::Limiter.new(@redis, policy(**policy_overrides))
  end

  def test_acquire_on_server_time
    l = limiter(limit: 2, window_ms: 60_000)
    t = tenant
    before = Process.clock_gettime(Process::CLOCK_REALTIME, :millisecond)
    d1 = l.acquire(t)
    d2 = l.acquire(t)
    d3 = l.acquire(t)
    after = Process.clock_gettime(Process::CLOCK_REALTIME, :millisecond)
    assert d1.allowed?
    assert_equal 1, d1.remaining
    assert_equal 0, d2.remaining
    refute d3.allowed?
    assert d3.retry_after_ms.between?(1, 60_000)
    # Redis TIME decided (same host, so within the test's own clock bounds).
    assert d1.now_ms.between?(before - 1000, after + 1000), d1.inspect
    assert_equal 2, @redis.llen(l.key(t))
    assert @redis.pttl(l.key(t)).positive?
  end

  # The hot path reuses the call core built for a tenant: closing still
  # stops it, and other tenants and costs still get core's own checks.
  def test_reused_calls_stop_at_close_and_still_validate
    l = limiter(limit: 2)
    t = tenant
    assert l.acquire(t).allowed?
    assert l.acquire(t.dup).allowed? # an equal String, so the same call
    refute l.acquire(t).allowed?
    assert_equal "cost", assert_raises(Slidelimit::InvalidArgument) { l.acquire(t, cost: 3) }.field
    assert_equal "tenant", assert_raises(Slidelimit::InvalidArgument) { l.acquire("") }.field
    l.close
    assert_equal "limiter", assert_raises(Slidelimit::InvalidArgument) { l.acquire(t) }.field
    assert_equal "limiter", assert_raises(Slidelimit::InvalidArgument) { l.peek(t) }.field
  end

  # #acquire looks the caller's String up before converting it: a String in
  # another encoding with the same bytes is another tenant, and the same
  # text in UTF-16 is the same tenant.
  def test_reused_calls_follow_the_text_not_the_bytes
    l = limiter(limit: 1, window_ms: 60_000)
    t = tenant
    utf8 = "#{t}-é"
    latin1 = "#{t}-Ã©".encode(Encoding::ISO_8859_1)
    assert_equal utf8.bytes, latin1.bytes
    assert l.acquire(utf8).allowed?
    refute l.acquire(utf8).allowed?
    assert l.acquire(latin1).allowed?, "the Latin-1 tenant is #{latin1.encode(Encoding::UTF_8)}, not #{utf8}"
    refute l.acquire(latin1).allowed?
    refute l.acquire(utf8.encode(Encoding::UTF_16LE)).allowed?
    assert_equal l.key("#{t}-Ã©"), l.key(latin1)
  end

  # A String subclass may redefine #hash and #eql?; the reused calls never
  # ask it, and it shares the budget of the plain String.
  class OddTenant < String
    def hash
      raise "hash called"
    end

    def eql?(_other)
      raise "eql? called"
    end
  end

  def test_string_subclass_tenant_is_not_hashed
    l = limiter(limit: 2, window_ms: 60_000)
    t = tenant
    assert l.acquire(t).allowed?
    assert l.acquire(OddTenant.new(t)).allowed?
    refute l.acquire(OddTenant.new(t)).allowed?
    refute l.acquire(t).allowed?
    refute l.peek(OddTenant.new(t)).allowed?
  end

  # Metrics see every acquire, the reused-call ones included, and no peek.
  def test_metrics_observe_every_acquire
    seen = []
    metrics = Object.new
    metrics.define_singleton_method(:observe) { |resource, tenant, decision| seen << [resource, tenant, decision] }
    l = Slidelimit::Limiter.new(@redis, policy(limit: 2, window_ms: 60_000), metrics: metrics)
    t = tenant
    decisions = Array.new(3) { l.acquire(t) }
    l.peek(t)
    assert_equal [[l.policy.resource, t, decisions[0]], [l.policy.resource, t, decisions[1]],
                  [l.policy.resource, t, decisions[2]]], seen
    assert_equal [true, true, false], seen.map { |_, _, d| d.allowed? }
  end

  def test_acquire_at_peek_reset
    l = limiter(limit: 1, window_ms: 1000)
    t = tenant
    assert_equal decision(true, 0, 0, 1000, 5000), l.acquire_at(t, 5000)
    assert_equal decision(false, 0, 500, 500, 5500), l.peek(t, now_ms: 5500)
    assert_equal decision(false, 0, 500, 500, 5500), l.acquire_at(t, 5500)
    assert_equal ["5000"], @redis.lrange(l.key(t), 0, -1)
    assert l.reset(t)
    assert_equal 0, @redis.exists(l.key(t))
    refute l.reset(t)
  end

  # After SCRIPT FLUSH the first check gets NOSCRIPT and sends EVAL once;
  # the next one finds the script cached again.
  def test_noscript_falls_back_to_one_eval
    l = limiter(limit: 5)
    t = tenant
    l.acquire(t)
    @redis.script(:flush)
    @redis.config(:resetstat)
    assert_equal 3, l.acquire(t).remaining
    assert_equal 2, l.acquire(t).remaining
    stats = @redis.info(:commandstats)
    assert_equal 1, stats.fetch("eval")["calls"].to_i, stats.inspect
    evalsha = stats.fetch("evalsha")
    # Two EVALSHA: the one that failed with NOSCRIPT and the cached one.
    assert_equal 2, evalsha["calls"].to_i, stats.inspect
    assert_equal 1, evalsha["failed_calls"].to_i, stats.inspect
    assert_equal 3, @redis.llen(l.key(t))
  end

  def test_wrong_type_names_the_key
    l = limiter
    t = tenant
    @redis.set(l.key(t), "not a list")
    e = assert_raises(Slidelimit::WrongType) { l.acquire(t) }
    assert_equal :wrong_type, e.code
    assert_includes e.message, l.key(t)
    assert_kind_of Redis::CommandError, e.redis_error
    assert_raises(Slidelimit::WrongType) { l.peek(t) }
  ensure
    @redis.del(l.key(t)) # another program's key, without a TTL
  end

  # Error replies go through core's table: a script's own argument check
  # becomes InvalidArgument on core's field, a NOSCRIPT after the EVAL retry
  # is final, a transient state is Unavailable.
  def test_error_replies_map_by_cores_table
    l = limiter
    key = l.key("t")
    map = ->(text, after_retry) { l.send(:map_script_error, Redis::CommandError.new(text), key, after_retry) }
    retry_eval, error = map.call("ERR slidelimit invalid_argument cost: must be at least 1", false)
    refute retry_eval
    assert_kind_of Slidelimit::InvalidArgument, error
    assert_equal "cost", error.field
    assert_equal [true, nil], map.call("NOSCRIPT No matching script. Please use EVAL.", false)
    assert_kind_of Slidelimit::ScriptError, map.call("NOSCRIPT No matching script. Please use EVAL.", true)[1]
    assert_kind_of Slidelimit::Unavailable, map.call("BUSY Redis is busy running a script.", false)[1]
    assert_kind_of Slidelimit::PermissionDenied, map.call("NOPERM this user has no permissions", false)[1]
    assert_kind_of Slidelimit::PermissionDenied, map.call("WRONGPASS invalid username-password pair", false)[1]
    # The field is core's decision, not a reading of the message: a name core
    # does not know is no field.
    unknown = map.call("ERR slidelimit invalid_argument speed: too fast", false)[1]
    assert_kind_of Slidelimit::InvalidArgument, unknown
    assert_nil unknown.field
    command = l.send(:command_error, Redis::CommandError.new("ERR slidelimit invalid_argument tenant: bad"))
    assert_equal ["tenant", nil], [command.field, map.call("NOPERM x", false)[1].field]
  end

  def test_bad_input_writes_no_key
    l = limiter(limit: 5)
    @redis.flushdb
    [
      -> { l.acquire(:sym) },
      -> { l.acquire("\xff".b) },
      -> { l.acquire("t", cost: 1.5) },
      -> { l.acquire("t", cost: -1) },
      -> { l.acquire("t", cost: 2**70) },
      -> { l.acquire_at("t", 2.0) },
      -> { l.acquire_at("t", 2**53) },
      -> { l.acquire("t", cost: 6) },
    ].each do |call|
      assert_raises(Slidelimit::InvalidArgument) { call.call }
    end
    assert_equal 0, @redis.dbsize
  end

  def test_refused_connection_is_unavailable
    port = free_port
    r = Slidelimit.redis(url: "redis://127.0.0.1:#{port}/", timeout_ms: 500)
    l = Slidelimit::Limiter.new(r, policy)
    e = assert_raises(Slidelimit::Unavailable) { l.acquire("t") }
    assert_equal :unavailable, e.code
    assert_kind_of Redis::BaseConnectionError, e.redis_error
    assert_raises(Slidelimit::Unavailable) { l.reset("t") }
  end

  # A server that accepts and never answers: the check ends within the
  # client's timeout as Unavailable, never a decision.
  def test_silent_server_times_out_as_unavailable
    server = TCPServer.new("127.0.0.1", 0)
    held = []
    acceptor = Thread.new { loop { held << server.accept } }
    r = Slidelimit.redis(url: "redis://127.0.0.1:#{server.addr[1]}/", timeout_ms: 300)
    l = Slidelimit::Limiter.new(r, policy)
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    e = assert_raises(Slidelimit::Unavailable) { l.acquire("t") }
    elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    assert_kind_of Redis::TimeoutError, e.redis_error
    assert elapsed < 2.0, "took #{elapsed} s"
    assert_includes e.message, "timeout"
  ensure
    acceptor&.kill
    held&.each(&:close)
    server&.close
  end

  # What redis-rb raises that is no error reply is Unavailable: its Cluster
  # client's ReloadNeeded during a failover (seen in the audit) included.
  def test_client_exceptions_are_unavailable
    [Redis::Cluster::Node::ReloadNeeded.new, Redis::ConnectionError.new("reset"), Errno::ECONNRESET.new,
     IOError.new("closed stream")].each do |raised|
      client = Redis.new(url: redis_url)
      client.define_singleton_method(:evalsha) { |*| raise raised }
      e = assert_raises(Slidelimit::Unavailable, raised.class.name) do
        Slidelimit::Limiter.new(client, policy).acquire("t")
      end
      assert_same raised, e.redis_error
    end
  end

  def test_connection_pool_and_threads_share_one_budget
    pool = ConnectionPool.new(size: 4) { Slidelimit.redis(url: redis_url) }
    l = Slidelimit::Limiter.new(pool, policy(limit: 40, window_ms: 60_000))
    t = tenant
    allowed = Array.new(8) { Thread.new { Array.new(10) { l.acquire(t).allowed? }.count(true) } }.sum(&:value)
    assert_equal 40, allowed
    assert_equal 40, @redis.llen(l.key(t))
  ensure
    pool&.shutdown(&:close)
  end

  # A worker that forks (Sidekiq swarm, Puma, Resque) hands its limiter's
  # connected client or pool to the child; the child's first call is a
  # decision, not Unavailable, and counts once in the shared budget.
  def test_a_forked_child_uses_an_inherited_connection
    pool = ConnectionPool.new(size: 2) { Slidelimit.redis(url: redis_url, timeout_ms: 2000) }
    { "client" => @redis, "pool" => pool }.each do |name, redis|
      l = Slidelimit::Limiter.new(redis, policy(limit: 5))
      t = tenant
      assert l.acquire(t).allowed?, name
      answers = in_forked_child do
        2.times.map do
          l.acquire(t).remaining
        rescue StandardError => e
          "#{e.class}: #{e.message}"
        end.join(",")
      end
      assert_equal "3,2", answers, name
      assert_equal 1, l.peek(t).remaining, name # three taken, and the peek's own 1
    end
  ensure
    pool&.shutdown(&:close)
  end

  def test_a_pool_of_something_else_is_refused_at_use
    pool = ConnectionPool.new(size: 1) { Object.new }
    l = Slidelimit::Limiter.new(pool, policy)
    e = assert_raises(Slidelimit::InvalidArgument) { l.acquire("t") }
    assert_equal "redis", e.field
  end

  def test_counter_algorithm_on_redis
    l = limiter(algorithm: :sliding_counter, limit: 2, window_ms: 1000)
    t = tenant
    assert l.acquire_at(t, 1000).allowed?
    assert l.acquire_at(t, 1001).allowed?
    d = l.acquire_at(t, 1002)
    refute d.allowed?
    assert_equal "hash", @redis.type(l.key(t))
  end

  def test_same_decisions_as_the_memory_engine
    # The run spans less than a window, so no key can expire on Redis's
    # real clock between two steps (replays must not depend on expiry).
    p = policy(limit: 4, window_ms: 100_000)
    redis = Slidelimit::Limiter.new(@redis, p)
    memory = Slidelimit::Limiter.memory(p, clock: -> { 0 })
    rng = Random.new(7)
    tenants = [tenant, tenant]
    now = 1_000
    200.times do
      now += rng.rand(0..400)
      t = tenants.sample(random: rng)
      cost = rng.rand(1..3)
      if rng.rand < 0.2
        assert_equal memory.peek(t, cost: cost, now_ms: now), redis.peek(t, cost: cost, now_ms: now)
      else
        assert_equal memory.acquire_at(t, now, cost: cost), redis.acquire_at(t, now, cost: cost)
      end
    end
  end

  private

  def free_port
    s = TCPServer.new("127.0.0.1", 0)
    port = s.addr[1]
    s.close
    port
  end
end
