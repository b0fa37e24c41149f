# frozen_string_literal: true

module Slidelimit
  # Core's in-memory engine: the scripts' exact semantics in this process,
  # for tests and single-process use. Limiter.memory makes one per limiter
  # unless given one to share (then several policies share one store, as on
  # Redis). Thread-safe; #close (or the finalizer) frees it.
  class MemoryEngine
    def initialize
      out = FFI::MemoryPointer.new(:pointer)
      code = Native.slidelimit_memory_new(out)
      raise Slidelimit.error_for(code, "slidelimit_memory_new failed") unless code == Native::RESULT_OK

      @handle = Core::Handle.new(out.read_pointer, :slidelimit_memory_free)
    end

    # The number of keys held (expired ones until they are swept).
    def key_count
      count = FFI::MemoryPointer.new(:size_t)
      @handle.use { |m| Native.slidelimit_memory_key_count(m, count) }
      count.read(:size_t)
    end

    def close
      @handle.close
      nil
    end

    def closed?
      @handle.closed?
    end

    # The C handle, for Limiter (not public API).
    attr_reader :handle
  end
end
