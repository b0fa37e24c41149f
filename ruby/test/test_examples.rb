# frozen_string_literal: true

require_relative "test_helper"
require "open3"
require "rbconfig"

# The examples in ruby/examples (docs/ruby.md shows them) run as written.
class TestExamples < Minitest::Test
  include TestHelper

  EXAMPLES = File.expand_path("../examples", __dir__)
  LIB = File.expand_path("../lib", __dir__)

  def test_basic_acquires_on_redis
    out, status = Open3.capture2e({ "REDIS_URL" => redis_url }, RbConfig.ruby, "-I", LIB, File.join(EXAMPLES, "basic.rb"))
    assert status.success?, out
    assert_match(/\Aallowed, \d+ left in the window\n\z/, out)
  end

  def test_basic_reports_an_unreachable_redis
    out, status = Open3.capture2e({ "REDIS_URL" => "redis://127.0.0.1:1/" }, RbConfig.ruby, "-I", LIB,
                                  File.join(EXAMPLES, "basic.rb"))
    assert status.success?, out
    assert_match(/\Aunavailable: redis unavailable: could not connect/, out)
  end

  def test_sidekiq_worker_is_limited
    out, status = Open3.capture2e({ "REDIS_URL" => redis_url }, RbConfig.ruby, "-I", LIB, "-e", <<~RUBY)
      require #{File.join(EXAMPLES, 'sidekiq_worker.rb').inspect}
      config = GeocodeWorker.slidelimit_config
      raise "no limiter" unless config.limiter.equal?(GEOCODE)
      raise "tenant" unless config.tenant.call({ "args" => ["key-1", "Main St"] }) == "key-1"
      puts config.max_deferrals
    RUBY
    assert status.success?, out
    assert_equal "50\n", out
  end
end
