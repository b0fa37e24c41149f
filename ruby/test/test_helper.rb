# frozen_string_literal: true

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "minitest/autorun"
require "securerandom"
require "slidelimit"

# scripts/with-deadline.sh stops a hung run with TERM: say where every thread
# was, which Ruby's own TERM handling does not.
Signal.trap("TERM") do
  Thread.list.each do |thread|
    warn "--- #{thread.inspect}", *thread.backtrace
  end
  exit!(143)
end

module TestHelper
  # The servers scripts/with-redis.sh and scripts/with-cluster.sh started. A
  # test that needs one fails without it: nothing is skipped.
  def redis_url
    ENV.fetch("SLIDELIMIT_TEST_REDIS_URL") { flunk "SLIDELIMIT_TEST_REDIS_URL is not set: run under scripts/with-redis.sh" }
  end

  def cluster_urls
    urls = ENV.fetch("SLIDELIMIT_TEST_CLUSTER_URLS") do
      flunk "SLIDELIMIT_TEST_CLUSTER_URLS is not set: run under scripts/with-cluster.sh"
    end
    urls.split(",").map(&:strip)
  end

  # Runs the block in a forked child; what it returned, as a String.
  def in_forked_child
    reader, writer = IO.pipe
    pid = fork do
      reader.close
      writer.write(yield.to_s)
      writer.close
      exit!(0)
    end
    writer.close
    reader.read
  ensure
    Process.wait(pid) if pid
  end

  def policy(**overrides)
    Slidelimit::Policy.new(**{ resource: "res-#{SecureRandom.hex(4)}", limit: 3, window_ms: 1000 }.merge(overrides))
  end

  def tenant
    "t-#{SecureRandom.hex(6)}"
  end

  def decision(allowed, remaining, retry_after_ms, reset_after_ms, now_ms)
    Slidelimit::Decision.new(allowed: allowed, remaining: remaining, retry_after_ms: retry_after_ms,
                             reset_after_ms: reset_after_ms, now_ms: now_ms)
  end
end
