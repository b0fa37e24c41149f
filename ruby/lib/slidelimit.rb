# frozen_string_literal: true

require "uri"
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

  # Core's per-call timeout default, in ms.
  DEFAULT_TIMEOUT_MS = Native.slidelimit_default_timeout_ms

  # A redis-rb client set up the way a limiter wants it: every connect, read
  # and write bounded by timeout_ms (core's rule; past it a check raises
  # Unavailable), and no silent resend of a command after a timeout or a
  # dropped connection (redis-rb's reconnect_attempts), which could record
  # one check twice. url: a redis:// or rediss:// URL; cluster: seed URLs
  # of a Redis Cluster instead. Other options go to Redis.new as they are.
  def self.redis(url: nil, cluster: nil, timeout_ms: DEFAULT_TIMEOUT_MS, **options)
    check_timeout_ms(timeout_ms)
    # redis-rb reads :timeout only where no connect/read/write timeout is
    # set, and this sets all three: it would be ignored.
    if options.key?(:timeout)
      raise Slidelimit.invalid("timeout", "is not taken here; pass timeout_ms (milliseconds) instead, " \
                                          "got #{options[:timeout].inspect}")
    end
    seconds = timeout_ms / 1000.0
    options = { connect_timeout: seconds, read_timeout: seconds, write_timeout: seconds,
                reconnect_attempts: 0 }.merge(options)
    if cluster
      raise Slidelimit.invalid("url", "cannot be given with cluster (give every URL as a seed)") unless url.nil?
      unless cluster.is_a?(Array) && !cluster.empty?
        raise Slidelimit.invalid("cluster", "must be a non-empty Array of seed URLs")
      end

      # redis-rb also takes a seed as a Hash of host and port.
      cluster.each_with_index do |seed, i|
        check_url("cluster", seed, CLUSTER_SCHEMES, "seed #{i}: ") unless seed.is_a?(Hash)
      end
      ::Redis.new(cluster: cluster, **options)
    else
      check_url("url", url, URL_SCHEMES) unless url.nil? # nil: redis-rb's default (REDIS_URL, else localhost)
      ::Redis.new(url: url, **options)
    end
  end

  URL_SCHEMES = %w[redis rediss unix].freeze
  CLUSTER_SCHEMES = %w[redis rediss].freeze
  private_constant :URL_SCHEMES, :CLUSTER_SCHEMES

  # Refuses, naming field, what redis-rb would fail on with its own error (or
  # take for another kind of address). The messages never quote the URL: it
  # may hold a password.
  def self.check_url(field, url, schemes, where = "")
    raise Slidelimit.invalid(field, "#{where}must be a String URL, got #{url.class}") unless url.is_a?(String)

    begin
      parsed = URI.parse(url)
    rescue URI::InvalidURIError
      raise Slidelimit.invalid(field, "#{where}is not a URL (check the host and port)"), cause: nil
    end
    return if schemes.include?(parsed.scheme)

    got = parsed.scheme ? "#{parsed.scheme}://" : "none"
    wanted = schemes.map { |s| "#{s}://" }.join(", ")
    raise Slidelimit.invalid(field, "#{where}the scheme must be one of #{wanted}, got #{got}")
  end
  private_class_method :check_url
end
