# frozen_string_literal: true

require_relative "test_helper"
require "open3"
require "rbconfig"

# The ```ruby blocks of README.md and docs/*.md, run against the test Redis so
# that the docs cannot drift from the API. A doc's blocks run in order as one
# program in a fresh Ruby process (a later block uses what an earlier one
# made, as a reader would; Sidekiq's and Prometheus's global state stay out of
# this process), with the names the prose leaves to the reader supplied
# before, and checks afterwards that they did what the text says. The docs'
# Redis URL is replaced by the test server's.
class TestDocs < Minitest::Test
  include TestHelper

  ROOT = File.expand_path("../..", __dir__)
  LIB = File.expand_path("../lib", __dir__)
  DOC_URL = "redis://127.0.0.1:6379/"

  # Per doc: the first line of each of its ruby blocks, in order (a block
  # added, removed or moved fails until this table says what it needs), the
  # code run before them and the checks after them. Every block runs.
  CONTEXT = {
    "README.md" => {
      blocks: ['require "slidelimit"'],
      before: <<~RUBY,
        Slidelimit::Limiter.new(Slidelimit.redis(url: TEST_URL),
                                Slidelimit::Policy.new(resource: "geocode", limit: 600, window_ms: 60_000)).reset("tenant-17")
      RUBY
      after: <<~RUBY
        expect [decision.allowed?, decision.remaining, decision.retry_after_ms], [true, 599, 0], "the README's first acquire"
        expect limiter.key("tenant-17"), "rl:{geocode:tenant-17}:log:60000", "the README's key, shared with every binding"
        limiter.reset("tenant-17")
      RUBY
    },
    "docs/ruby.md" => {
      blocks: ['require "slidelimit"', 'burst = Slidelimit::Policy.new(resource: "search", limits: [',
               'require "slidelimit/sidekiq"', "Sidekiq.configure_server do |config|",
               "metrics = Slidelimit::Metrics.new(registry: Prometheus::Client.registry, tenant_label: false)"],
      # The API block calls the reader's call_the_api; the Sidekiq block's
      # GEOCODE is the reader's limiter; configure_server blocks run only in a
      # Sidekiq server process, which loading its CLI makes this one.
      before: <<~RUBY,
        API_CALLS = []
        def call_the_api = API_CALLS << :called
        GEOCODE = Slidelimit::Limiter.new(Slidelimit.redis(url: TEST_URL),
                                          Slidelimit::Policy.new(resource: "geocode", limit: 600, window_ms: 60_000))
        GEOCODE.reset("tenant-17")
        GEOCODE.reset("api-key-9")
        SEARCH_KEYS = ["rl:{search:tenant-17}:log:1000", "rl:{search:tenant-17}:bucketed:60000:60"]
        Slidelimit.redis(url: TEST_URL).del(*SEARCH_KEYS)
        require "sidekiq/cli"
        require "prometheus/client"
      RUBY
      after: <<~RUBY
        expect [d.allowed?, d.remaining, API_CALLS], [true, 599, [:called]], "the API block's acquire and call"
        # Several limits: remaining is the lower (20 - 1 and 600 - 1); the keys are the comment's.
        expect [s.allowed?, s.remaining, s.denied_by], [true, 19, nil], "the several limits' acquire"
        expect search.keys("tenant-17"), SEARCH_KEYS, "the several limits' keys"
        expect search.reset("tenant-17"), true, "reset deletes the keys"
        # The configured middleware chain runs a GeocodeWorker job with a permit of its first argument.
        ran = []
        Sidekiq.server_middleware.invoke(GeocodeWorker.new, { "args" => ["api-key-9", "Main St 1"] }, "default") { ran << :body }
        expect ran, [:body], "the job body under the middleware"
        expect GEOCODE.peek("api-key-9").remaining, 598, "one permit spent by the job, one by the peek"
        expect GeocodeWorker.slidelimit_config.max_deferrals, 50, "max_deferrals"
        expect GeocodeWorker.new.perform("api-key-9", "Main St 1"), nil, "perform"
        expect Sidekiq.options[:average_scheduled_poll_interval], 1, "the poll interval"
        # The metrics block's limiter counts its acquires.
        limiter.acquire("tenant-17")
        expect metrics.text.lines.grep(/\\Aratelimit_allowed_total\\{/), ["ratelimit_allowed_total{resource=\\"geocode\\"} 1\\n"],
               "the allowed counter"
        [GEOCODE, limiter].each { |l| l.reset("tenant-17") }
        GEOCODE.reset("api-key-9")
      RUBY
    }
  }.freeze

  Block = Struct.new(:line, :code)

  # The ruby blocks of a doc: the fence's line and the code.
  def self.ruby_blocks(doc)
    blocks = []
    open = nil
    File.foreach(File.join(ROOT, doc)).with_index(1) do |line, n|
      fence = line.lstrip.start_with?("```")
      if open.nil?
        open = { ruby: line.lstrip.start_with?("```ruby"), line: n, code: +"" } if fence
      elsif fence
        blocks << Block.new(open[:line], open[:code]) if open[:ruby]
        open = nil
      else
        open[:code] << line
      end
    end
    raise "#{doc}: a fenced block is never closed" if open

    blocks
  end

  DOCS = (["README.md"] + Dir.glob("docs/*.md", base: ROOT).sort).freeze

  def test_every_doc_with_ruby_blocks_is_listed
    with_blocks = DOCS.reject { |doc| self.class.ruby_blocks(doc).empty? }
    assert_equal CONTEXT.keys.sort, with_blocks.sort, "docs with ```ruby blocks: say in CONTEXT what they need and do"
  end

  CONTEXT.each_key do |doc|
    define_method("test_the_ruby_blocks_of_#{doc.tr('/.', '__')}_run") { run_doc(doc) }
  end

  private

  def run_doc(doc)
    ctx = CONTEXT.fetch(doc)
    blocks = self.class.ruby_blocks(doc)
    assert_equal ctx[:blocks], blocks.map { |b| b.code.lines.first.chomp },
                 "#{doc}: its ruby blocks changed; say in CONTEXT what they need and do"
    url = "#{redis_url.chomp('/')}/"
    code = blocks.map(&:code).join
    assert !code.include?("redis://") || code.include?(DOC_URL), "#{doc}: Redis URLs are #{DOC_URL}"

    # Each block is evaluated with the doc's name and line, so an error points there.
    evals = blocks.map do |b|
      "eval(#{b.code.gsub(DOC_URL, url).inspect}, TOPLEVEL_BINDING, #{doc.inspect}, #{b.line + 1})"
    end
    program = <<~RUBY
      require "slidelimit"
      TEST_URL = #{url.inspect}
      def expect(actual, wanted, what)
        raise "\#{what}: expected \#{wanted.inspect}, got \#{actual.inspect}" unless actual == wanted
      end
      eval(#{ctx[:before].inspect}, TOPLEVEL_BINDING, "before", 1)
      #{evals.join("\n")}
      eval(#{ctx[:after].inspect}, TOPLEVEL_BINDING, "after", 1)
      puts "ok"
    RUBY
    out, status = Open3.capture2e(RbConfig.ruby, "-I", LIB, "-e", program, chdir: ROOT)
    assert status.success?, "#{doc}:\n#{out}"
    assert_equal "ok\n", out
  end
end
