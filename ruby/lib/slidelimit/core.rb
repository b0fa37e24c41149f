# frozen_string_literal: true

module Slidelimit
  # Plumbing between Ruby values and the C ABI: type conversion, per-thread
  # scratch buffers, result codes to exceptions, and owned C handles. It
  # decides nothing about the contract (core does); it only refuses Ruby
  # values the C types cannot carry. Not public API.
  module Core
    U64_MAX = (1 << 64) - 1

    # Buffers one thread reuses for every call, so a check allocates no
    # native memory. Fiber-local (Thread#[]), and nothing yields between
    # filling one and reading it back.
    class Scratch
      attr_reader :buf, :lens, :n_keys, :n_parts, :used, :msg, :msg_len, :field,
                  :out_field, :now, :reply, :decision, :words, :slot, :out, :out2, :hit

      def initialize
        @buf = FFI::MemoryPointer.new(:uint8, Native::CALL_BUF_MAX)
        @lens = FFI::MemoryPointer.new(:size_t, Native::CALL_PARTS_MAX)
        @n_keys = FFI::MemoryPointer.new(:size_t)
        @n_parts = FFI::MemoryPointer.new(:size_t)
        @used = FFI::MemoryPointer.new(:size_t)
        @msg = FFI::MemoryPointer.new(:uint8, Native::MSG_CAP)
        @msg_len = FFI::MemoryPointer.new(:size_t)
        @field = Native::FieldStruct.new
        @out_field = Native::FieldStruct.new
        @now = FFI::MemoryPointer.new(:uint64)
        @reply = FFI::MemoryPointer.new(:int64, 8)
        @decision = FFI::MemoryPointer.new(Native::DecisionStruct.size)
        @words = FFI::MemoryPointer.new(:uint64, Native::DECISION_WORDS)
        @slot = FFI::MemoryPointer.new(:uint16)
        @out = FFI::MemoryPointer.new(:pointer)
        @out2 = FFI::MemoryPointer.new(:size_t)
        @hit = FFI::MemoryPointer.new(:bool)
      end

      # Core's message of the last failure.
      def message
        @msg.get_bytes(0, @msg_len.read(:size_t)).force_encoding(Encoding::UTF_8)
      end

      # The field core named for the last failure (or for the error a server
      # reply maps to, from out_field), nil for none.
      def field_name(field = @field)
        name = field[:name]
        return nil if name.null?

        name.get_bytes(0, field[:len]).force_encoding(Encoding::UTF_8)
      end
    end

    # The fiber-local slot of the Scratch (read inline on the hot path).
    SCRATCH = :__slidelimit_scratch

    def self.scratch
      Thread.current[SCRATCH] ||= Scratch.new
    end

    # Raises the error of a failed C call, with core's message and field
    # from scratch.
    def self.raise_failure(code, scratch)
      raise Slidelimit.error_for(code, scratch.message, field: scratch.field_name)
    end

    # An Integer the C ABI takes as uint64_t. Core checks the range that
    # matters (1..limit, <= 2^52); a value no uint64_t can hold, or no
    # Integer at all, is refused here naming the field.
    def self.uint64(field, value)
      unless value.is_a?(Integer)
        raise Slidelimit.invalid(field, "must be an Integer, got #{value.class} (#{value.inspect})")
      end
      raise Slidelimit.invalid(field, "must not be negative, got #{value}") if value.negative?
      raise Slidelimit.invalid(field, "must be below 2^64, got #{value}") if value > U64_MAX

      value
    end

    # A callable the binding will call with `args` arguments: anything that
    # responds to call, refused only when its arity makes that call certain
    # to raise ArgumentError (a lambda or a Method; a proc takes any count).
    # `what` describes the call, as "call(job)".
    def self.callable(field, value, args, what)
      raise Slidelimit.invalid(field, "must respond to #{what}, got #{value.class}") unless value.respond_to?(:call)

      strict = value.is_a?(Method) || (value.is_a?(Proc) && value.lambda?)
      arity = value.arity if strict
      return value if arity.nil? || (arity.negative? ? args >= -arity - 1 : args == arity)

      raise Slidelimit.invalid(field, "must be callable as #{what}, but its arity is #{arity} (#{value.inspect})")
    end

    # The UTF-8 bytes of a String for the C ABI. UTF-8, US-ASCII and binary
    # Strings go as they are (core refuses bytes that are not UTF-8); other
    # encodings are transcoded. Anything but a String is refused.
    def self.utf8(field, value)
      raise Slidelimit.invalid(field, "must be a String, got #{value.class} (#{value.inspect})") unless value.is_a?(String)

      case value.encoding
      when Encoding::UTF_8, Encoding::BINARY, Encoding::US_ASCII then value
      else
        begin
          value.encode(Encoding::UTF_8)
        rescue EncodingError => e
          raise Slidelimit.invalid(field, "cannot be read as UTF-8 (#{e.message})")
        end
      end
    end

    # One C object this process owns (a policy, a memory engine or a deny
    # cache), freed
    # exactly once: by #close, or by a finalizer when its owner is collected.
    # Calls hold the lock, so #close cannot free the object under a call
    # running on another thread.
    class Handle
      def initialize(pointer, free_function)
        @box = [pointer]
        @free_function = free_function
        @lock = Mutex.new
        ObjectSpace.define_finalizer(self, Handle.finalizer(@box, free_function))
        Handle.live_delta(1)
      end

      # Built outside any instance, so the proc holds no reference to the
      # handle (which would keep it alive forever).
      def self.finalizer(box, free_function)
        proc do
          pointer = box[0]
          box[0] = nil
          if pointer
            Native.public_send(free_function, pointer)
            Handle.live_delta(-1)
          end
        end
      end

      @live = 0
      class << self
        # How many C objects are alive (tests prove finalizers free them).
        attr_reader :live

        # Finalizers run in a trap context, where a Mutex may not be taken;
        # an Integer += has no interrupt check inside it on MRI, so no two
        # threads interleave one.
        def live_delta(delta)
          @live += delta
        end
      end

      # Yields the pointer under the lock; raises InvalidArgument once closed.
      def use
        @lock.synchronize do
          pointer = @box[0]
          raise Slidelimit.invalid("limiter", "is closed") unless pointer

          yield pointer
        end
      end

      # Yields the pointer under the lock and returns true; false once closed.
      def use_if_open
        @lock.synchronize do
          pointer = @box[0]
          return false unless pointer

          yield pointer
          true
        end
      end

      def close
        free = nil
        @lock.synchronize do
          free = @box[0]
          @box[0] = nil
        end
        return unless free

        Native.public_send(@free_function, free)
        Handle.live_delta(-1)
      end

      def closed?
        @box[0].nil?
      end
    end
  end
end
