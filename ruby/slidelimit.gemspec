# frozen_string_literal: true

require_relative "lib/slidelimit/version"

# `make dist-ruby` (and `make test-ruby-package`) builds the gem from a staging copy of ruby/ that carries
# ffi-c's shared library under lib/slidelimit/native/<platform>/; the gem is
# then for that platform. Built from ruby/ itself (no library), it is a pure
# Ruby gem that needs SLIDELIMIT_FFI_LIB.
Gem::Specification.new do |spec|
  spec.name = "slidelimit"
  spec.version = Slidelimit::VERSION
  spec.summary = "Distributed sliding-window rate limiting on Redis, shared with Rust, Go, Node and Python workers"
  spec.description = "The Ruby binding of slidelimit: slidelimit-core's C ABI loaded with ruby-ffi, " \
                     "Redis I/O through redis-rb (standalone and Cluster), a Sidekiq middleware that " \
                     "defers over-limit jobs without spending retries, and Prometheus metrics."
  spec.authors = ["slidelimit"]
  spec.license = "Apache-2.0"
  spec.required_ruby_version = ">= 3.1"
  spec.homepage = "https://github.com/slidelimit/slidelimit"

  native = Dir.glob("lib/slidelimit/native/*/*", base: __dir__)
  spec.files = Dir.glob("lib/**/*.rb", base: __dir__) + native
  spec.require_paths = ["lib"]
  spec.platform = Gem::Platform.local unless native.empty?

  spec.add_dependency "ffi", ">= 1.15", "< 2"
  spec.add_dependency "redis", ">= 4.8", "< 5"
  # Optional, loaded when used: sidekiq (Slidelimit::Sidekiq),
  # prometheus-client-mmap (Slidelimit::Metrics), connection_pool.
end
