# frozen_string_literal: true

require "redis"
require "openssl"
begin
  require "connection_pool"
rescue LoadError
  # Optional: Limiter.new then takes a Redis client only.
end

module Slidelimit
  # Checks one Policy on Redis (Limiter.new with a redis-rb client, standalone
  # or `Redis.new(cluster: [...])`) or in memory (Limiter.memory). Safe to
  # share between threads. #close frees its C memory at once; a finalizer
  # frees it otherwise.
  #
  #   limiter = Slidelimit::Limiter.new(Redis.new, policy)
  #   d = limiter.acquire("tenant-17")
  #   d.allowed? ? call_the_api : sleep(d.retry_after)
  class Limiter
    attr_reader :policy, :redis

    # redis: a Redis (redis-rb 4.x) client, standalone or
    # `Redis.new(cluster: [...])`, or a ConnectionPool of them (so that
    # threads do not queue on one connection). Its timeouts bound every call
    # (see Slidelimit.redis). metrics: a Slidelimit::Metrics, or anything
    # with observe(resource, tenant, decision) (and, optionally,
    # observe_local_denial(resource, tenant, decision)).
    #
    # deny_cache: the local deny cache of #acquire (core's). After Redis
    # denies an acquire of cost c with retry r, an acquire of the same tenant
    # and cost >= c within r is denied in this process without a Redis call.
    # true (the default): on, holding core's default number of tenants
    # (10,000); an Integer: on, holding that many; false or nil: off. Only
    # #acquire (server time) uses it; #acquire_at and #peek always ask Redis. It
    # cannot see a reset made by another process: a tenant reset elsewhere
    # stays denied here until the cached retry runs out (#reset on this
    # limiter forgets the tenant's entry).
    def initialize(redis, policy, metrics: nil, deny_cache: true)
      if defined?(::ConnectionPool) && redis.is_a?(::ConnectionPool)
        @pool = redis
      elsif !redis.is_a?(::Redis)
        # Redis::Namespace and other wrappers would prefix the key core built
        # and split the budget from every other language's workers.
        raise Slidelimit.invalid("redis", "must be a Redis client (redis-rb) or a ConnectionPool of them, " \
                                          "got #{redis.class}")
      end

      setup(policy, metrics)
      @deny_cache = Limiter.deny_cache(deny_cache)
      @redis = redis
      @calls = { Native::MODE_ACQUIRE => {}, Native::MODE_PEEK => {} }.freeze
      @acquire_calls = @calls[Native::MODE_ACQUIRE]
      # The script the policy's calls run (a multi-limit policy runs the
      # multi-limit script), from core.
      @scripts = @policy_handle.use do |p|
        {
          Native::MODE_ACQUIRE => Limiter.script(p, Native::MODE_ACQUIRE),
          Native::MODE_PEEK => Limiter.script(p, Native::MODE_PEEK),
        }.freeze
      end
    rescue StandardError
      @policy_handle&.close
      @deny_cache&.close
      raise
    end

    # The C deny cache the deny_cache option asks for, or nil (off). Not
    # public API.
    def self.deny_cache(option)
      s = Core.scratch
      code = case option
             when false, nil then return nil
             when true # core's default capacity
               Native.slidelimit_deny_cache_new(0, s.out, s.msg, Native::MSG_CAP, s.msg_len, s.field)
             when Integer # as given: core refuses 0 and above its maximum
               Core.uint64("deny_cache_capacity", option)
               Native.slidelimit_deny_cache_with_capacity(option, s.out, s.msg, Native::MSG_CAP, s.msg_len, s.field)
             else
               raise Slidelimit.invalid("deny_cache",
                                        "must be true, false or a capacity (Integer), got #{option.class}")
             end
      Core.raise_failure(code, s) unless code == Native::RESULT_OK
      Core::Handle.new(s.out.read_pointer, :slidelimit_deny_cache_free)
    end

    # A Limiter on core's in-memory engine, with the same decisions as Redis
    # (tests, single process). engine: a Slidelimit::MemoryEngine to share
    # with other limiters (nil: a new one, which #close frees). clock: a
    # callable of no argument returning the time in ms since the epoch, the
    # stand-in for Redis's clock (nil: real time); it alone expires keys, and
    # a reading past 2^52 ms is InvalidArgument on clock.
    def self.memory(policy, engine: nil, clock: nil, metrics: nil)
      # nil alone is "not given" (false is refused, not read as the default).
      Core.callable("clock", clock, 0, "call()") unless clock.nil?
      unless engine.nil? || engine.is_a?(MemoryEngine)
        raise Slidelimit.invalid("engine", "must be a Slidelimit::MemoryEngine, got #{engine.class}")
      end

      limiter = allocate
      limiter.send(:setup, policy, metrics)
      limiter.send(:setup_memory, engine, clock || -> { Process.clock_gettime(Process::CLOCK_REALTIME, :millisecond) })
      limiter
    end

    # Takes cost permits for tenant (all or none) on Redis's clock.
    def acquire(tenant, cost: 1)
      # The hot path: a call core already built for an equal String (cost 1,
      # server time; see CALL_CACHE_MAX), so check's conversions could
      # neither fail nor give other bytes. About 0.5 µs less per check.
      if cost.equal?(1) && tenant.instance_of?(String) && (call = @acquire_calls[tenant])
        decision = @deny_cache ? acquire_through_cache(tenant, 1, call) : run_call(Native::MODE_ACQUIRE, call)
        @metrics&.observe(@policy.resource, tenant, decision)
        return decision
      end
      check(tenant, cost, nil, Native::MODE_ACQUIRE, false)
    end

    # #acquire at the caller's time now_ms (tests, replays); never answered
    # by the deny cache.
    def acquire_at(tenant, now_ms, cost: 1)
      check(tenant, cost, now_ms, Native::MODE_ACQUIRE, true)
    end

    # What #acquire would answer, recording nothing.
    def peek(tenant, cost: 1, now_ms: nil)
      check(tenant, cost, now_ms, Native::MODE_PEEK, !now_ms.nil?)
    end

    # Forgets everything recorded for tenant, and its cached denial in every
    # limiter of the process (this one's cache on or off); true if anything
    # was recorded.
    def reset(tenant)
      if @memory
        bytes = Core.utf8("tenant", tenant)
        s = Core.scratch
        removed = FFI::MemoryPointer.new(:bool)
        @policy_handle.use do |p|
          @memory.use do |m|
            code = Native.slidelimit_memory_reset(m, p, bytes, bytes.bytesize, removed, s.msg, Native::MSG_CAP,
                                                  s.msg_len, s.field)
            Core.raise_failure(code, s) unless code == Native::RESULT_OK
          end
        end
        return removed.read(:bool)
      end

      keys = keys(tenant)
      bytes = Core.utf8("tenant", tenant)
      forget_denials(bytes)
      begin
        once_more_if_inherited { with_redis { |r| r.del(*keys) } }.positive?
      rescue ::Redis::CommandError => e
        raise command_error(e)
      rescue *CONNECTION_ERRORS => e
        raise unavailable(e)
      ensure
        # Again: a denial Redis gave before the DEL may have come back, and
        # been cached, while it ran.
        forget_denials(bytes)
      end
    end

    # The Redis key of tenant under the policy (core's format; the first
    # limit's for a policy of several, see #keys).
    def key(tenant)
      limit_key(0, tenant)
    end

    # Every limit's Redis key of tenant, in the order of Policy#limits (one
    # Cluster slot); #reset deletes them all.
    def keys(tenant)
      Array.new(@policy.limits.length) { |i| limit_key(i, tenant) }
    end

    # Whether #acquire consults a local deny cache.
    def deny_cache?
      !@deny_cache.nil?
    end

    # Frees the C memory now (it does not close the Redis client). Later
    # checks raise InvalidArgument ("limiter: is closed"). Idempotent.
    def close
      # The hot path finds no call any more, so it takes check's way, which
      # raises "is closed".
      @acquire_calls = NO_CALLS
      @policy_handle.close
      @deny_cache&.close
      @memory.close if @own_engine
      nil
    end

    def closed?
      @policy_handle.closed?
    end

    def memory?
      !@memory.nil?
    end

    def inspect
      "#<Slidelimit::Limiter #{memory? ? 'memory' : 'redis'} #{@policy.inspect}#{closed? ? ' closed' : ''}>"
    end

    # The SHA1 and text of the script a C policy's calls run in mode,
    # copied once from core's static memory.
    def self.script(native_policy, mode)
      s = Core.scratch
      sha_ptr = FFI::MemoryPointer.new(:pointer)
      sha_len = FFI::MemoryPointer.new(:size_t)
      code = Native.slidelimit_policy_script(native_policy, mode, s.out, s.out2, sha_ptr, sha_len)
      raise Slidelimit.error_for(code, "slidelimit_policy_script failed") unless code == Native::RESULT_OK

      text = s.out.read_pointer.get_bytes(0, s.out2.read(:size_t)).force_encoding(Encoding::UTF_8)
      sha = sha_ptr.read_pointer.get_bytes(0, sha_len.read(:size_t)).force_encoding(Encoding::UTF_8)
      [sha.freeze, text.freeze].freeze
    end

    # What the client raises when Redis cannot be reached or answer in time
    # (error replies are Redis::CommandError, rescued before these).
    # redis-rb 4.8's Cluster client raises Node::ReloadNeeded (no
    # Redis::BaseError) when a MOVED names a node its reloaded map does not
    # know yet, during a failover: the slot map is changing, so unavailable.
    CONNECTION_ERRORS = [::Redis::BaseError, SystemCallError, IOError, OpenSSL::SSL::SSLError,
                         ::Redis::Cluster::Node::ReloadNeeded,
                         (::ConnectionPool::TimeoutError if defined?(::ConnectionPool::TimeoutError))].compact.freeze

    private

    def setup(policy, metrics)
      raise Slidelimit.invalid("policy", "must be a Slidelimit::Policy, got #{policy.class}") unless policy.is_a?(Policy)
      unless metrics.nil? || metrics.respond_to?(:observe)
        raise Slidelimit.invalid("metrics", "must respond to observe(resource, tenant, decision), got #{metrics.class}")
      end

      @policy = policy
      @metrics = metrics
      @acquire_calls = NO_CALLS
      @policy_handle = Core::Handle.new(Policy.native_policy(policy), :slidelimit_policy_free)
      @algorithm = Policy.algorithm_value(policy.algorithm)
    end

    def setup_memory(engine, clock)
      @own_engine = engine.nil?
      @memory = (engine || MemoryEngine.new).handle
      @clock = clock
    end

    # The Redis key of limit index of the policy for tenant (core's).
    def limit_key(index, tenant)
      bytes = Core.utf8("tenant", tenant)
      s = Core.scratch
      @policy_handle.use do |p|
        code = Native.slidelimit_policy_limit_key(p, index, bytes, bytes.bytesize, s.buf, Native::CALL_BUF_MAX, s.used,
                                                  nil, s.msg, Native::MSG_CAP, s.msg_len, s.field)
        Core.raise_failure(code, s) unless code == Native::RESULT_OK
      end
      s.buf.get_bytes(0, s.used.read(:size_t)).force_encoding(Encoding::UTF_8)
    end

    # A server-time acquire through the deny cache (core's): its local
    # denial, or Redis's decision, which the cache is then told. tenant is
    # the call's (valid) tenant bytes; call was built by core, so tenant and
    # cost were validated first. The monotonic time is read before the call
    # is sent, so a cached retry never outlasts Redis's.
    def acquire_through_cache(tenant, cost, call)
      mono = Process.clock_gettime(Process::CLOCK_MONOTONIC, :millisecond)
      s = Core.scratch
      hit = @deny_cache.use do |c|
        code = Native.slidelimit_deny_cache_check(c, tenant, tenant.bytesize, cost, mono, s.hit, s.decision)
        raise Slidelimit.error_for(code, "slidelimit_deny_cache_check failed") unless code == Native::RESULT_OK

        s.hit.read(:bool)
      end
      if hit
        decision = Decision.from_native(s.decision)
        @metrics.observe_local_denial(@policy.resource, tenant, decision) if @metrics.respond_to?(:observe_local_denial)
        return decision
      end

      d = run_call(Native::MODE_ACQUIRE, call)
      # Redis has decided (and maybe counted a permit): a close from another
      # thread meanwhile only means there is no cache left to tell.
      @deny_cache.use_if_open do |c|
        code = Native.slidelimit_deny_cache_record(c, tenant, tenant.bytesize, cost, d.allowed?, d.remaining,
                                                   d.retry_after_ms, d.reset_after_ms, d.now_ms, d.denied_by || -1,
                                                   mono)
        raise Slidelimit.error_for(code, "slidelimit_deny_cache_record failed") unless code == Native::RESULT_OK
      end
      d
    end

    # Ruby's own type checks in core's order (tenant, cost, now_ms), so the
    # field named is the one core would name first.
    def check(tenant, cost, now, mode, caller_time)
      bytes = Core.utf8("tenant", tenant)
      Core.uint64("cost", cost)
      Core.uint64("now_ms", now) if caller_time
      decision = @memory ? check_memory(bytes, cost, now, mode) : check_redis(bytes, cost, now, mode)
      @metrics.observe(@policy.resource, tenant, decision) if @metrics && mode == Native::MODE_ACQUIRE
      decision
    end

    def check_memory(bytes, cost, now, mode)
      s = Core.scratch
      now_ptr = now.nil? ? nil : s.now.put_uint64(0, now)
      clock = Core.uint64("clock", @clock.call)
      @policy_handle.use do |p|
        @memory.use do |m|
          function = mode == Native::MODE_PEEK ? :slidelimit_memory_peek : :slidelimit_memory_acquire
          code = Native.public_send(function, m, p, bytes, bytes.bytesize, cost, now_ptr, clock, s.decision,
                                    s.msg, Native::MSG_CAP, s.msg_len, s.field)
          Core.raise_failure(code, s) unless code == Native::RESULT_OK
        end
      end
      Decision.from_native(s.decision)
    end

    # Core builds the call (key and ARGV) into the thread's scratch buffer.
    def build_call(bytes, cost, now, mode)
      s = Core.scratch
      now_ptr = now.nil? ? nil : s.now.put_uint64(0, now)
      @policy_handle.use do |p|
        code = Native.slidelimit_policy_build_call_into(
          p, bytes, bytes.bytesize, cost, now_ptr, mode, s.buf, Native::CALL_BUF_MAX,
          s.lens, Native::CALL_PARTS_MAX, s.n_keys, s.n_parts, s.used, s.msg, Native::MSG_CAP, s.msg_len,
          s.field
        )
        Core.raise_failure(code, s) unless code == Native::RESULT_OK
      end
      n_keys = s.n_keys.read(:size_t)
      lens = s.lens.public_send(Native::GET_SIZE_T_ARRAY, 0, s.n_parts.read(:size_t))
      all = s.buf.get_bytes(0, s.used.read(:size_t))
      keys = []
      argv = []
      offset = 0
      lens.each_with_index do |len, i|
        (i < n_keys ? keys : argv) << all.byteslice(offset, len)
        offset += len
      end
      [keys, argv]
    end

    # Calls core built for cost 1 on server time, per mode and tenant: the
    # hot path asks core once per tenant, not once per check (a call depends
    # on nothing else, and the policy never changes). Keyed by plain Strings
    # only: a String subclass could redefine #hash or #eql?. #acquire looks
    # its tenant up before any conversion, which is safe: Strings in two
    # encodings are eql? only when both are 7-bit ASCII (the same UTF-8
    # bytes once transcoded); a UTF-16 String is never eql? to a key.
    CALL_CACHE_MAX = 4096
    NO_CALLS = {}.freeze
    private_constant :NO_CALLS

    def check_redis(bytes, cost, now, mode)
      if cost == 1 && now.nil? && bytes.instance_of?(String)
        raise Slidelimit.invalid("limiter", "is closed") if @policy_handle.closed?

        cache = @calls[mode]
        call = cache[bytes]
        unless call
          call = build_call(bytes, cost, now, mode).freeze
          cache.clear if cache.size >= CALL_CACHE_MAX
          cache[bytes] = call
        end
      else
        call = build_call(bytes, cost, now, mode)
      end
      # Only acquires on server time go through the deny cache.
      return acquire_through_cache(bytes, cost, call) if @deny_cache && now.nil? && mode == Native::MODE_ACQUIRE

      run_call(mode, call)
    end

    # Runs a call core built ([keys, argv]); core parses the reply.
    def run_call(mode, call)
      keys, argv = call
      sha, text = @scripts[mode]
      reply = begin
        once_more_if_inherited do
          if @pool
            with_redis { |redis| eval_script(redis, sha, text, keys, argv) }
          else
            eval_script(@redis, sha, text, keys, argv)
          end
        end
      rescue *CONNECTION_ERRORS => e
        # Error replies arrive mapped (a Slidelimit::Error); anything else the
        # client raised (refused, reset, timed out) means Redis is unavailable,
        # never a decision.
        raise unavailable(e)
      end
      parse_reply(reply)
    end

    # EVALSHA, and on NOSCRIPT one EVAL with the same key, so on the same
    # node (a restart, a failover, a Cluster node never used before). The
    # script did not run on NOSCRIPT, so the retry cannot count twice.
    def eval_script(redis, sha, text, keys, argv)
      evalsha_resending(redis, sha, keys, argv)
    rescue ::Redis::CommandError => e
      retry_eval, error = map_script_error(e, keys[0], false)
      raise error unless retry_eval

      begin
        redis.eval(text, keys, argv)
      rescue ::Redis::CommandError => e2
        raise map_script_error(e2, keys[0], true)[1]
      end
    end

    # EVALSHA, sent again after core's pause while Redis refuses it without
    # running it (TRYAGAIN: a slot migrating under a policy's keys), for as
    # long as the client's timeout leaves room for the wait.
    def evalsha_resending(redis, sha, keys, argv)
      attempt = 0
      deadline = nil
      begin
        redis.evalsha(sha, keys, argv)
      rescue ::Redis::CommandError => e
        pause = resend_pause(e, attempt)
        raise if pause.nil?

        now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        deadline ||= now + (redis._client.timeout || 0)
        raise if now + pause >= deadline

        sleep(pause)
        attempt += 1
        retry
      end
    end

    # Core's wait in seconds before resending a call Redis answered with this
    # error, or nil when it is not to be resent.
    def resend_pause(error, attempt)
      reply = error.message.b
      pause_ms = FFI::MemoryPointer.new(:uint64)
      result = Native.slidelimit_server_error_resend_pause_ms(reply, reply.bytesize, [attempt, 0xFFFF_FFFF].min,
                                                               pause_ms)
      ms = result == Native::RESULT_OK ? pause_ms.read(:uint64) : 0
      ms.positive? ? ms / 1000.0 : nil
    end

    # Drops the tenant (its UTF-8 bytes) from every deny cache of the process:
    # through this limiter's cache, or core's process-wide call without one
    # (also once a close from another thread has freed the cache).
    def forget_denials(bytes)
      return if @deny_cache&.use_if_open { |c| Native.slidelimit_deny_cache_forget(c, bytes, bytes.bytesize) }

      Native.slidelimit_deny_caches_forget_tenant(bytes, bytes.bytesize)
    end

    # A connection's first use in a forked child: redis-rb refuses it before
    # sending anything (InheritedError) and drops the parent's socket, so one
    # more try, on a connection of this process, cannot count a check twice.
    # A second refusal goes to the caller's rescue as it is.
    def once_more_if_inherited
      yield
    rescue ::Redis::InheritedError
      yield
    end

    def with_redis
      return yield @redis unless @pool

      @pool.with do |redis|
        raise Slidelimit.invalid("redis", "the pool gave a #{redis.class}, not a Redis client") unless redis.is_a?(::Redis)

        yield redis
      end
    end

    # Core's table for an error reply to a script call on key.
    def map_script_error(error, key, after_retry)
      reply = error.message.b
      out_cap = reply.bytesize + key.bytesize + Native::SERVER_ERROR_MESSAGE_EXTRA
      out_msg = FFI::MemoryPointer.new(:uint8, out_cap)
      action = FFI::MemoryPointer.new(:uint32)
      code = FFI::MemoryPointer.new(:uint32)
      s = Core.scratch
      result = Native.slidelimit_server_error_map(reply, reply.bytesize, key, key.bytesize, @algorithm, after_retry,
                                                  action, code, out_msg, out_cap, s.out2, s.out_field, s.msg,
                                                  Native::MSG_CAP, s.msg_len, s.field)
      Core.raise_failure(result, s) unless result == Native::RESULT_OK
      return [true, nil] if action.read(:uint32) == Native::ACTION_RETRY_WITH_EVAL

      message = out_msg.get_bytes(0, s.out2.read(:size_t)).force_encoding(Encoding::UTF_8)
      [false, Slidelimit.error_for(code.read(:uint32), message, field: s.field_name(s.out_field), redis_error: error)]
    end

    # Core's table for an error reply to a command that is no script (DEL).
    def command_error(error)
      reply = error.message.b
      out_cap = reply.bytesize + Native::SERVER_ERROR_MESSAGE_EXTRA
      out_msg = FFI::MemoryPointer.new(:uint8, out_cap)
      code = FFI::MemoryPointer.new(:uint32)
      s = Core.scratch
      result = Native.slidelimit_server_error_map_command(reply, reply.bytesize, code, out_msg, out_cap, s.out2,
                                                          s.out_field)
      return Slidelimit.error_for(result, "mapping the server error failed") unless result == Native::RESULT_OK

      message = out_msg.get_bytes(0, s.out2.read(:size_t)).force_encoding(Encoding::UTF_8)
      Slidelimit.error_for(code.read(:uint32), message, field: s.field_name(s.out_field), redis_error: error)
    end

    def unavailable(error)
      message = case error
                when ::Redis::TimeoutError then "Redis did not answer within the client's timeout"
                when ::Redis::CannotConnectError, ::Redis::Cluster::InitialSetupError then "could not connect to Redis"
                when ::Redis::Cluster::Node::ReloadNeeded then "the cluster's slot map is changing; retry"
                when OpenSSL::SSL::SSLError then "the TLS connection to Redis failed"
                else "the connection to Redis failed"
                end
      Unavailable.new("redis unavailable: #{message} (#{error.class}: #{error.message})", redis_error: error)
    end

    # Core parses the reply; the RESP types are this binding's business.
    def parse_reply(reply)
      raise MalformedReply, "script reply is #{reply.class}, not an array" unless reply.is_a?(Array)

      n = reply.length
      unless reply.all?(Integer)
        i = reply.index { |item| !item.is_a?(Integer) }
        raise MalformedReply, "script reply element #{i} is #{reply[i].class}, not an integer"
      end
      s = Thread.current[Core::SCRATCH] || Core.scratch
      # Longer replies are malformed; core says so from their length alone.
      ptr = n <= 8 ? s.reply : FFI::MemoryPointer.new(:int64, n)
      begin
        ptr.put_array_of_int64(0, reply) if n.positive?
      rescue RangeError
        raise MalformedReply, "script reply has an integer beyond 64 bits: #{reply.inspect}"
      end
      limits = @policy.limits.length
      code = Native.slidelimit_decision_words_from_reply(ptr, n, limits, s.words)
      return Decision.from_words(s.words) if code == Native::RESULT_OK

      # Refused: the full form gives core's message and field for this reply.
      code = Native.slidelimit_decision_from_reply(ptr, n, limits, s.decision, s.msg, Native::MSG_CAP, s.msg_len,
                                                  s.field)
      Core.raise_failure(code, s) unless code == Native::RESULT_OK
      Decision.from_native(s.decision)
    end
  end
end
