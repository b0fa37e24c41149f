# frozen_string_literal: true

require_relative "test_helper"

# Script replies a broken or foreign server could send, through a client that
# answers EVALSHA itself: each is MalformedReply with core's message (or the
# binding's, for RESP types core never sees), never a decision.
class TestReplies < Minitest::Test
  include TestHelper

  class CannedRedis < ::Redis
    attr_accessor :reply

    def initialize(reply)
      super()
      @reply = reply
    end

    def evalsha(_sha, _keys, _argv)
      @reply
    end
  end

  def check(reply)
    # No deny cache: a denial's second check must reach the reply too (the
    # cache would answer it, its retry shorter by any millisecond between).
    l = Slidelimit::Limiter.new(CannedRedis.new(reply), policy(limit: 5), deny_cache: false)
    t = tenant
    # Twice: the first check builds the call, the second reuses it.
    Array.new(2) { l.acquire(t) }
  ensure
    l&.close
  end

  def test_a_consistent_reply_is_a_decision
    assert_equal [decision(true, 2, 0, 1000, 5000)] * 2, check([1, 2, 0, 1000, 5000])
    assert_equal [decision(false, 0, 250, 900, 5000)] * 2, check([0, 0, 250, 900, 5000])
  end

  # Core's own message, from the full form the binding asks after the
  # words form refused the reply.
  def test_replies_core_refuses
    {
      [2, 0, 0, 0, 0] => "script reply has allowed = 2",
      [1, -1, 0, 0, 0] => "script reply has remaining = -1",
      [0, 0, 0, 0, 0] => "script reply denies with retry_after_ms = 0",
      [1, 2, 0, 1000] => "script reply has 4 elements",
      [] => "script reply has 0 elements",
      Array.new(9, 1) => "script reply has 9 elements",
    }.each do |reply, message|
      e = assert_raises(Slidelimit::MalformedReply, reply.inspect) { check(reply) }
      assert e.message.start_with?(message), "#{reply.inspect}: #{e.message}"
    end
  end

  def test_replies_of_other_types
    {
      "OK" => "script reply is String, not an array",
      nil => "script reply is NilClass, not an array",
      [1, "2", 0, 1000, 5000] => "script reply element 1 is String, not an integer",
      [1, 2, 0, 1000, 5.0] => "script reply element 4 is Float, not an integer",
      [1, 2, 0, 1000, 1 << 64] => "script reply has an integer beyond 64 bits",
    }.each do |reply, message|
      e = assert_raises(Slidelimit::MalformedReply, reply.inspect) { check(reply) }
      assert e.message.start_with?(message), "#{reply.inspect}: #{e.message}"
    end
  end
end
