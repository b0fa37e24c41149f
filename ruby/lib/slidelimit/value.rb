# frozen_string_literal: true

module Slidelimit
  # Equality, hashing and inspect by value (to_h), for the frozen value
  # objects Policy and Decision.
  module Value
    def ==(other)
      other.is_a?(self.class) && to_h == other.to_h
    end
    alias eql? ==

    def hash
      to_h.hash
    end

    def inspect
      "#<#{self.class.name} #{to_h.map { |k, v| "#{k}=#{v.inspect}" }.join(' ')}>"
    end
  end
end
