# frozen_string_literal: true

require "slidelimit"
require "sidekiq"

module Slidelimit
  # Sidekiq (6.x) integration: a server middleware that checks a worker's
  # limiter before the job body runs and, when denied, puts the very same job
  # back on Sidekiq's schedule for later, without spending a retry.
  #
  #   Sidekiq.configure_server do |config|
  #     config.server_middleware { |chain| chain.add Slidelimit::Sidekiq::Middleware }
  #   end
  #
  #   class GeocodeWorker
  #     include Sidekiq::Worker
  #     include Slidelimit::Sidekiq::Limited
  #     slidelimit limiter: GEOCODE_LIMITER, tenant: ->(job) { job["args"][0] }
  #
  #     def perform(api_key, address) = ...
  #   end
  #
  # A denied job goes back on the schedule with the same jid and the same
  # hash (retry_count untouched), due at now + retry_after + jitter; the body
  # does not run and Sidekiq counts the run as done, so nothing goes to the
  # retry or dead set. The job hash counts its deferrals
  # ("slidelimit_deferrals"); past max_deferrals the middleware raises
  # DeferralLimitExceeded, which Sidekiq's own retries then handle. When the
  # limiter's Redis is unavailable the job is deferred with backoff
  # (on_unavailable: :defer, the default, counted apart in
  # "slidelimit_outage_deferrals") or run anyway (:run, fail open).
  #
  # Sidekiq moves a scheduled job to its queue when its scheduler polls, every
  # few seconds by default: see docs/ruby.md for the precision to expect and
  # how to tune it.
  module Sidekiq
    DEFERRALS_KEY = "slidelimit_deferrals"
    OUTAGE_DEFERRALS_KEY = "slidelimit_outage_deferrals"

    # Raised when a job was deferred max_deferrals times already: Sidekiq's
    # retries take over from there.
    class DeferralLimitExceeded < StandardError; end

    # Raised when the limiter's Redis stayed unavailable for
    # max_outage_deferrals deferrals (only when that is set).
    class OutageLimitExceeded < StandardError; end

    # A worker's settings (see Limited.slidelimit).
    class Config
      attr_reader :limiter, :tenant, :cost, :max_deferrals, :jitter_ms, :on_unavailable,
                  :outage_backoff_ms, :outage_backoff_max_ms, :max_outage_deferrals

      def initialize(limiter:, tenant:, cost: 1, max_deferrals: 100, jitter_ms: 1000,
                     on_unavailable: :defer, outage_backoff_ms: 1000, outage_backoff_max_ms: 60_000,
                     max_outage_deferrals: nil)
        raise Slidelimit.invalid("limiter", "must be a Slidelimit::Limiter, got #{limiter.class}") unless limiter.is_a?(Limiter)

        # Refused now rather than as an error in every job: a callable that
        # cannot take the job hash, a cost no check could spend (core's rule,
        # up to the policy's lowest limit).
        Core.callable("tenant", tenant, 1, "call(job)")
        if cost.is_a?(Integer)
          limiter.policy.check_cost(cost)
        elsif cost.respond_to?(:call)
          Core.callable("cost", cost, 1, "call(job)")
        else
          raise Slidelimit.invalid("cost", "must be an Integer or respond to call(job), got #{cost.class}")
        end
        unless %i[defer run].include?(on_unavailable)
          raise Slidelimit.invalid("on_unavailable", "must be :defer or :run, got #{on_unavailable.inspect}")
        end

        @limiter = limiter
        @tenant = tenant
        @cost = cost
        @max_deferrals = Core.uint64("max_deferrals", max_deferrals)
        @jitter_ms = Core.uint64("jitter_ms", jitter_ms)
        @on_unavailable = on_unavailable
        @outage_backoff_ms = Core.uint64("outage_backoff_ms", outage_backoff_ms)
        @outage_backoff_max_ms = Core.uint64("outage_backoff_max_ms", outage_backoff_max_ms)
        if @outage_backoff_max_ms < @outage_backoff_ms
          raise Slidelimit.invalid("outage_backoff_max_ms", "must be at least outage_backoff_ms " \
                                                            "(#{@outage_backoff_ms}), got #{@outage_backoff_max_ms}")
        end
        # nil is "unbounded"; false is refused, not read as nil.
        @max_outage_deferrals =
          max_outage_deferrals.nil? ? nil : Core.uint64("max_outage_deferrals", max_outage_deferrals)
        freeze
      end
    end

    # Include in a Sidekiq worker to limit it: `slidelimit limiter: ..., tenant: ->(job) { ... }`.
    module Limited
      def self.included(base)
        base.extend(ClassMethods)
      end

      module ClassMethods
        # limiter: the Slidelimit::Limiter to check. tenant: a callable that
        # names the tenant from the job hash (job["args"] are the perform
        # arguments). cost: permits per run (Integer or callable). See Config
        # for the rest.
        def slidelimit(**options)
          # The middleware sees the class Sidekiq runs. An ActiveJob class
          # runs inside ActiveJob's JobWrapper, so its jobs would go unchecked.
          unless include?(::Sidekiq::Worker)
            raise Slidelimit.invalid("worker", "#{name || inspect} is not a Sidekiq worker (include Sidekiq::Job " \
                                               "or Sidekiq::Worker first); an ActiveJob class is never checked")
          end

          @slidelimit_config = Config.new(**options)
        end

        def slidelimit_config
          return @slidelimit_config if defined?(@slidelimit_config) && @slidelimit_config

          superclass.respond_to?(:slidelimit_config) ? superclass.slidelimit_config : nil
        end
      end
    end

    # The server middleware; add it once, it acts on Limited workers only.
    class Middleware
      # clock: a callable giving the time in seconds (Float), for tests.
      def initialize(clock: -> { Time.now.to_f }, random: Random.new)
        @clock = clock
        @random = random
      end

      def call(worker, job, _queue)
        config = worker.class.respond_to?(:slidelimit_config) ? worker.class.slidelimit_config : nil
        return yield unless config

        # The job's own counts are read first: a job whose count is no count
        # fails the same way whatever the limiter answers.
        deferrals = job_count(job, DEFERRALS_KEY)
        outage_deferrals = job_count(job, OUTAGE_DEFERRALS_KEY)
        cost = config.cost.respond_to?(:call) ? config.cost.call(job) : config.cost
        begin
          decision = config.limiter.acquire(config.tenant.call(job), cost: cost)
        rescue Slidelimit::Unavailable => e
          return yield if config.on_unavailable == :run

          return defer_outage(config, job, outage_deferrals, e)
        end
        return yield if decision.allowed?

        defer(config, job, deferrals, decision)
      end

      private

      # A count the middleware keeps in the job hash (0 when absent). It
      # writes only non-negative Integers, so anything else there (a String,
      # nil, -5, 1.5) was put by someone else: InvalidArgument naming the key
      # (the job fails into Sidekiq's retries) rather than a guess.
      def job_count(job, key)
        count = job.fetch(key, 0)
        return count if count.is_a?(Integer) && !count.negative?

        raise Slidelimit.invalid(key, "the job's count must be a non-negative Integer, got #{count.class} " \
                                      "(#{count.inspect})")
      end

      def defer(config, job, count, decision)
        if count >= config.max_deferrals
          raise DeferralLimitExceeded,
                "job #{job['jid']} was deferred #{count} times by the rate limit " \
                "(max_deferrals #{config.max_deferrals}); retry_after #{decision.retry_after_ms} ms"
        end

        # The limiter answered: an outage streak, if any, is over (the next one
        # starts again at the shortest backoff and counts from 0).
        push_back(job.except(OUTAGE_DEFERRALS_KEY).merge(DEFERRALS_KEY => count + 1),
                  decision.retry_after_ms + jitter(config))
      end

      def defer_outage(config, job, count, error)
        if config.max_outage_deferrals && count >= config.max_outage_deferrals
          raise OutageLimitExceeded,
                "job #{job['jid']} was deferred #{count} times while the limiter's Redis " \
                "was unavailable: #{error.message}"
        end

        backoff = [config.outage_backoff_ms * (2**[count, 30].min), config.outage_backoff_max_ms].min
        push_back(job.merge(OUTAGE_DEFERRALS_KEY => count + 1), backoff + jitter(config))
      end

      def jitter(config)
        config.jitter_ms.zero? ? 0 : @random.rand(0..config.jitter_ms)
      end

      # The same job (same jid, same retry_count) onto Sidekiq's schedule,
      # written there as Sidekiq's own retries are. Client middleware runs
      # when the scheduler enqueues it; run now, it could refuse a jid that is
      # still running (a uniqueness lock), and the job would be lost.
      def push_back(job, delay_ms)
        at = @clock.call + (delay_ms / 1000.0)
        # Sidekiq::Testing (fake! or inline!) keeps jobs off Redis: through
        # its client, as any push in a test.
        if defined?(::Sidekiq::Testing) && ::Sidekiq::Testing.enabled?
          ::Sidekiq::Client.push(job.merge("at" => at))
          return nil
        end
        payload = ::Sidekiq.dump_json(job.except("at"))
        ::Sidekiq.redis { |conn| conn.zadd("schedule", at.to_s, payload) }
        nil
      end
    end
  end
end
