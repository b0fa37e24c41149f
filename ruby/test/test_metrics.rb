# frozen_string_literal: true

require_relative "test_helper"
require "prometheus/client"
require "prometheus/client/formats/text"
require "tmpdir"

# The metrics every binding offers, in Debian's prometheus-client-mmap.
class TestMetrics < Minitest::Test
  include TestHelper

  def setup
    @dir = Dir.mktmpdir("slidelimit-metrics")
    Prometheus::Client.configuration.multiprocess_files_dir = @dir
    Prometheus::Client.reinitialize_on_pid_change(force: true) if Prometheus::Client.respond_to?(:reinitialize_on_pid_change)
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def test_names_help_and_buckets_are_cores
    m = Slidelimit::Metrics.new
    assert_equal :ratelimit_allowed_total, m.allowed.name
    assert_equal :ratelimit_denied_total, m.denied.name
    assert_equal :ratelimit_wait_seconds, m.wait.name
    assert_equal "Acquires allowed by the rate limiter.", m.allowed.docstring
    assert_equal "Acquires denied by the rate limiter.", m.denied.docstring
    assert_equal "retry_after handed to denied callers, in seconds.", m.wait.docstring
    assert_equal [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 600.0],
                 Slidelimit::Metrics.buckets_of(Slidelimit::Native::METRIC_WAIT_SECONDS)
  end

  def test_acquires_are_counted_and_peeks_are_not
    m = Slidelimit::Metrics.new(tenant_label: true)
    p = Slidelimit::Policy.new(resource: "geocode", limit: 2, window_ms: 1000)
    l = Slidelimit::Limiter.memory(p, metrics: m)
    3.times { l.acquire_at("t-1", 1000) }
    l.acquire_at("t-2", 1000)
    l.peek("t-1", now_ms: 1000)
    assert_equal 2, m.allowed.get(resource: "geocode", tenant: "t-1")
    assert_equal 1, m.allowed.get(resource: "geocode", tenant: "t-2")
    assert_equal 1, m.denied.get(resource: "geocode", tenant: "t-1")
    text = m.text
    assert_includes text, "# HELP ratelimit_denied_total Acquires denied by the rate limiter."
    # The one denial waited 1 s: in the 1 s bucket, not the 0.5 s one.
    assert_includes text, %(ratelimit_allowed_total{resource="geocode",tenant="t-1"} 2\n)
    assert_includes text, %(ratelimit_denied_total{resource="geocode",tenant="t-1"} 1\n)
    assert_includes text, %(ratelimit_wait_seconds_bucket{resource="geocode",le="1"} 1\n)
    assert_includes text, %(ratelimit_wait_seconds_bucket{resource="geocode",le="0.5"} 0\n)
    assert_includes text, %(ratelimit_wait_seconds_bucket{resource="geocode",le="+Inf"} 1\n)
    assert_includes text, %(ratelimit_wait_seconds_sum{resource="geocode"} 1\n)
    assert_includes text, %(ratelimit_wait_seconds_count{resource="geocode"} 1\n)
    assert_includes text, "# TYPE ratelimit_wait_seconds histogram\n"
  end

  def test_tenant_label_is_off_by_default
    m = Slidelimit::Metrics.new
    refute m.tenant_label?
    l = Slidelimit::Limiter.memory(Slidelimit::Policy.new(resource: "geocode", limit: 1, window_ms: 1000), metrics: m)
    l.acquire_at("a", 1)
    l.acquire_at("b", 1)
    assert_equal 2, m.allowed.get(resource: "geocode")
    refute_includes m.text, "tenant="
  end

  # A registry the metrics cannot be made in, or a tenant_label that is no
  # boolean, is refused when the Metrics is made, naming the option.
  def test_registry_and_tenant_label_are_checked_when_made
    [5, "x", {}, Object.new, Prometheus::Client::Registry, false].each do |registry|
      e = assert_raises(Slidelimit::InvalidArgument, registry.inspect) { Slidelimit::Metrics.new(registry: registry) }
      assert_equal "registry", e.field
      assert e.message.start_with?("registry: "), e.message
    end
    ["no", 0, :off, [], nil, "true"].each do |label|
      e = assert_raises(Slidelimit::InvalidArgument, label.inspect) { Slidelimit::Metrics.new(tenant_label: label) }
      assert_equal "tenant_label", e.field
    end
    registry = Prometheus::Client::Registry.new
    assert_same registry, Slidelimit::Metrics.new(registry: registry, tenant_label: true).registry
    refute Slidelimit::Metrics.new(registry: nil, tenant_label: false).tenant_label?
  end

  # One tenant, whatever encoding its name came in (a binary String from a
  # header, or Latin-1): one series, and the text still joins.
  def test_a_tenant_in_any_encoding_is_one_series
    m = Slidelimit::Metrics.new(tenant_label: true)
    l = Slidelimit::Limiter.memory(Slidelimit::Policy.new(resource: "geo", limit: 5, window_ms: 1000), metrics: m)
    ["é", "é".b, "é".encode(Encoding::ISO_8859_1)].each { |tenant| l.acquire_at(tenant, 1) }
    assert_equal 3, m.allowed.get(resource: "geo", tenant: "é")
    assert_includes m.text, %(ratelimit_allowed_total{resource="geo",tenant="é"} 3\n)
  end

  def test_label_values_are_escaped_and_served_over_rack
    m = Slidelimit::Metrics.new(tenant_label: true)
    l = Slidelimit::Limiter.memory(Slidelimit::Policy.new(resource: "geocode", limit: 1, window_ms: 1000), metrics: m)
    l.acquire_at(%(a"b\\c\nd), 1)
    status, headers, body = m.rack_app.call({})
    assert_equal 200, status
    assert_equal "text/plain; version=0.0.4", headers["Content-Type"]
    assert_includes body.join, %(ratelimit_allowed_total{resource="geocode",tenant="a\\"b\\\\c\\nd"} 1\n)
  end
end
