# frozen_string_literal: true

module Slidelimit
  # The gem's version; a test checks it equals core's (Slidelimit.core_version).
  VERSION = "0.1.0"
end
