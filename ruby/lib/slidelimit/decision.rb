# frozen_string_literal: true

module Slidelimit
  # What a check answered; frozen. Times are milliseconds.
  #
  # - allowed?        the permits were recorded (acquire) or would be (peek)
  # - remaining       permits of cost 1 that would still pass at now_ms
  # - retry_after_ms  0 when allowed; else the wait after which the same
  #                   request passes, assuming no other traffic
  # - reset_after_ms  until the key holds nothing that still counts
  # - now_ms          the time of the decision (Redis TIME, or the caller's)
  # - denied_by       for a denial by a policy of several limits, the index
  #                   (from 0, in Policy#limits) of the limit that denied
  #                   with the longest retry; nil when allowed and for a
  #                   policy of one limit
  class Decision
    include Value

    attr_reader :remaining, :retry_after_ms, :reset_after_ms, :now_ms, :denied_by

    # For tests and fakes; checked by name (the limiters' decisions come
    # from core through from_native and from_words, which skip this).
    def initialize(allowed:, remaining:, retry_after_ms:, reset_after_ms:, now_ms:, denied_by: nil)
      raise Slidelimit.invalid("allowed", "must be true or false, got #{allowed.inspect}") unless [true, false].include?(allowed)

      fill(allowed, Core.uint64("remaining", remaining), Core.uint64("retry_after_ms", retry_after_ms),
           Core.uint64("reset_after_ms", reset_after_ms), Core.uint64("now_ms", now_ms),
           denied_by.nil? ? nil : Core.uint64("denied_by", denied_by))
    end

    def allowed?
      @allowed
    end

    def denied?
      !@allowed
    end

    # retry_after_ms in seconds (a Float), for sleep and Sidekiq's perform_in.
    def retry_after
      @retry_after_ms / 1000.0
    end

    def to_h
      { allowed: @allowed, remaining: @remaining, retry_after_ms: @retry_after_ms,
        reset_after_ms: @reset_after_ms, now_ms: @now_ms, denied_by: @denied_by }
    end

    # Reads a struct slidelimit_decision that core wrote: the bool, then the
    # four uint64_t fields back to back, then denied_by (-1: none).
    def self.from_native(pointer)
      remaining, retry_after, reset_after, now = pointer.get_array_of_uint64(REMAINING, 4)
      denied_by = pointer.get_int32(DENIED_BY)
      d = allocate
      d.send(:fill, pointer.get_uint8(ALLOWED) != 0, remaining, retry_after, reset_after, now,
             denied_by.negative? ? nil : denied_by)
    end

    # Reads the SLIDELIMIT_DECISION_WORDS words core wrote: allowed (1 or
    # 0), the four times and counts, denied_by + 1 (0: none) (one read).
    def self.from_words(pointer)
      allowed, remaining, retry_after, reset_after, now, by = pointer.get_array_of_uint64(0, Native::DECISION_WORDS)
      allocate.send(:fill, allowed != 0, remaining, retry_after, reset_after, now, by.zero? ? nil : by - 1)
    end

    private def fill(allowed, remaining, retry_after_ms, reset_after_ms, now_ms, denied_by)
      @allowed = allowed
      @remaining = remaining
      @retry_after_ms = retry_after_ms
      @reset_after_ms = reset_after_ms
      @now_ms = now_ms
      @denied_by = denied_by
      freeze
    end

    ALLOWED = Native::DecisionStruct.offset_of(:allowed)
    REMAINING = Native::DecisionStruct.offset_of(:remaining)
    DENIED_BY = Native::DecisionStruct.offset_of(:denied_by)
    # from_native reads the four uint64_t fields as one array.
    unless %i[retry_after_ms reset_after_ms now_ms].each_with_index.all? do |f, i|
      Native::DecisionStruct.offset_of(f) == REMAINING + (8 * (i + 1))
    end
      raise LoadError, "slidelimit: struct slidelimit_decision has an unexpected layout"
    end
  end
end
