# frozen_string_literal: true

require_relative "test_helper"
require "prometheus/client"
require "socket"
require "tmpdir"
require "uri"

# The local deny cache (core's) of Limiter#acquire on a real redis-server.
# Redis calls are counted from INFO commandstats, so "no Redis call" is what
# the server saw: the script runs, by EVALSHA (less those refused, which
# are the NOSCRIPTs of a script's first use) or by the EVAL after them.
class TestDenyCache < Minitest::Test
  include TestHelper

  def setup
    @redis = Slidelimit.redis(url: redis_url, timeout_ms: 2000)
  end

  def teardown
    @redis&.close
  end

  def script_calls
    stats = @redis.info("commandstats")
    evalsha = stats.fetch("evalsha", {})
    evalsha.fetch("calls", "0").to_i - evalsha.fetch("failed_calls", "0").to_i +
      stats.fetch("eval", {}).fetch("calls", "0").to_i
  end

  # How many script calls reached Redis while the block ran.
  def redis_calls
    before = script_calls
    yield
    script_calls - before
  end

  def limiter(deny_cache: true, metrics: nil, **policy_overrides)
    Slidelimit::Limiter.new(@redis, policy(**{ window_ms: 60_000 }.merge(policy_overrides)), deny_cache: deny_cache,
                                                                                            metrics: metrics)
  end

  def test_on_by_default_and_off_on_request
    assert Slidelimit::Limiter.new(@redis, policy).deny_cache?
    refute Slidelimit::Limiter.new(@redis, policy, deny_cache: false).deny_cache?
    refute Slidelimit::Limiter.new(@redis, policy, deny_cache: nil).deny_cache? # documented: off too
    assert Slidelimit::Limiter.new(@redis, policy, deny_cache: 5).deny_cache?
    refute Slidelimit::Limiter.memory(policy).deny_cache?
  end

  def test_capacity_errors_name_the_field
    { 0 => "deny_cache_capacity", 2**24 + 1 => "deny_cache_capacity", -1 => "deny_cache_capacity",
      "yes" => "deny_cache", 1.5 => "deny_cache" }.each do |option, field|
      e = assert_raises(Slidelimit::InvalidArgument, option.inspect) do
        Slidelimit::Limiter.new(@redis, policy, deny_cache: option)
      end
      assert_equal field, e.field, "#{option.inspect}: #{e.message}"
    end
    # Core's own words for 0, through the C ABI.
    e = assert_raises(Slidelimit::InvalidArgument) { Slidelimit::Limiter.new(@redis, policy, deny_cache: 0) }
    assert_equal "deny_cache_capacity: must be at least 1 (switch the cache off instead)", e.message
    assert Slidelimit::Limiter.new(@redis, policy, deny_cache: 2**24).deny_cache?
  end

  # A denial, then an acquire of the same cost within its retry: answered
  # here, with the retry less the time since Redis was asked.
  def test_a_repeated_denial_makes_no_redis_call
    l = limiter(limit: 1)
    t = tenant
    assert l.acquire(t).allowed?
    first = nil
    assert_equal 1, redis_calls { first = l.acquire(t) }
    refute first.allowed?
    assert first.retry_after_ms.between?(59_000, 60_000), first.inspect
    sleep 0.05
    local = nil
    assert_equal 0, redis_calls { local = l.acquire(t) }
    refute local.allowed?
    assert_equal 0, local.remaining
    assert_operator local.retry_after_ms, :<=, first.retry_after_ms - 50
    assert_operator local.retry_after_ms, :>, 0
    assert_equal 0, redis_calls { 5.times { refute l.acquire(t.dup).allowed? } }
    # Another tenant is its own entry.
    assert_equal 1, redis_calls { assert l.acquire(tenant).allowed? }
  end

  def test_a_lower_cost_asks_redis
    l = limiter(limit: 3)
    t = tenant
    assert l.acquire(t, cost: 2).allowed?
    assert_equal 1, redis_calls { refute l.acquire(t, cost: 2).allowed? }
    assert_equal 0, redis_calls { refute l.acquire(t, cost: 2).allowed? }
    assert_equal 0, redis_calls { refute l.acquire(t, cost: 3).allowed? }
    d = nil
    assert_equal 1, redis_calls { d = l.acquire(t, cost: 1) }
    assert d.allowed?, "1 of 3 was left"
    # An admission drops the entry: cost 2 asks Redis again.
    assert_equal 1, redis_calls { refute l.acquire(t, cost: 2).allowed? }
    # Core still checks the cost before the cache answers.
    assert_equal "cost", assert_raises(Slidelimit::InvalidArgument) { l.acquire(t, cost: 4) }.field
  end

  def test_own_reset_clears_the_entry_but_another_processes_does_not
    l = limiter(limit: 1)
    t = tenant
    assert l.acquire(t).allowed?
    refute l.acquire(t).allowed?
    # A reset elsewhere (here: the keys deleted behind the limiter's back)
    # is not seen: still denied, without asking Redis.
    @redis.del(*l.keys(t))
    assert_equal 0, redis_calls { refute l.acquire(t).allowed? }
    # This limiter's own reset forgets the entry.
    refute l.reset(t)
    assert_equal 1, redis_calls { assert l.acquire(t).allowed? }
  end

  def test_a_reset_through_another_limiter_clears_it_too
    p = policy(limit: 1, window_ms: 60_000)
    cached = Slidelimit::Limiter.new(@redis, p)
    resetter = Slidelimit::Limiter.new(@redis, p, deny_cache: false) # its own cache off
    t = tenant
    assert cached.acquire(t).allowed?
    refute cached.acquire(t).allowed?
    assert_equal 0, redis_calls { refute cached.acquire(t).allowed? }
    assert resetter.reset(t)
    assert_equal 1, redis_calls { assert cached.acquire(t).allowed? }
  end

  # Forwards to the test server; replies wait while @hold is set, until
  # release: Redis has answered, the client has not read it yet.
  class ReplyHoldingProxy
    attr_reader :port

    def initialize(upstream_url)
      uri = URI(upstream_url)
      @server = TCPServer.new("127.0.0.1", 0)
      @port = @server.addr[1]
      @lock = Mutex.new
      @hold = false
      @held = []
      @sockets = []
      @acceptor = Thread.new do
        loop do
          client = @server.accept
          upstream = TCPSocket.new(uri.host, uri.port)
          @lock.synchronize { @sockets.push(client, upstream) }
          pipe(client, upstream, holding: false)
          pipe(upstream, client, holding: true)
        end
      rescue IOError, SystemCallError
        nil
      end
    end

    def hold! = @lock.synchronize { @hold = true }

    def release
      @lock.synchronize do
        @hold = false
        @held.each { |socket, chunk| socket.write(chunk) }
        @held.clear
      end
    end

    def close
      @server.close
      @lock.synchronize { @sockets.each(&:close) }
      @acceptor.join
    end

    private

    def pipe(from, to, holding:)
      Thread.new do
        loop do
          chunk = from.readpartial(16_384)
          @lock.synchronize { holding && @hold ? @held << [to, chunk] : to.write(chunk) }
        end
      rescue IOError, SystemCallError
        nil
      end
    end
  end

  def test_a_denial_a_reset_overtook_is_not_cached
    p = policy(limit: 1, window_ms: 60_000)
    proxy = ReplyHoldingProxy.new(redis_url)
    slow = Slidelimit.redis(url: "redis://127.0.0.1:#{proxy.port}", timeout_ms: 10_000)
    cached = Slidelimit::Limiter.new(slow, p)
    t = tenant
    assert cached.acquire(t).allowed?
    calls = script_calls
    proxy.hold!
    late = Thread.new { cached.acquire(t) }
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    while script_calls == calls # Redis has run it (and denied)
      flunk "the acquire never reached Redis" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      sleep 0.005
    end
    assert Slidelimit::Limiter.new(@redis, p, deny_cache: false).reset(t)
    proxy.release
    refute late.value.allowed?, "Redis ran it before the DEL"
    assert_equal 1, redis_calls { assert cached.acquire(t).allowed?, "the stale denial was cached" }
  ensure
    slow&.close
    proxy&.close
  end

  def test_a_close_while_redis_decides_still_returns_the_decision
    l = limiter
    tenant = "closing-#{rand(1 << 30)}"
    # Another thread's close, landing after Redis counted the permit and
    # before the cache is told: the caller must get the decision it paid for.
    l.define_singleton_method(:run_call) do |mode, call|
      decision = super(mode, call)
      close
      decision
    end
    d = l.acquire(tenant)
    assert d.allowed?
    assert l.closed?
  end

  def test_off_asks_redis_every_time
    l = limiter(limit: 1, deny_cache: false)
    t = tenant
    assert l.acquire(t).allowed?
    assert_equal 3, redis_calls { 3.times { refute l.acquire(t).allowed? } }
  end

  def test_an_expired_entry_asks_redis
    l = limiter(limit: 1, window_ms: 100)
    t = tenant
    assert l.acquire(t).allowed?
    d = l.acquire(t)
    refute d.allowed?
    sleep((d.retry_after_ms + 20) / 1000.0)
    assert_equal 1, redis_calls { assert l.acquire(t).allowed? }
  end

  def test_caller_time_and_peeks_never_use_it
    l = limiter(limit: 1)
    t = tenant
    assert l.acquire(t).allowed?
    refute l.acquire(t).allowed? # cached now
    now = @redis.time.then { |s, us| (s * 1000) + (us / 1000) }
    assert_equal 1, redis_calls { refute l.acquire_at(t, now).allowed? }
    assert_equal 1, redis_calls { refute l.peek(t).allowed? }
    assert_equal 1, redis_calls { refute l.peek(t, now_ms: now).allowed? }
    # And a denial at the caller's time fills nothing.
    u = tenant
    assert l.acquire_at(u, now).allowed?
    refute l.acquire_at(u, now).allowed?
    assert_equal 1, redis_calls { refute l.acquire(u).allowed? }
  end

  def test_several_limits_keep_denied_by
    pol = Slidelimit::Policy.new(resource: "res-#{SecureRandom.hex(4)}", limits: [
                                   Slidelimit::Limit.new(limit: 5, window_ms: 1000),
                                   Slidelimit::Limit.new(limit: 1, window_ms: 60_000),
                                 ])
    l = Slidelimit::Limiter.new(@redis, pol)
    t = tenant
    assert l.acquire(t).allowed?
    first = l.acquire(t)
    assert_equal 1, first.denied_by
    local = nil
    assert_equal 0, redis_calls { local = l.acquire(t) }
    assert_equal 1, local.denied_by
    l.reset(t)
    assert_equal 1, redis_calls { assert l.acquire(t).allowed? }
  end

  def test_local_denials_are_counted
    dir = Dir.mktmpdir("slidelimit-metrics")
    Prometheus::Client.configuration.multiprocess_files_dir = dir
    m = Slidelimit::Metrics.new(tenant_label: true)
    assert_equal :ratelimit_local_denied_total, m.local_denied.name
    assert_equal Slidelimit::Metrics.help_of(Slidelimit::Native::METRIC_LOCAL_DENIED_TOTAL), m.local_denied.docstring
    l = limiter(limit: 1, metrics: m, resource: "geocode-#{SecureRandom.hex(3)}")
    res = l.policy.resource
    t = tenant
    assert l.acquire(t).allowed?
    refute l.acquire(t).allowed? # Redis's denial
    2.times { refute l.acquire(t).allowed? } # the cache's
    now = @redis.time.then { |sec, us| (sec * 1000) + (us / 1000) }
    refute l.acquire_at(t, now).allowed? # caller time: Redis's, never local
    assert_equal 1, m.allowed.get(resource: res, tenant: t)
    # Every denial counts as one (Redis's 2, the cache's 2); local ones also
    # in their own counter.
    assert_equal 4, m.denied.get(resource: res, tenant: t)
    assert_equal 2, m.local_denied.get(resource: res, tenant: t)
    text = m.text
    assert_includes text, "# TYPE ratelimit_local_denied_total counter\n"
    assert_includes text, %(ratelimit_local_denied_total{resource="#{res}",tenant="#{t}"} 2\n)
    assert_includes text, %(ratelimit_wait_seconds_count{resource="#{res}"} 4\n)
  ensure
    FileUtils.rm_rf(dir) if dir
  end
end
