# frozen_string_literal: true

require "slidelimit/version"
require "slidelimit/native"
require "slidelimit/errors"
require "slidelimit/core"
require "slidelimit/value"
require "slidelimit/policy"
require "slidelimit/decision"
require "slidelimit/memory_engine"
require "slidelimit/limiter"
require "slidelimit/metrics"

# Distributed sliding-window rate limiting on Redis, over slidelimit-core's
# C ABI: every Ruby worker shares one budget with the Rust, Go, Node and
# Python workers of the same policy. See docs/ruby.md.
module Slidelimit
  # The version of slidelimit-core in the shared library.
  def self.core_version
    Native.slidelimit_version
  end

  # The Redis Cluster slot of any key (Redis's hash-tag rule, by core).
  def self.key_slot(key)
    bytes = Core.utf8("key", key)
    s = Core.scratch
    code = Native.slidelimit_key_slot(bytes, bytes.bytesize, s.slot)
    raise Slidelimit.error_for(code, "key: cannot compute its slot") unless code == Native::RESULT_OK

    s.slot.read(:uint16)
  end

  # Core's rule for a per-call timeout: 1 .. 2^31 - 1 ms, else
  # InvalidArgument naming timeout_ms. Returns timeout_ms.
  def self.check_timeout_ms(timeout_ms)
    Core.uint64("timeout_ms", timeout_ms)
    s = Core.scratch
    code = Native.slidelimit_check_timeout_ms(timeout_ms, s.msg, Native::MSG_CAP, s.msg_len, s.field)
    Core.raise_failure(code, s) unless code == Native::RESULT_OK
    timeout_ms
  end

  DEFAULT_TIMEOUT_MS = 1000

  # A redis-rb client set up the way a limiter wants it: every connect, read
  # and write bounded by timeout_ms (core's rule; past it a check raises
  # Unavailable), and no silent resend of a command after a timeout or a
  # dropped connection (redis-rb's reconnect_attempts), which could record
  # one check twice. url: a redis:// or rediss:// URL; cluster: seed URLs
  # of a Redis Cluster instead. Other options go to Redis.new as they are.
  def self.redis(url: nil, cluster: nil, timeout_ms: DEFAULT_TIMEOUT_MS, **options)
    check_timeout_ms(timeout_ms)
    seconds = timeout_ms / 1000.0
    options = { connect_timeout: seconds, read_timeout: seconds, write_timeout: seconds,
                reconnect_attempts: 0 }.merge(options)
    if cluster
      unless cluster.is_a?(Array) && !cluster.empty?
        raise Slidelimit.invalid("cluster", "must be a non-empty Array of seed URLs")
      end

      ::Redis.new(cluster: cluster, **options)
    else
      ::Redis.new(url: url, **options)
    end
  end
end
