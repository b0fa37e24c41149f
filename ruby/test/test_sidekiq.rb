# frozen_string_literal: true

require_relative "test_helper"
require "json"
require "socket"
require "tmpdir"
require "sidekiq"
require "sidekiq/api"
require "slidelimit/sidekiq"

# Sidekiq 6.4 ignores SADD's reply; redis-rb 4.8 warns about it on every push.
Redis.sadd_returns_boolean = false

# The middleware in a real Sidekiq 6.4 process (test/sidekiq/app.rb) on a
# real Redis, with the scheduler's poll lowered to 0.2 s on average.
class TestSidekiq < Minitest::Test
  include TestHelper

  APP = File.expand_path("sidekiq/app.rb", __dir__)

  def setup
    # Its own database, so Sidekiq's sets hold only this test's jobs.
    @url = "#{redis_url.chomp('/')}/3"
    @redis = Redis.new(url: @url)
    @redis.flushdb
    Sidekiq.configure_client { |config| config.redis = { url: @url } }
    @resource = "sidekiq-#{SecureRandom.hex(4)}"
    @outage_port = free_port
    @log = File.join(Dir.tmpdir, "slidelimit-sidekiq-#{Process.pid}-#{SecureRandom.hex(3)}.log")
    @sidekiq = Process.spawn(
      { "SLIDELIMIT_TEST_REDIS_URL" => @url, "TEST_RESOURCE" => @resource,
        "TEST_OUTAGE_PORT" => @outage_port.to_s, "TEST_WINDOW_MS" => "1000" },
      "sidekiq", "-r", APP, "-c", "5", "-q", "default", "-t", "5",
      out: @log, err: @log
    )
    wait_for("the Sidekiq process to start", 30) { Sidekiq::ProcessSet.new.size.positive? }
  end

  def teardown
    if @sidekiq
      Process.kill("TERM", @sidekiq)
      Process.wait(@sidekiq)
    end
    if @outage_redis
      Process.kill("TERM", @outage_redis)
      Process.wait(@outage_redis)
    end
    @redis&.flushdb
    @redis&.close
    File.delete(@log) if @log && File.exist?(@log)
  end

  # Four jobs of one tenant, one permit per second: every round one runs and
  # the rest go back on the schedule, so the last one is deferred at least
  # three times; each body runs exactly once, nothing is retried or dead.
  def test_denied_jobs_are_deferred_then_run_exactly_once
    jids = Array.new(4) do |n|
      Sidekiq::Client.push("class" => "LimitedWorker", "args" => ["tenant-a", n], "queue" => "default")
    end
    wait_for("four job bodies", 60) { @redis.llen("test:bodies") >= 4 }
    sleep 1.5 # a fifth run would show up by now
    runs = @redis.lrange("test:runs", 0, -1).map { |l| JSON.parse(l) }
    attempts = @redis.lrange("test:attempts", 0, -1).map { |l| JSON.parse(l) }

    assert_equal jids.sort, runs.map { |r| r["jid"] }.sort, "each job ran exactly once: #{runs}"
    assert_equal 4, @redis.llen("test:bodies")
    assert_equal ["tenant-a:0", "tenant-a:1", "tenant-a:2", "tenant-a:3"], @redis.lrange("test:bodies", 0, -1).sort
    deferrals = runs.map { |r| r.fetch("slidelimit_deferrals", 0) }
    assert_operator deferrals.max, :>=, 3, "the last job waited three rounds at least: #{runs}"
    # Every attempt but the runs was a deferral of the same jid.
    assert_equal attempts.length - 4, deferrals.sum, attempts.inspect
    assert_equal jids.sort, attempts.map { |a| a["jid"] }.uniq.sort
    # Never an attempt of Sidekiq's retry machinery.
    (runs + attempts).each { |r| assert_includes [nil, 0], r["retry_count"], r.inspect }
    assert_equal 0, Sidekiq::RetrySet.new.size
    assert_equal 0, Sidekiq::DeadSet.new.size
    assert_equal 0, Sidekiq::ScheduledSet.new.size
    # The limiter spaced the bodies a window apart (Redis TIME, same host).
    times = runs.map { |r| r["at_ms"] }.sort
    times.each_cons(2) { |a, b| assert_operator b - a, :>=, 900, times.inspect }
  end

  # The limiter's Redis is down: the job is deferred with backoff, counted
  # apart from rate-limit deferrals; once that Redis is up it runs once.
  def test_outage_defers_with_backoff_then_runs_once
    jid = Sidekiq::Client.push("class" => "OutageWorker", "args" => ["tenant-b"], "queue" => "default")
    wait_for("three deferrals during the outage", 60) { @redis.llen("test:attempts") >= 3 }
    assert_equal 0, @redis.llen("test:bodies"), "the body must not run while the limiter is unavailable"
    @outage_redis = Process.spawn("redis-server", "--port", @outage_port.to_s, "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no", out: File::NULL, err: File::NULL)
    wait_for_own_outage_redis
    wait_for("the job body", 60) { @redis.llen("test:bodies") >= 1 }
    sleep 1
    runs = @redis.lrange("test:runs", 0, -1).map { |l| JSON.parse(l) }
    assert_equal [jid], runs.map { |r| r["jid"] }
    assert_operator runs[0]["slidelimit_outage_deferrals"], :>=, 3
    assert_nil runs[0]["slidelimit_deferrals"]
    assert_includes [nil, 0], runs[0]["retry_count"]
    assert_equal 0, Sidekiq::RetrySet.new.size
    assert_equal 0, Sidekiq::DeadSet.new.size
  end

  private

  def wait_for(what, seconds)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
    until yield
      if @sidekiq && Process.wait(@sidekiq, Process::WNOHANG)
        @sidekiq = nil
        flunk "the Sidekiq process exited while waiting for #{what}; its log:\n#{File.read(@log)[-4000..] || File.read(@log)}"
      end
      if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        flunk "timed out waiting for #{what}; sidekiq log:\n#{File.exist?(@log) ? File.read(@log)[-4000..] || File.read(@log) : '(none)'}"
      end
      sleep 0.05
    end
  end

  # The port was free when picked: the server on it must be the one spawned
  # here (INFO process_id), or the test would end another process's outage.
  def wait_for_own_outage_redis
    wait_for("the outage redis-server on port #{@outage_port}", 30) do
      if Process.wait(@outage_redis, Process::WNOHANG)
        @outage_redis = nil
        flunk "the outage redis-server exited: port #{@outage_port} was taken meanwhile?"
      end
      begin
        probe = Redis.new(host: "127.0.0.1", port: @outage_port, timeout: 0.5)
        probe.info("server")["process_id"].to_i == @outage_redis
      rescue Redis::BaseConnectionError
        false
      ensure
        probe&.close
      end
    end
  end

  def free_port
    s = TCPServer.new("127.0.0.1", 0)
    port = s.addr[1]
    s.close
    port
  end
end
