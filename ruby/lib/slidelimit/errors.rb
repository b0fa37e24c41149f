# frozen_string_literal: true

module Slidelimit
  # Every failure of slidelimit is a Slidelimit::Error: one class per core
  # code (the numbers are the C ABI's), each with #code (a Symbol such as
  # :invalid_argument), #field (the field at fault, or nil) and core's message.
  #
  #   rescue Slidelimit::Unavailable   # Redis down or slow: fail open or closed
  #   rescue Slidelimit::Error         # anything slidelimit raised
  #   rescue ArgumentError             # catches InvalidArgument too
  #
  # Slidelimit::Error is a module, not a class: InvalidArgument has to be an
  # ArgumentError (bad input is, in Ruby), and a class has one superclass.
  # So InvalidArgument subclasses ArgumentError, the other classes subclass
  # StandardError, and every one includes this module; `rescue` and
  # `is_a?` match included modules exactly as they match classes.
  module Error
    # The core code, e.g. :invalid_argument.
    def code
      self.class::CODE
    end

    # The field the error is about ("tenant", "cost", ...), or nil.
    attr_reader :field

    # The error the Redis client raised, when there was one.
    attr_reader :redis_error

    def initialize(message = nil, field: nil, redis_error: nil)
      @field = field
      @redis_error = redis_error
      super(message || code.to_s)
    end
  end

  # A policy, tenant, cost, time or option that breaks the contract; #field
  # names it. Also an ArgumentError.
  class InvalidArgument < ArgumentError
    include Error
    CODE = :invalid_argument
  end

  # Redis could not be reached or did not answer within the client's timeout,
  # or is in a transient state (LOADING, BUSY, a failover). Never a decision:
  # the check may or may not have been recorded.
  class Unavailable < StandardError
    include Error
    CODE = :unavailable
  end

  # Redis rejected or failed the script for another reason. (Not Ruby's
  # ::ScriptError, which is no StandardError: this one is.)
  class ScriptError < StandardError
    include Error
    CODE = :script_error
  end

  # The key holds data slidelimit did not write, or another type.
  class WrongType < StandardError
    include Error
    CODE = :wrong_type
  end

  # The reply was not the five consistent integers of the contract.
  class MalformedReply < StandardError
    include Error
    CODE = :malformed_reply
  end

  # The server's ACL refused a command or key (NOPERM).
  class PermissionDenied < StandardError
    include Error
    CODE = :permission_denied
  end

  # A bug in slidelimit.
  class Internal < StandardError
    include Error
    CODE = :internal
  end

  # The error class of each C ABI result code (1..7, core's numbers).
  ERROR_CLASSES = {
    1 => InvalidArgument, 2 => Unavailable, 3 => ScriptError, 4 => WrongType,
    5 => MalformedReply, 6 => PermissionDenied, 7 => Internal,
  }.freeze

  # An error for a C ABI result code, core's message and the field core
  # named beside it (the C ABI reports it; nothing reads it from the message).
  def self.error_for(code, message, field: nil, redis_error: nil)
    klass = ERROR_CLASSES[code]
    unless klass
      return Internal.new("the C ABI returned #{Native.slidelimit_result_name(code)} (#{code}): #{message}")
    end

    klass.new(message, field: field, redis_error: redis_error)
  end

  # An InvalidArgument made on the Ruby side, for a value of a type the C ABI
  # cannot carry (a Float, a negative or Bignum, a non-String tenant).
  def self.invalid(field, problem)
    InvalidArgument.new("#{field}: #{problem}", field: field)
  end
end
