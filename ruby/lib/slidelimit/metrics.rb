# frozen_string_literal: true

module Slidelimit
  # The Prometheus metrics every slidelimit binding offers, with core's
  # names, help texts, labels and buckets (read through the C ABI):
  #
  #   ratelimit_allowed_total  counter    resource (, tenant)  acquires admitted
  #   ratelimit_denied_total   counter    resource (, tenant)  acquires denied
  #   ratelimit_wait_seconds   histogram  resource             retry_after of denials
  #   ratelimit_local_denied_total  counter  resource (, tenant)  denials the local deny
  #                                                          cache answered (also in denied_total)
  #
  # Registered in a Prometheus::Client registry of Debian's
  # ruby-prometheus-client-mmap (the prometheus-client-mmap gem), opt-in:
  #
  #   metrics = Slidelimit::Metrics.new(registry: Prometheus::Client.registry)
  #   limiter = Slidelimit::Limiter.new(redis, policy, metrics: metrics)
  #
  # Serve the registry with that gem's Rack exporter
  # (Prometheus::Client::Rack::Exporter) or Slidelimit::Metrics#text.
  # Peeks are not counted.
  class Metrics
    attr_reader :allowed, :denied, :wait, :local_denied, :registry

    # What #initialize calls on a registry.
    REGISTRY_METHODS = %i[counter histogram].freeze

    # registry: a Prometheus::Client::Registry (nil: a new one); anything
    # else that answers counter and histogram as it does.
    # tenant_label: true or false, add the tenant label to the counters; leave
    # it off when tenants are unbounded (every tenant is a new time series).
    def initialize(registry: nil, tenant_label: false)
      require "prometheus/client"
      # Checked here, not as a NoMethodError from the first metric made.
      unless registry.nil? || REGISTRY_METHODS.all? { |m| registry.respond_to?(m) }
        raise Slidelimit.invalid("registry", "must be a Prometheus::Client::Registry (respond to " \
                                             "#{REGISTRY_METHODS.join(' and ')}), got #{registry.class} " \
                                             "(#{registry.inspect})")
      end
      unless [true, false].include?(tenant_label)
        raise Slidelimit.invalid("tenant_label", "must be true or false, got #{tenant_label.class} " \
                                                 "(#{tenant_label.inspect})")
      end

      @registry = registry || Prometheus::Client::Registry.new
      @tenant_label = tenant_label
      @allowed = @registry.counter(Metrics.name_of(Native::METRIC_ALLOWED_TOTAL).to_sym,
                                   Metrics.help_of(Native::METRIC_ALLOWED_TOTAL))
      @denied = @registry.counter(Metrics.name_of(Native::METRIC_DENIED_TOTAL).to_sym,
                                  Metrics.help_of(Native::METRIC_DENIED_TOTAL))
      @wait = @registry.histogram(Metrics.name_of(Native::METRIC_WAIT_SECONDS).to_sym,
                                  Metrics.help_of(Native::METRIC_WAIT_SECONDS), {},
                                  Metrics.buckets_of(Native::METRIC_WAIT_SECONDS))
      @local_denied = @registry.counter(Metrics.name_of(Native::METRIC_LOCAL_DENIED_TOTAL).to_sym,
                                        Metrics.help_of(Native::METRIC_LOCAL_DENIED_TOTAL))
      @counter_labels = Metrics.labels_of(Native::METRIC_ALLOWED_TOTAL, @tenant_label).map(&:to_sym)
      @local_labels = Metrics.labels_of(Native::METRIC_LOCAL_DENIED_TOTAL, @tenant_label).map(&:to_sym)
      @wait_labels = Metrics.labels_of(Native::METRIC_WAIT_SECONDS, false).map(&:to_sym)
    end

    def tenant_label?
      @tenant_label
    end

    # Records one acquire's decision (Limiters made with metrics: call it).
    def observe(resource, tenant, decision)
      values = { resource: Metrics.label(resource), tenant: Metrics.label(tenant) }
      counter_labels = @counter_labels.to_h { |label| [label, values.fetch(label)] }
      if decision.allowed?
        @allowed.increment(counter_labels)
      else
        @denied.increment(counter_labels)
        @wait.observe(@wait_labels.to_h { |label| [label, values.fetch(label)] },
                      Native.slidelimit_metric_wait_seconds(decision.retry_after_ms))
      end
    end

    # Records a denial the limiter's deny cache answered without a Redis
    # call (Limiters call it besides #observe, which counts it as a denial).
    def observe_local_denial(resource, tenant, _decision)
      values = { resource: Metrics.label(resource), tenant: Metrics.label(tenant) }
      @local_denied.increment(@local_labels.to_h { |label| [label, values.fetch(label)] })
    end

    CONTENT_TYPE = "text/plain; version=0.0.4"

    # The four metrics of this process in Prometheus's text format (0.0.4),
    # with core's help texts. (prometheus-client-mmap's own exporters read
    # its mmap files across processes, but write "Multiprocess metric" as
    # every help text, and its single-process Text.marshal cannot write a
    # histogram.)
    def text
      out = +""
      [[@allowed, @counter_labels], [@denied, @counter_labels], [@local_denied, @local_labels]].each do |counter, names|
        header(out, counter, "counter")
        samples(counter, names).each do |labels, value|
          out << sample(counter.name, labels, value.get)
        end
      end
      header(out, @wait, "histogram")
      samples(@wait, @wait_labels).each do |labels, value|
        value.get.each { |le, count| out << sample("#{@wait.name}_bucket", labels.merge(le: number(le)), count) }
        out << sample("#{@wait.name}_bucket", labels.merge(le: "+Inf"), value.total.get)
        out << sample("#{@wait.name}_sum", labels, value.sum.get)
        out << sample("#{@wait.name}_count", labels, value.total.get)
      end
      out
    end

    # A Rack endpoint serving #text: `run metrics.rack_app` in a config.ru,
    # or mount it at /metrics.
    def rack_app
      ->(_env) { [200, { "Content-Type" => CONTENT_TYPE }, [text]] }
    end

    # A label value as UTF-8 text. Core took the name's bytes as UTF-8 (a
    # binary String from a socket, or one in another encoding, converted), so
    # "é" and "é".b are one tenant: one series, and #text never meets two
    # encodings it cannot join.
    def self.label(value)
      return value if value.encoding == Encoding::UTF_8

      utf8 = Core.utf8("label", value)
      utf8.encoding == Encoding::UTF_8 ? utf8 : utf8.dup.force_encoding(Encoding::UTF_8)
    end

    def self.static_string(function, metric)
      s = Core.scratch
      code = Native.public_send(function, metric, s.out, s.out2)
      raise Slidelimit.error_for(code, "#{function}(#{metric}) failed") unless code == Native::RESULT_OK

      s.out.read_pointer.get_bytes(0, s.out2.read(:size_t)).force_encoding(Encoding::UTF_8)
    end

    def self.name_of(metric)
      static_string(:slidelimit_metric_name, metric)
    end

    def self.help_of(metric)
      static_string(:slidelimit_metric_help, metric)
    end

    def self.labels_of(metric, with_tenant)
      s = Core.scratch
      count = FFI::MemoryPointer.new(:size_t)
      code = Native.slidelimit_metric_label_count(metric, with_tenant, count)
      raise Slidelimit.error_for(code, "slidelimit_metric_label_count failed") unless code == Native::RESULT_OK

      Array.new(count.read(:size_t)) do |i|
        code = Native.slidelimit_metric_label(metric, with_tenant, i, s.out, s.out2, s.msg, Native::MSG_CAP,
                                              s.msg_len, s.field)
        Core.raise_failure(code, s) unless code == Native::RESULT_OK
        s.out.read_pointer.get_bytes(0, s.out2.read(:size_t)).force_encoding(Encoding::UTF_8)
      end
    end

    def self.buckets_of(metric)
      s = Core.scratch
      code = Native.slidelimit_metric_buckets(metric, s.out, s.out2)
      raise Slidelimit.error_for(code, "slidelimit_metric_buckets failed") unless code == Native::RESULT_OK

      s.out.read_pointer.get_array_of_double(0, s.out2.read(:size_t))
    end

    private

    def header(out, metric, type)
      out << "# HELP #{metric.name} #{metric.docstring}\n# TYPE #{metric.name} #{type}\n"
    end

    # Label sets with exactly the metric's labels (the client also keeps an
    # empty default set), in a stable order.
    def samples(metric, label_names)
      metric.values.select { |labels, _| labels.keys.sort == label_names.sort }.sort_by { |labels, _| labels.values.map(&:to_s) }
    end

    def sample(name, labels, value)
      pairs = labels.map { |k, v| %(#{k}="#{escape(v.to_s)}") }.join(",")
      "#{name}{#{pairs}} #{number(value)}\n"
    end

    def escape(value)
      value.gsub(/[\\\n"]/) { |c| c == "\n" ? "\\n" : "\\#{c}" }
    end

    def number(value)
      value.is_a?(Float) && value.finite? && value == value.floor && value.abs < 1e15 ? value.to_i.to_s : value.to_s
    end
  end
end
