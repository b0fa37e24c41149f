# frozen_string_literal: true

require "ffi"

module Slidelimit
  # The C ABI of ffi-c (ffi-c/include/slidelimit.h), loaded with ruby-ffi.
  # Every contract decision (keys, validation, scripts, reply parsing, the
  # server-error table, the memory engine) happens on the other side; this
  # module only declares the functions. Nothing here is public API.
  module Native
    extend FFI::Library

    LIBRARY_NAME = "libslidelimit_ffi.#{FFI::Platform::LIBSUFFIX}"

    # Where the shared library is looked for: SLIDELIMIT_FFI_LIB alone when
    # set (a path the user named must not be silently replaced), else the
    # copy a built gem carries for its platform, then a checkout's cargo build.
    def self.library_candidates
      explicit = ENV["SLIDELIMIT_FFI_LIB"]
      return [explicit] if explicit && !explicit.empty?

      [
        File.expand_path("native/#{Gem::Platform.local}/#{LIBRARY_NAME}", __dir__),
        File.expand_path("../../../target/release/#{LIBRARY_NAME}", __dir__),
      ]
    end

    def self.library_path
      found = library_candidates.find { |path| File.file?(path) }
      return found if found

      raise LoadError, "slidelimit: the shared library #{LIBRARY_NAME} was not found " \
                       "(looked in #{library_candidates.join(', ')}); in a checkout run " \
                       "`make driver-ruby` (cargo build --release -p slidelimit-ffi), " \
                       "or set SLIDELIMIT_FFI_LIB to its path"
    end

    ffi_lib library_path

    # Constants of the header.
    # (test_multi_limit.rb checks them against ffi-c/include/slidelimit.h.)
    KEY_MAX = 2048
    MAX_LIMITS = 8
    CALL_BUF_MAX = 17_088
    CALL_PARTS_MAX = (5 * MAX_LIMITS) + 2
    SERVER_ERROR_MESSAGE_EXTRA = 256
    MSG_CAP = 512
    DECISION_WORDS = 6

    # ruby-ffi reads arrays by fixed width; size_t is one of these.
    GET_SIZE_T_ARRAY = FFI.type_size(:size_t) == 8 ? :get_array_of_uint64 : :get_array_of_uint32

    RESULT_OK = 0
    RESULT_BUFFER_TOO_SMALL = 101
    MODE_ACQUIRE = 1
    MODE_PEEK = 2
    ACTION_RETRY_WITH_EVAL = 1

    # struct slidelimit_decision; its offsets are read once (DECISION_*).
    class DecisionStruct < FFI::Struct
      layout :allowed, :bool,
             :remaining, :uint64,
             :retry_after_ms, :uint64,
             :reset_after_ms, :uint64,
             :now_ms, :uint64,
             :denied_by, :int32
    end

    # struct slidelimit_field: the field core blamed for a failure, as static
    # bytes (name NULL: none). Core decides it; nothing here parses messages.
    class FieldStruct < FFI::Struct
      layout :name, :pointer,
             :len, :size_t
    end

    typedef :uint32, :result
    typedef :pointer, :msg
    typedef :size_t, :msg_cap
    typedef :pointer, :msg_len
    typedef :pointer, :field

    attach_function :slidelimit_version, [], :string
    attach_function :slidelimit_result_name, [:uint32], :string
    attach_function :slidelimit_default_namespace, [], :string
    attach_function :slidelimit_default_algorithm, [], :string
    attach_function :slidelimit_default_timeout_ms, [], :uint64
    attach_function :slidelimit_algorithm_parse,
                    %i[buffer_in size_t pointer msg msg_cap msg_len field], :result
    # `buckets` is a pointer: NULL is "not given", anything else a count.
    attach_function :slidelimit_policy_new,
                    %i[buffer_in size_t buffer_in size_t uint32 uint64 uint64 pointer pointer msg msg_cap msg_len
                       field], :result
    # Parallel arrays of `count` limits; buckets_given[i] false is "not given".
    attach_function :slidelimit_policy_new_limits,
                    %i[buffer_in size_t buffer_in size_t pointer pointer pointer pointer pointer size_t pointer msg
                       msg_cap msg_len field], :result
    attach_function :slidelimit_policy_limit_count, %i[pointer pointer], :result
    attach_function :slidelimit_policy_limit, %i[pointer size_t pointer pointer pointer pointer], :result
    attach_function :slidelimit_policy_limit_key,
                    %i[pointer size_t buffer_in size_t pointer size_t pointer pointer msg msg_cap msg_len field],
                    :result
    attach_function :slidelimit_policy_script, %i[pointer uint32 pointer pointer pointer pointer], :result
    attach_function :slidelimit_policy_buckets, %i[pointer pointer], :result
    attach_function :slidelimit_policy_free, [:pointer], :void
    attach_function :slidelimit_policy_key,
                    %i[pointer buffer_in size_t pointer size_t pointer pointer msg msg_cap msg_len field], :result
    attach_function :slidelimit_key_slot, %i[buffer_in size_t pointer], :result
    attach_function :slidelimit_check_timeout_ms, %i[uint64 msg msg_cap msg_len field], :result
    attach_function :slidelimit_policy_check_cost, %i[pointer uint64 msg msg_cap msg_len field], :result
    attach_function :slidelimit_script_text, %i[uint32 uint32 pointer pointer], :result
    attach_function :slidelimit_script_sha1, %i[uint32 uint32 pointer pointer], :result
    attach_function :slidelimit_policy_build_call_into,
                    %i[pointer buffer_in size_t uint64 pointer uint32 pointer size_t pointer size_t
                       pointer pointer pointer msg msg_cap msg_len field], :result
    attach_function :slidelimit_decision_from_reply,
                    %i[pointer size_t size_t pointer msg msg_cap msg_len field], :result
    # The hot path's form (ffi-c/src/words.rs): four arguments and one read
    # back instead of eight and two.
    attach_function :slidelimit_decision_words_from_reply, %i[pointer size_t size_t pointer], :result
    attach_function :slidelimit_server_error_map,
                    %i[buffer_in size_t buffer_in size_t uint32 bool pointer pointer pointer size_t pointer field
                       msg msg_cap msg_len field], :result
    attach_function :slidelimit_server_error_resend_pause_ms, %i[buffer_in size_t uint32 pointer], :result
    attach_function :slidelimit_server_error_map_command,
                    %i[buffer_in size_t pointer pointer size_t pointer field], :result
    attach_function :slidelimit_memory_new, [:pointer], :result
    attach_function :slidelimit_memory_free, [:pointer], :void
    attach_function :slidelimit_memory_acquire,
                    %i[pointer pointer buffer_in size_t uint64 pointer uint64 pointer msg msg_cap msg_len field], :result
    attach_function :slidelimit_memory_peek,
                    %i[pointer pointer buffer_in size_t uint64 pointer uint64 pointer msg msg_cap msg_len field], :result
    attach_function :slidelimit_memory_reset,
                    %i[pointer pointer buffer_in size_t pointer msg msg_cap msg_len field], :result
    attach_function :slidelimit_memory_key_count, %i[pointer pointer], :result

    # The local deny cache (ffi-c/src/deny_cache.rs); internally locked.
    attach_function :slidelimit_deny_cache_new, %i[size_t pointer msg msg_cap msg_len field], :result
    attach_function :slidelimit_deny_cache_with_capacity, %i[size_t pointer msg msg_cap msg_len field], :result
    attach_function :slidelimit_deny_cache_free, [:pointer], :void
    attach_function :slidelimit_deny_cache_check,
                    %i[pointer buffer_in size_t uint64 uint64 pointer pointer], :result
    attach_function :slidelimit_deny_cache_record,
                    %i[pointer buffer_in size_t uint64 bool uint64 uint64 uint64 uint64 int32 uint64], :result
    attach_function :slidelimit_deny_cache_forget, %i[pointer buffer_in size_t], :result
    attach_function :slidelimit_deny_caches_forget_tenant, %i[buffer_in size_t], :result
    attach_function :slidelimit_deny_cache_clear, [:pointer], :result
    attach_function :slidelimit_deny_cache_len, %i[pointer pointer], :result

    # Core's metric names, help texts, labels and buckets (ffi-c/src/metrics.rs).
    METRIC_ALLOWED_TOTAL = 1
    METRIC_DENIED_TOTAL = 2
    METRIC_WAIT_SECONDS = 3
    METRIC_LOCAL_DENIED_TOTAL = 4
    attach_function :slidelimit_metric_name, %i[uint32 pointer pointer], :result
    attach_function :slidelimit_metric_help, %i[uint32 pointer pointer], :result
    attach_function :slidelimit_metric_label_count, %i[uint32 bool pointer], :result
    attach_function :slidelimit_metric_label, %i[uint32 bool size_t pointer pointer msg msg_cap msg_len field], :result
    attach_function :slidelimit_metric_buckets, %i[uint32 pointer pointer], :result
    attach_function :slidelimit_metric_wait_seconds, [:uint64], :double
  end
end
