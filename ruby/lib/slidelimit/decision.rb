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
  class Decision
    include Value

    attr_reader :remaining, :retry_after_ms, :reset_after_ms, :now_ms

    def initialize(allowed:, remaining:, retry_after_ms:, reset_after_ms:, now_ms:)
      fill(allowed, remaining, retry_after_ms, reset_after_ms, now_ms)
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
        reset_after_ms: @reset_after_ms, now_ms: @now_ms }
    end

    # Reads a struct slidelimit_decision that core wrote: the bool, then the
    # four uint64_t fields back to back (two reads; this runs on every check).
    def self.from_native(pointer)
      remaining, retry_after, reset_after, now = pointer.get_array_of_uint64(REMAINING, 4)
      d = allocate
      d.send(:fill, pointer.get_uint8(ALLOWED) != 0, remaining, retry_after, reset_after, now)
    end

    # Reads the SLIDELIMIT_DECISION_WORDS words core wrote: allowed (1 or
    # 0), then the four times and counts (one read).
    def self.from_words(pointer)
      allowed, remaining, retry_after, reset_after, now = pointer.get_array_of_uint64(0, Native::DECISION_WORDS)
      allocate.send(:fill, allowed != 0, remaining, retry_after, reset_after, now)
    end

    private def fill(allowed, remaining, retry_after_ms, reset_after_ms, now_ms)
      @allowed = allowed
      @remaining = remaining
      @retry_after_ms = retry_after_ms
      @reset_after_ms = reset_after_ms
      @now_ms = now_ms
      freeze
    end

    ALLOWED = Native::DecisionStruct.offset_of(:allowed)
    REMAINING = Native::DecisionStruct.offset_of(:remaining)
    # from_native reads the four uint64_t fields as one array.
    unless %i[retry_after_ms reset_after_ms now_ms].each_with_index.all? do |f, i|
      Native::DecisionStruct.offset_of(f) == REMAINING + (8 * (i + 1))
    end
      raise LoadError, "slidelimit: struct slidelimit_decision has an unexpected layout"
    end
  end
end
