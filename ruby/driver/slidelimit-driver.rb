# frozen_string_literal: true

# The Ruby driver of docs/driver.md: the gem's public API behind JSON lines
# on stdin and stdout, for the shared conformance, audit and fault harnesses.
# It decides nothing: what it prints is what the gem returned or raised.
# drivers/ruby launches it.

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "json"
require "slidelimit"
require "connection_pool"

module SlidelimitDriver
  # A request the driver cannot read; answered with {"error":"protocol"}.
  class ProtocolError < StandardError; end

  TYPES = {
    string: ->(v) { v.is_a?(String) },
    number: ->(v) { v.is_a?(Numeric) },
    array: ->(v) { v.is_a?(Array) },
    boolean: ->(v) { [true, false].include?(v) },
    object: ->(v) { v.is_a?(Hash) },
  }.freeze

  # Threads of a `load` share one limiter and take connections from a pool.
  # A redis-rb Cluster client loads the slot map and COMMAND table when made
  # (about 0.15 s of CPU each), so the Cluster pool is smaller; each client
  # still has one call in flight at a time.
  POOL_SIZE = 64
  CLUSTER_POOL_SIZE = 2

  OK = '{"ok":true}'

  module_function

  # Every whole number up to 2^53 is a double, exactly.
  WHOLE_DOUBLES = 2**53

  # The field's value, or nil when absent (null counts as absent).
  # where: what the message names (the op).
  def field(req, name, type, required: false, where: req["op"])
    v = req[name]
    if v.nil?
      raise ProtocolError, "#{where}: #{name} is required" if required

      return nil
    end
    raise ProtocolError, "#{where}: #{name} must be a JSON #{type}" unless TYPES.fetch(type).call(v)
    # A JSON number is a double (docs/driver.md): a whole one up to 2^53
    # written as 3.0, 3e0 or -0.0 is that integer.
    return v.to_i if v.is_a?(Float) && v.finite? && v == v.floor && v.abs <= WHOLE_DOUBLES

    v
  end

  def decision_line(d)
    %({"allowed":#{d.allowed? ? 'true' : 'false'},"remaining":#{d.remaining},) +
      %("retry_after_ms":#{d.retry_after_ms},"reset_after_ms":#{d.reset_after_ms},"now_ms":#{d.now_ms}) +
      (d.denied_by.nil? ? "}" : %(,"denied_by":#{d.denied_by}}))
  end

  def error_line(e)
    JSON.generate({ "error" => e.code.to_s, "field" => e.field, "message" => e.message })
  end

  def ssl_params(url, ca_file)
    return {} unless ca_file || url.to_s.start_with?("rediss://")

    params = { verify_mode: OpenSSL::SSL::VERIFY_PEER }
    params[:ca_file] = ca_file if ca_file
    { ssl: true, ssl_params: params }
  end

  # A store: the memory engine, or a lazily filled pool of redis-rb clients
  # made by Slidelimit.redis (the gem's own timeout setting).
  def open_store(req)
    kind = field(req, "kind", :string, required: true)
    timeout_ms = field(req, "timeout_ms", :number)
    ca_file = field(req, "tls_ca_file", :string)
    options = timeout_ms.nil? ? {} : { timeout_ms: timeout_ms }
    case kind
    when "memory"
      { engine: Slidelimit::MemoryEngine.new }
    when "redis"
      url = field(req, "url", :string, required: true)
      options.merge!(ssl_params(url, ca_file))
      # Core's check of timeout_ms runs now; the clients connect lazily.
      Slidelimit.check_timeout_ms(timeout_ms) unless timeout_ms.nil?
      { pool: ConnectionPool.new(size: POOL_SIZE) { Slidelimit.redis(url: url, **options) }, pool_size: POOL_SIZE }
    when "cluster"
      urls = field(req, "urls", :array, required: true)
      unless !urls.empty? && urls.all? { |u| u.is_a?(String) }
        raise ProtocolError, "store: urls must be a non-empty list of strings"
      end

      options.merge!(ssl_params(urls[0], ca_file))
      Slidelimit.check_timeout_ms(timeout_ms) unless timeout_ms.nil?
      { pool: ConnectionPool.new(size: CLUSTER_POOL_SIZE) { Slidelimit.redis(cluster: urls, **options) },
        pool_size: CLUSTER_POOL_SIZE }
    else
      raise ProtocolError, "store: kind must be memory, redis or cluster, got #{kind.inspect}"
    end
  end

  def close_store(store)
    return unless store

    store[:pool]&.shutdown(&:close)
    store[:engine]&.close
  end

  SINGLE_FIELDS = %w[algorithm limit window_ms buckets].freeze

  # The fields each op takes (docs/driver.md); any other is refused, so that
  # a misspelt field is no silent default.
  KNOWN_FIELDS = {
    "hello" => [],
    "store" => %w[kind url urls timeout_ms tls_ca_file],
    "policy" => %w[namespace resource algorithm limit window_ms buckets limits deny_cache],
    "acquire" => %w[tenant cost],
    "acquire_at" => %w[tenant cost now_ms],
    "peek" => %w[tenant cost now_ms],
    "reset" => %w[tenant],
    "key" => %w[tenant],
    "load" => %w[lang tenant tenants cost concurrency start_at_ms end_at_ms active ramp_ms jitter_ms skew_ms out],
  }.transform_values { |names| names.freeze }.freeze

  def only_known(object, where, known)
    unknown = object.keys.find { |name| !known.include?(name) }
    raise ProtocolError, "#{where}: unknown field #{unknown.to_json}" if unknown
  end

  # One element of a policy's `limits` list, as a Slidelimit::Limit with the
  # fields as given (absent ones left to the gem's defaults).
  def limit_spec(item, index, count)
    raise ProtocolError, "policy: limits[#{index}] must be a JSON object" unless item.is_a?(Hash)

    where = "policy: limits[#{index}]"
    only_known(item, where, SINGLE_FIELDS)
    spec = {
      algorithm: field(item, "algorithm", :string, where: where),
      limit: field(item, "limit", :number, where: where),
      window_ms: field(item, "window_ms", :number, where: where),
      buckets: field(item, "buckets", :number, where: where),
    }.compact
    Slidelimit::Limit.new(**spec)
  rescue ArgumentError => e
    raise if e.is_a?(Slidelimit::Error)

    missing = e.message[/missing keywords?: :?(\w+)/, 1]
    raise unless missing
    # The gem refuses a list too long before it reads any limit.
    return Slidelimit::Limit.new(limit: 1, window_ms: 1) if count > Slidelimit::Native::MAX_LIMITS

    raise Slidelimit.invalid(count > 1 ? "limits[#{index}].#{missing}" : missing, "is required")
  end

  def build_limiter(store, req)
    limits = field(req, "limits", :array)
    deny_cache = field(req, "deny_cache", :boolean) || false
    policy = {
      namespace: field(req, "namespace", :string),
      resource: field(req, "resource", :string),
    }
    if limits
      both = SINGLE_FIELDS.find { |f| !req[f].nil? }
      raise ProtocolError, "policy: limits cannot be given with #{both}" if both

      policy[:limits] = limits.each_with_index.map { |item, i| limit_spec(item, i, limits.length) }
    else
      policy.merge!(algorithm: field(req, "algorithm", :string), limit: field(req, "limit", :number),
                    window_ms: field(req, "window_ms", :number), buckets: field(req, "buckets", :number))
    end
    begin
      policy = Slidelimit::Policy.new(**policy.compact)
    rescue ArgumentError => e
      raise if e.is_a?(Slidelimit::Error)

      # A required keyword left out (the gem has no default resource): Ruby's
      # own ArgumentError, reported as the field's.
      missing = e.message[/missing keywords?: :?(\w+)/, 1]
      raise unless missing

      raise Slidelimit.invalid(missing, "is required")
    end
    return Slidelimit::Limiter.memory(policy, engine: store[:engine]) if store[:engine]

    Slidelimit::Limiter.new(store[:pool], policy, deny_cache: deny_cache)
  end

  # The largest caller-clock skew a load takes (docs/driver.md): an hour.
  MAX_SKEW_MS = 3_600_000
  # The most tenants one load goes round (docs/driver.md).
  MAX_LOAD_TENANTS = 1_000

  # A load's tenant, or its tenants to go round.
  def load_tenants(req)
    tenants = field(req, "tenants", :array)
    return [field(req, "tenant", :string, required: true)] if tenants.nil?
    raise ProtocolError, "load: tenant and tenants are exclusive" unless req["tenant"].nil?
    unless tenants.length.between?(1, MAX_LOAD_TENANTS) && tenants.all? { |t| t.is_a?(String) }
      raise ProtocolError, "load: tenants must be a list of 1 to #{MAX_LOAD_TENANTS} strings"
    end

    tenants
  end

  def now_ms
    Process.clock_gettime(Process::CLOCK_REALTIME, :millisecond)
  end

  def sleep_ms(ms)
    sleep(ms / 1000.0) if ms.positive?
  end

  # How long a caller waits at now before it may call: 0 inside an active
  # interval, else until the next one starts (or the run ends).
  def idle_ms(active, end_at, now)
    return 0 if active.nil?

    upcoming = end_at
    active.each do |from, to|
      return 0 if from <= now && now < to

      upcoming = from if from > now && from < upcoming
    end
    upcoming - now
  end

  # Makes the pool's clients before the run starts, so that no caller pays
  # for a Cluster client's setup inside it. A failure here is left for the
  # calls to report, as a user's first call would.
  def warm(store, concurrency)
    return unless store[:pool]

    Array.new([concurrency, store[:pool_size]].min) do
      Thread.new do
        store[:pool].with { |_client| sleep 0.05 } # held, so each thread makes its own
      rescue StandardError
        nil
      end
    end.each(&:join)
  end

  # The whole request is read before the limiter (or its policy's error)
  # answers: `session.limiter` is asked for last.
  def run_load(session, req, store)
    lang = field(req, "lang", :string, required: true)
    tenants = load_tenants(req)
    cost = field(req, "cost", :number) || 1
    concurrency = field(req, "concurrency", :number, required: true)
    start_at = field(req, "start_at_ms", :number, required: true)
    end_at = field(req, "end_at_ms", :number, required: true)
    active = field(req, "active", :array)
    ramp_ms = field(req, "ramp_ms", :number) || 0
    jitter_ms = field(req, "jitter_ms", :number) || 0
    # Set: every call is acquire_at on the wall clock plus the skew (caller
    # time) instead of acquire on server time.
    skew_ms = field(req, "skew_ms", :number)
    out = field(req, "out", :string, required: true)
    raise ProtocolError, "load: concurrency must be a positive integer" unless concurrency.is_a?(Integer) && concurrency >= 1
    unless skew_ms.nil? || (skew_ms.is_a?(Integer) && skew_ms.abs <= MAX_SKEW_MS)
      raise ProtocolError, "load: skew_ms must be an integer within ±#{MAX_SKEW_MS}"
    end
    if active && !active.all? { |p| p.is_a?(Array) && p.length == 2 && p.all? { |t| t.is_a?(Numeric) } }
      raise ProtocolError, "load: active must be a list of [from, to] pairs of numbers"
    end
    limiter = session.limiter

    warm(store, concurrency)
    # More callers than the pool has clients: connection_pool hands a client
    # back to whichever thread asks first, and the caller that gave it back
    # asks again at once, so without a yield between calls the same few
    # callers keep the clients and the rest wait out the pool's 5 s timeout
    # (docs/ruby.md, "Connection pools").
    crowded = store[:pool] && concurrency > store[:pool_size]
    # Each tenant with the head of its calls' lines (the tenant too when
    # there are several). Caller i's j-th call (from 0) is for
    # rounds[(i + j) % length].
    rounds = tenants.map do |t|
      [t, tenants.length > 1 ? { "lang" => lang, "tenant" => t }.freeze : { "lang" => lang }.freeze]
    end
    threads = Array.new(concurrency) do |index|
      Thread.new do
        rng = Random.new
        lines = []
        turn = index
        sleep_ms(start_at + rng.rand(0..ramp_ms) - now_ms)
        loop do
          now = now_ms
          break if now >= end_at

          idle = idle_ms(active, end_at, now)
          if idle.positive?
            sleep_ms(idle)
            next
          end
          tenant, head = rounds[turn % rounds.length]
          turn += 1
          line = begin
            d = skew_ms ? limiter.acquire_at(tenant, now_ms + skew_ms, cost: cost) : limiter.acquire(tenant, cost: cost)
            head.merge("allowed" => d.allowed?, "now_ms" => d.now_ms, "retry_after_ms" => d.retry_after_ms,
                       "reset_after_ms" => d.reset_after_ms)
          rescue Slidelimit::Error => e
            head.merge("error" => e.code.to_s, "message" => e.message)
          rescue StandardError => e
            # Not a slidelimit error: a bug in the gem the harness must see.
            warn "load: acquire raised #{e.class}: #{e.message}"
            head.merge("error" => "raised #{e.class}", "message" => e.message)
          end
          lines << line
          Thread.pass if crowded
          sleep_ms(rng.rand(0..jitter_ms))
        end
        lines
      end
    end
    lines = threads.flat_map(&:value)
    File.open(out, "w") { |f| lines.each { |l| f.write(JSON.generate(l), "\n") } }
    errors = lines.count { |l| l.key?("error") }
    JSON.generate({ "ok" => true, "calls" => lines.length, "errors" => errors })
  end

  class Session
    def initialize
      @store = nil
      @limiter = nil
      @policy_error = nil
    end

    def limiter
      raise @policy_error if @policy_error
      raise ProtocolError, "no policy yet: send a policy first" unless @limiter

      @limiter
    end

    def handle(req)
      op = req["op"]
      known = KNOWN_FIELDS[op]
      SlidelimitDriver.only_known(req, op, ["op", *known]) if known
      case op
      when "hello"
        # redis-rb 4.8 sends on a pooled connection idle through a restart
        # without checking it (docs/driver.md, docs/ruby.md).
        JSON.generate({ "ok" => true, "binding" => "ruby", "version" => Slidelimit.core_version,
                        "stale_idle_connections" => true })
      when "store"
        store = SlidelimitDriver.open_store(req)
        drop
        @store = store
        OK
      when "policy"
        raise ProtocolError, "policy: no store yet" unless @store

        # A request the driver cannot read (ProtocolError) changes nothing
        # (docs/driver.md); one the gem refuses replaces the limiter.
        begin
          built = SlidelimitDriver.build_limiter(@store, req)
        rescue Slidelimit::Error => e
          @limiter&.close
          @limiter = nil
          @policy_error = e
          raise
        end
        @limiter&.close
        @limiter = built
        @policy_error = nil
        SlidelimitDriver.warm(@store, CLUSTER_POOL_SIZE) if @store[:pool_size] == CLUSTER_POOL_SIZE
        OK
      when "acquire", "acquire_at", "peek", "reset", "key"
        call(op, req)
      when "load"
        SlidelimitDriver.run_load(self, req, @store)
      else
        raise ProtocolError, "unknown op #{op.inspect}"
      end
    end

    # A call, reset or key: the whole request is read before the limiter (or
    # its policy's error) answers, so that a request the driver cannot read
    # is a protocol error (docs/driver.md).
    def call(op, req)
      tenant = SlidelimitDriver.field(req, "tenant", :string)
      costs = cost(req)
      now = SlidelimitDriver.field(req, "now_ms", :number, required: op == "acquire_at")
      case op
      when "acquire" then SlidelimitDriver.decision_line(limiter.acquire(tenant, **costs))
      when "acquire_at" then SlidelimitDriver.decision_line(limiter.acquire_at(tenant, now, **costs))
      when "peek" then SlidelimitDriver.decision_line(limiter.peek(tenant, now_ms: now, **costs))
      when "reset"
        limiter.reset(tenant)
        OK
      else
        key = limiter.key(tenant)
        JSON.generate({ "ok" => true, "key" => key, "slot" => Slidelimit.key_slot(key) })
      end
    end

    def cost(req)
      c = SlidelimitDriver.field(req, "cost", :number)
      c.nil? ? {} : { cost: c }
    end

    def drop
      @limiter&.close
      @limiter = nil
      @policy_error = nil
      SlidelimitDriver.close_store(@store)
      @store = nil
    end
  end

  # A JSON escape (\u...) of a surrogate pair, of a lone surrogate, or of
  # anything else (consumed whole, so that an escaped backslash is no escape).
  JSON_ESCAPE = /\\ud[89ab]\h{2}\\ud[c-f]\h{2}|\\u(d[89a-f]\h{2})|\\./i

  # A lone surrogate (JSON's \ud800; docs/driver.md, "Framing") as the three
  # bytes a Ruby String holds for it, not valid UTF-8, as a user's string
  # could be: the gem then refuses it. Ruby's JSON 2.6 refuses a leading one
  # outright and reads a trailing one as those bytes; the bytes it reads
  # either way.
  def lone_surrogates_as_bytes(line)
    return line unless line.match?(/\\u[dD][89a-fA-F]/)

    line.gsub(JSON_ESCAPE) do |escape|
      lone = Regexp.last_match(1)
      next escape unless lone

      code = lone.to_i(16)
      [0xE0 | (code >> 12), 0x80 | ((code >> 6) & 0x3F), 0x80 | (code & 0x3F)].pack("C*").force_encoding(Encoding::UTF_8)
    end
  end

  def main
    $stdout.sync = true
    session = Session.new
    $stdin.each_line do |line|
      req = begin
        JSON.parse(lone_surrogates_as_bytes(line))
      rescue JSON::ParserError => e
        puts JSON.generate({ "error" => "protocol", "message" => "bad JSON: #{e.message}" })
        next
      end
      unless req.is_a?(Hash) && req["op"].is_a?(String)
        puts JSON.generate({ "error" => "protocol", "message" => "a request is an object with a string op" })
        next
      end
      if req["op"] == "exit"
        puts OK
        break
      end
      reply = begin
        session.handle(req)
      rescue ProtocolError => e
        JSON.generate({ "error" => "protocol", "message" => e.message })
      rescue Slidelimit::Error => e
        error_line(e)
      end
      puts reply
    end
    session.drop
  end
end

SlidelimitDriver.main if $PROGRAM_NAME == __FILE__
