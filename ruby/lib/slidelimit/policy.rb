# frozen_string_literal: true

module Slidelimit
  # One limit of a Policy: at most `limit` permits per rolling `window_ms`
  # by `algorithm` (:sliding_log, :sliding_counter or :bucketed_window;
  # default core's, :sliding_log), with the bucketed window's `buckets` (nil:
  # core's default, 60). Frozen; checked by core when a Policy is made of it
  # (a bad field is InvalidArgument naming it, as `limits[1].window_ms`).
  #
  #   Slidelimit::Limit.new(limit: 20, window_ms: 1000)
  #   Slidelimit::Limit.new(algorithm: :bucketed_window, limit: 600, window_ms: 60_000, buckets: 60)
  class Limit
    include Value

    attr_reader :algorithm, :limit, :window_ms, :buckets

    def initialize(limit:, window_ms:, algorithm: Policy.default_algorithm, buckets: nil)
      # A String that is not valid text stays one: core refuses it, naming algorithm.
      @algorithm = algorithm.is_a?(String) && algorithm.valid_encoding? ? algorithm.to_sym : algorithm
      @limit = limit
      @window_ms = window_ms
      @buckets = buckets
      freeze
    end

    def to_h
      { algorithm: algorithm, limit: limit, window_ms: window_ms, buckets: buckets }
    end
  end

  # A rate limit: at most `limit` permits per rolling `window_ms` for each
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
  #
  # Instead of the single limit's keywords, `limits:` takes up to 8
  # Slidelimit::Limit: a check passes only if every limit allows it, and is
  # recorded in all of them or in none (one key per limit, one Cluster slot).
  #
  #   Slidelimit::Policy.new(resource: "geocode", limits: [
  #     Slidelimit::Limit.new(limit: 20, window_ms: 1000),
  #     Slidelimit::Limit.new(algorithm: :bucketed_window, limit: 600, window_ms: 60_000),
  #   ])
  #
  # A policy of one limit is the single form (the same key, script and
  # error fields). #algorithm, #limit, #window_ms and #buckets report the
  # first limit; #limits all of them, with their bucket counts resolved.
  class Policy
    include Value

    # `buckets` is the count core uses: the one given, core's default (60)
    # for nil on the bucketed window, nil for the algorithms without buckets.
    attr_reader :namespace, :resource, :algorithm, :limit, :window_ms, :buckets, :limits

    SINGLE_FIELDS = %i[algorithm limit window_ms buckets].freeze
    private_constant :SINGLE_FIELDS

    def self.default_namespace
      Native.slidelimit_default_namespace
    end

    def self.default_algorithm
      Native.slidelimit_default_algorithm.to_sym
    end

    def initialize(resource:, limit: nil, window_ms: nil, namespace: Policy.default_namespace, algorithm: nil,
                   buckets: nil, limits: nil)
      @namespace = Core.utf8("namespace", namespace).dup.freeze
      @resource = Core.utf8("resource", resource).dup.freeze
      given = { algorithm: algorithm, limit: limit, window_ms: window_ms, buckets: buckets }
      if limits.nil?
        raise Slidelimit.invalid("limit", "is required (or give limits)") if limit.nil?
        raise Slidelimit.invalid("window_ms", "is required (or give limits)") if window_ms.nil?

        # nil alone is "not given"; false is refused by parse_algorithm.
        specs = [Limit.new(algorithm: algorithm.nil? ? Policy.default_algorithm : algorithm, limit: limit,
                           window_ms: window_ms, buckets: buckets)]
      else
        both = SINGLE_FIELDS.find { |f| !given[f].nil? }
        raise Slidelimit.invalid(both.to_s, "cannot be given with limits (put it in a Limit)") if both
        raise Slidelimit.invalid("limits", "must be an Array of Slidelimit::Limit, got #{limits.class}") unless limits.is_a?(Array)

        specs = limits
      end
      # Core validates the whole policy now, so that a bad one fails here
      # and not at the first check; each Limiter keeps its own C copy.
      native = Policy.native_from_specs(@namespace, @resource, specs)
      begin
        @limits = Policy.native_limits(native).freeze
      ensure
        Native.slidelimit_policy_free(native)
      end
      first = @limits[0]
      @algorithm = first.algorithm
      @limit = first.limit
      @window_ms = first.window_ms
      @buckets = first.buckets
      freeze
    end

    # Core's cost rule for this policy: an Integer from 1 up to its lowest
    # limit (a larger cost could never pass), else InvalidArgument naming
    # cost. Returns cost. Every check applies it; a job integration applies it
    # to its setting when configured.
    def check_cost(cost)
      Core.uint64("cost", cost)
      native = Policy.native_policy(self)
      begin
        s = Core.scratch
        code = Native.slidelimit_policy_check_cost(native, cost, s.msg, Native::MSG_CAP, s.msg_len, s.field)
        Core.raise_failure(code, s) unless code == Native::RESULT_OK
      ensure
        Native.slidelimit_policy_free(native)
      end
      cost
    end

    # The keywords that make this policy again: the single form for one
    # limit, `limits:` for several.
    def to_h
      if limits.length == 1
        { namespace: namespace, resource: resource, algorithm: algorithm, limit: limit, window_ms: window_ms,
          buckets: buckets }
      else
        { namespace: namespace, resource: resource, limits: limits }
      end
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
    end

    # The name of algorithm value (1, 2, 3) as a Symbol, by core.
    ALGORITHMS = %i[sliding_log sliding_counter bucketed_window].to_h { |n| [algorithm_value(n), n] }.freeze

    # A new C policy (the caller owns it) of a made policy.
    def self.native_policy(policy)
      native_from_specs(policy.namespace, policy.resource, policy.limits)
    end

    # A new C policy of Limits (the caller owns it), or core's error. Ruby
    # values no C type can carry are refused here naming the field as core
    # names it: `limit` for one limit, `limits[1].limit` for several.
    def self.native_from_specs(namespace, resource, specs)
      count = specs.length
      n = [count, 1].max
      algorithms = FFI::MemoryPointer.new(:uint32, n)
      limit_values = FFI::MemoryPointer.new(:uint64, n)
      windows = FFI::MemoryPointer.new(:uint64, n)
      buckets = FFI::MemoryPointer.new(:uint64, n)
      given = FFI::MemoryPointer.new(:bool, n)
      # Core refuses a list too long before it reads any limit: none is
      # converted here either.
      converted = count > Native::MAX_LIMITS ? [] : specs
      converted.each_with_index do |spec, i|
        unless spec.is_a?(Limit)
          raise Slidelimit.invalid("limits[#{i}]", "must be a Slidelimit::Limit, got #{spec.class} (#{spec.inspect})")
        end

        name = ->(field) { count > 1 ? "limits[#{i}].#{field}" : field }

        algorithms.put_uint32(i * 4, limit_algorithm(spec.algorithm, name.call("algorithm")))
        limit_values.put_uint64(i * 8, Core.uint64(name.call("limit"), spec.limit))
        windows.put_uint64(i * 8, Core.uint64(name.call("window_ms"), spec.window_ms))
        # Any count given, 0 included, goes to core, which decides whether
        # it is valid; nil is "not given" (core's default).
        given.put_uint8(i, spec.buckets.nil? ? 0 : 1)
        buckets.put_uint64(i * 8, spec.buckets.nil? ? 0 : Core.uint64(name.call("buckets"), spec.buckets))
      end
      s = Core.scratch
      code = Native.slidelimit_policy_new_limits(namespace, namespace.bytesize, resource, resource.bytesize,
                                                 algorithms, limit_values, windows, buckets, given, count, s.out,
                                                 s.msg, Native::MSG_CAP, s.msg_len, s.field)
      Core.raise_failure(code, s) unless code == Native::RESULT_OK
      s.out.read_pointer
    end

    # The algorithm value of one limit's algorithm; core's error, under the
    # limit's field name.
    def self.limit_algorithm(algorithm, field)
      parse_algorithm(algorithm)
    rescue InvalidArgument => e
      raise e if e.field == field

      problem = e.message.delete_prefix("#{e.field}: ")
      raise Slidelimit.invalid(field, problem)
    end

    # The limits core holds for a C policy, bucket counts resolved (nil for
    # an algorithm without buckets, the C ABI's 0).
    def self.native_limits(native)
      count = FFI::MemoryPointer.new(:size_t)
      code = Native.slidelimit_policy_limit_count(native, count)
      raise Slidelimit.error_for(code, "slidelimit_policy_limit_count failed") unless code == Native::RESULT_OK

      alg = FFI::MemoryPointer.new(:uint32)
      limit = FFI::MemoryPointer.new(:uint64)
      window = FFI::MemoryPointer.new(:uint64)
      buckets = FFI::MemoryPointer.new(:uint64)
      Array.new(count.read(:size_t)) do |i|
        code = Native.slidelimit_policy_limit(native, i, alg, limit, window, buckets)
        raise Slidelimit.error_for(code, "slidelimit_policy_limit failed") unless code == Native::RESULT_OK

        b = buckets.read(:uint64)
        Limit.new(algorithm: ALGORITHMS.fetch(alg.read(:uint32)), limit: limit.read(:uint64),
                  window_ms: window.read(:uint64), buckets: b.zero? ? nil : b)
      end
    end
  end
end
