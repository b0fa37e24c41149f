# frozen_string_literal: true

require_relative "test_helper"

# The C handles: freed by #close or by finalizers, never twice, never while
# a call uses them; and part of the API under GC.stress (a collection at
# every allocation), on the memory engine and on Redis.
class TestMemorySafety < Minitest::Test
  include TestHelper

  def live
    Slidelimit::Core::Handle.live
  end

  def test_finalizers_free_dropped_limiters
    GC.start
    before = live
    make = lambda do
      200.times do |i|
        l = Slidelimit::Limiter.memory(policy(limit: 2))
        l.acquire_at("t-#{i}", 1)
      end
    end
    make.call
    # Each limiter holds a policy and an engine: 400 handles were made.
    assert live >= before, "live #{live} before #{before}"
    freed = false
    20.times do
      GC.start(full_mark: true, immediate_sweep: true)
      if live <= before + 10 # a few may still be referenced from this frame
        freed = true
        break
      end
      sleep 0.01
    end
    assert freed, "finalizers left #{live - before} of 400 handles alive"
  end

  def test_close_frees_at_once_and_the_finalizer_then_does_nothing
    GC.start
    GC.disable # no other finalizer may change the count meanwhile
    before = live
    l = Slidelimit::Limiter.memory(policy)
    handle = l.instance_variable_get(:@policy_handle)
    assert_equal before + 2, live
    l.close
    assert_equal before, live
    assert handle.closed?
    # The finalizer of a closed handle finds its box empty: no second free.
    box = handle.instance_variable_get(:@box)
    assert_equal [nil], box
    Slidelimit::Core::Handle.finalizer(box, :slidelimit_policy_free).call
    assert_equal before, live
  ensure
    GC.enable
  end

  def test_close_while_other_threads_check
    50.times do
      l = Slidelimit::Limiter.memory(policy(limit: 1000, window_ms: 60_000))
      threads = Array.new(4) do
        Thread.new do
          outcomes = []
          200.times do
            outcomes << l.acquire("t").allowed?
          rescue Slidelimit::InvalidArgument => e
            outcomes << e.field
          end
          outcomes
        end
      end
      sleep 0.0005
      l.close
      threads.flat_map(&:value).each { |o| assert_includes [true, "limiter"], o }
    end
  end

  def with_gc_stress
    GC.stress = true
    yield
  ensure
    GC.stress = false
  end

  def test_memory_engine_under_gc_stress
    with_gc_stress do
      # A long window: the key's expiry runs on the engine's real clock (as
      # Redis's does), and a collection at every allocation is slow.
      l = Slidelimit::Limiter.memory(policy(limit: 2, window_ms: 60_000))
      assert_equal [true, true, false], Array.new(3) { l.acquire_at("tenant-é", 10).allowed? }
      assert_equal "tenant", assert_raises(Slidelimit::InvalidArgument) { l.acquire("\xff".b) }.field
      assert_equal "cost", assert_raises(Slidelimit::InvalidArgument) { l.acquire("t", cost: 2.0) }.field
      assert l.key("x").start_with?("rl:{")
      assert l.reset("tenant-é")
      Slidelimit::Limiter.memory(policy) # dropped, left to its finalizer
      l.close
    end
  end

  def test_redis_under_gc_stress
    redis = Slidelimit.redis(url: redis_url)
    l = Slidelimit::Limiter.new(redis, policy(limit: 2, window_ms: 60_000))
    t = tenant
    with_gc_stress do
      assert_equal [true, true, false], Array.new(3) { l.acquire(t).allowed? }
      assert_equal 0, l.peek(t).remaining
      redis.script(:flush)
      refute l.acquire(t).allowed? # NOSCRIPT, then EVAL
      assert_raises(Slidelimit::InvalidArgument) { l.acquire(t, cost: -1) }
      assert l.reset(t)
    end
  ensure
    redis&.close
  end
end
