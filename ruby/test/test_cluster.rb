# frozen_string_literal: true

require_relative "test_helper"
require "socket"
require "connection_pool"

# The gem on a six-node Redis Cluster (scripts/with-cluster.sh) through
# redis-rb's own Cluster client, Redis.new(cluster: [...]).
class TestCluster < Minitest::Test
  include TestHelper

  def setup
    @redis = Slidelimit.redis(cluster: cluster_urls, timeout_ms: 2000)
  end

  def teardown
    @redis&.close
  end

  def test_tenants_on_every_master_share_one_budget_per_tenant
    p = policy(limit: 3, window_ms: 60_000)
    a = Slidelimit::Limiter.new(@redis, p)
    b = Slidelimit::Limiter.new(Slidelimit.redis(cluster: cluster_urls), p)
    # Enough tenants to land on all three masters.
    tenants = Array.new(24) { tenant }
    slots = tenants.map { |t| Slidelimit.key_slot(a.key(t)) }
    assert slots.uniq.size > 3
    tenants.each do |t|
      assert_equal [true, true, true, false, false],
                   [a.acquire(t), b.acquire(t), a.acquire(t), b.acquire(t), a.acquire(t)].map(&:allowed?)
      assert_equal 3, @redis.llen(a.key(t))
    end
  end

  # A forked child's first call on each node's inherited connection is a
  # decision, not Unavailable (redis-rb refuses it unsent; one resend).
  def test_a_forked_child_uses_the_inherited_cluster_client
    l = Slidelimit::Limiter.new(@redis, policy(limit: 3, window_ms: 60_000))
    tenants = Array.new(12) { tenant }
    tenants.each { |t| assert l.acquire(t).allowed? } # a connection to every master
    assert tenants.map { |t| Slidelimit.key_slot(l.key(t)) }.uniq.size > 3
    answers = in_forked_child do
      tenants.map do |t|
        l.acquire(t).remaining
      rescue StandardError => e
        "#{e.class}: #{e.message}"
      end.join(",")
    end
    assert_equal Array.new(12, "1").join(","), answers
    tenants.each { |t| assert_equal 2, @redis.llen(l.key(t)) }
  end

  # Every master has its own script cache: after SCRIPT FLUSH on all of them
  # each first check falls back to EVAL on the node that owns its key.
  def test_noscript_on_every_node
    p = policy(limit: 5, window_ms: 60_000)
    l = Slidelimit::Limiter.new(@redis, p)
    tenants = Array.new(12) { tenant }
    tenants.each { |t| l.acquire(t) }
    cluster_urls.each do |url|
      node = Redis.new(url: url)
      node.script(:flush)
      node.close
    end
    tenants.each { |t| assert_equal 3, l.acquire(t).remaining }
    tenants.each { |t| assert_equal 2, l.acquire(t).remaining }
  end

  def test_reset_and_peek_on_the_cluster
    l = Slidelimit::Limiter.new(@redis, policy(limit: 1))
    t = tenant
    assert l.acquire(t).allowed?
    refute l.peek(t).allowed?
    assert l.reset(t)
    assert l.peek(t).allowed?
  end

  def test_unreachable_cluster_is_unavailable
    s = TCPServer.new("127.0.0.1", 0)
    port = s.addr[1]
    s.close
    e = assert_raises(Slidelimit::Unavailable) do
      Slidelimit::Limiter.new(ConnectionPool.new(size: 1) { Slidelimit.redis(cluster: ["redis://127.0.0.1:#{port}"]) },
                              policy).acquire("t")
    end
    assert_equal :unavailable, e.code
  end
end
