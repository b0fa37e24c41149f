# frozen_string_literal: true

module Slidelimit
  # One rate limit: at most `limit` permits per rolling `window_ms` for each
  # tenant, under keys `<namespace>:{<resource>:<tenant>}:<tag>:<window_ms>`.
  # Validated by core when made (a bad field is InvalidArgument naming it);
  # frozen. The namespace and algorithm default to core's ("rl",
  # :sliding_log).
  #
  #   Slidelimit::Policy.new(resource: "geocode", limit: 600, window_ms: 60_000)
  class Policy
    include Value

    attr_reader :namespace, :resource, :algorithm, :limit, :window_ms

    def self.default_namespace
      Native.slidelimit_default_namespace
    end

    def self.default_algorithm
      Native.slidelimit_default_algorithm.to_sym
    end

    def initialize(resource:, limit:, window_ms:, namespace: Policy.default_namespace,
                   algorithm: Policy.default_algorithm)
      @namespace = Core.utf8("namespace", namespace).dup.freeze
      @resource = Core.utf8("resource", resource).dup.freeze
      @algorithm = Policy.parse_algorithm(algorithm)
      @limit = Core.uint64("limit", limit)
      @window_ms = Core.uint64("window_ms", window_ms)
      # Core validates the whole policy now, so that a bad one fails here
      # and not at the first check; each Limiter keeps its own C copy.
      Native.slidelimit_policy_free(Policy.native_policy(self))
      freeze
    end

    def to_h
      { namespace: namespace, resource: resource, algorithm: algorithm, limit: limit, window_ms: window_ms }
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
      code = Native.slidelimit_policy_new(ns, ns.bytesize, res, res.bytesize, alg, policy.limit, policy.window_ms,
                                          s.out, s.msg, Native::MSG_CAP, s.msg_len, s.field)
      Core.raise_failure(code, s) unless code == Native::RESULT_OK
      s.out.read_pointer
    end
  end
end
