# frozen_string_literal: true

module Slidelimit
  # One rate limit: at most `limit` permits per rolling `window_ms` for each
  # tenant, under keys `<namespace>:{<resource>:<tenant>}:<tag>:<window_ms>`
  # (and `:<buckets>` for the bucketed window). Validated by core when made (a
  # bad field is InvalidArgument naming it); frozen. The namespace and
  # algorithm default to core's ("rl", :sliding_log). The algorithm is
  # :sliding_log, :sliding_counter or :bucketed_window; `buckets` is the
  # bucketed window's count (nil: core's default, 60), which any other
  # algorithm refuses. Any count given reaches core, so `buckets: 0` is
  # InvalidArgument on buckets.
  #
  #   Slidelimit::Policy.new(resource: "geocode", limit: 600, window_ms: 60_000)
  #   Slidelimit::Policy.new(resource: "geocode", algorithm: :bucketed_window, limit: 100_000,
  #                          window_ms: 60_000, buckets: 60)
  class Policy
    include Value

    # `buckets` is the count core uses: the one given, core's default (60)
    # for nil on the bucketed window, nil for the algorithms without buckets.
    attr_reader :namespace, :resource, :algorithm, :limit, :window_ms, :buckets

    def self.default_namespace
      Native.slidelimit_default_namespace
    end

    def self.default_algorithm
      Native.slidelimit_default_algorithm.to_sym
    end

    def initialize(resource:, limit:, window_ms:, namespace: Policy.default_namespace,
                   algorithm: Policy.default_algorithm, buckets: nil)
      @namespace = Core.utf8("namespace", namespace).dup.freeze
      @resource = Core.utf8("resource", resource).dup.freeze
      @algorithm = Policy.parse_algorithm(algorithm)
      @limit = Core.uint64("limit", limit)
      @window_ms = Core.uint64("window_ms", window_ms)
      @buckets = buckets.nil? ? nil : Core.uint64("buckets", buckets)
      # Core validates the whole policy now, so that a bad one fails here
      # and not at the first check; each Limiter keeps its own C copy.
      native = Policy.native_policy(self)
      begin
        @buckets = Policy.native_buckets(native)
      ensure
        Native.slidelimit_policy_free(native)
      end
      freeze
    end

    def to_h
      { namespace: namespace, resource: resource, algorithm: algorithm, limit: limit, window_ms: window_ms,
        buckets: buckets }
    end

    # The slidelimit_algorithm value of a name (Symbol or String), by core.
    def self.algorithm_value(algorithm)
      name = algorithm.to_s
      s = Core.scratch
      out = FFI::MemoryPointer.new(:uint32)
      code = Native.slidelimit_algorithm_parse(name, name.bytesize, out, s.msg, Native::MSG_CAP, s.msg_len,
                                               s.field)
      Core.raise_failure(code, s) unless code == Native::RESULT_OK
      out.read(:uint32)
    end

    def self.parse_algorithm(algorithm)
      unless algorithm.is_a?(Symbol) || algorithm.is_a?(String)
        raise Slidelimit.invalid("algorithm", "must be a Symbol or String, got #{algorithm.class} (#{algorithm.inspect})")
      end

      algorithm_value(Core.utf8("algorithm", algorithm.to_s))
      algorithm.to_sym
    end

    # A new C policy (the caller owns it), or core's error.
    def self.native_policy(policy)
      s = Core.scratch
      alg = algorithm_value(policy.algorithm)
      ns = policy.namespace
      res = policy.resource
      # NULL is "not given" (core's default for the bucketed window); any
      # count, 0 included, goes to core, which decides whether it is valid.
      buckets = nil
      unless policy.buckets.nil?
        buckets = FFI::MemoryPointer.new(:uint64)
        buckets.write(:uint64, policy.buckets)
      end
      code = Native.slidelimit_policy_new(ns, ns.bytesize, res, res.bytesize, alg, policy.limit, policy.window_ms,
                                          buckets, s.out, s.msg, Native::MSG_CAP, s.msg_len, s.field)
      Core.raise_failure(code, s) unless code == Native::RESULT_OK
      s.out.read_pointer
    end

    # The count core uses for a C policy (its default when none was given),
    # nil for an algorithm without buckets (the C ABI's 0).
    def self.native_buckets(native)
      out = FFI::MemoryPointer.new(:uint64)
      code = Native.slidelimit_policy_buckets(native, out)
      raise Slidelimit.error_for(code, "slidelimit_policy_buckets failed") unless code == Native::RESULT_OK

      count = out.read(:uint64)
      count.zero? ? nil : count
    end
  end
end
