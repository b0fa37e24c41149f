# Ruby binding (ruby/: the gem `slidelimit`, ffi-c's shared library loaded
# with ruby-ffi; Redis through redis-rb; a Sidekiq middleware). Ruby and its
# gems come from Debian's packages (scripts/deps.sh). See docs/ruby.md.

TEST_TARGETS += test-ruby
BENCH_TARGETS += bench-ruby
# drivers/ruby (docs/driver.md) runs ruby/driver/slidelimit-driver.rb.
DRIVER_TARGETS += driver-ruby
CONFORMANCE_BINDINGS += ruby ruby:memory

# Every test file in one minitest run (one summary line for CI).
RUBY_TESTS := ruby -Iruby/test -e 'ARGV.each { |f| require File.expand_path(f) }' ruby/test/test_*.rb

.PHONY: driver-ruby test-ruby test-ruby-package bench-ruby

# The gem loads target/release/libslidelimit_ffi.so (the cdylib).
driver-ruby: deps
	$(CARGO) build --release -p slidelimit-ffi

# A hang guard (scripts/with-deadline.sh), far above the suite's time
# (43 s here on 2026-12-05, the servers' start included).
RUBY_TESTS_DEADLINE_S ?= 600
# minitest against a fresh Redis and a six-node Cluster (the Sidekiq tests
# start a real Sidekiq process on that Redis); afterwards no key the tests
# left may lack a TTL. Then the packaging test.
test-ruby: driver-ruby
	scripts/with-redis.sh scripts/with-cluster.sh scripts/with-ttl-check.sh \
	  scripts/with-deadline.sh $(RUBY_TESTS_DEADLINE_S) TERM $(RUBY_TESTS)
	$(MAKE) --no-print-directory test-ruby-package

# gem build with the shared library inside, installed into an empty GEM_HOME,
# checked against a real Redis from outside the repository.
test-ruby-package: driver-ruby
	scripts/with-redis.sh ruby/scripts/package-check.sh

# acquire against raw redis-rb EVALSHA of the same script, as a ratio.
bench-ruby: driver-ruby
	scripts/with-redis.sh ruby ruby/bench/bench.rb
