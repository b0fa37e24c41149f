'use strict';
// BullMQ integration: a per-tenant rate limit inside the processor. A denied
// job is moved to the delayed set for the hinted time plus jitter and the
// processor throws DelayedError, so BullMQ counts no failed attempt. Never the
// worker-wide `limiter` / `rateLimit`: that would stall every tenant.

const { DelayedError } = require('bullmq');
const { SlidelimitError, UnavailableError, invalid, isRecord, onlyKnown } = require('./errors');

const OPTIONS = [
  'tenant',
  'cost',
  'jitterMs',
  'maxDeferrals',
  'maxOutageDeferrals',
  'onUnavailable',
  'unavailableBackoff',
  'random',
];

/**
 * Thrown (a failed attempt) when the limiter denied a job again after it was
 * deferred `maxDeferrals` times in this attempt. Outage delays do not count.
 */
class DeferralLimitError extends Error {
  constructor(deferrals) {
    super(
      `slidelimit: job deferred ${deferrals} times in this attempt because the rate limit denied it, ` +
        'and denied again; giving up this attempt (maxDeferrals)',
    );
    this.name = 'DeferralLimitError';
    this.deferrals = deferrals;
  }
}

/**
 * Thrown (a failed attempt) only when `maxOutageDeferrals` is set: the
 * limiter's Redis was still unavailable after that many consecutive outage
 * delays. `cause` is the last UnavailableError.
 */
class OutageLimitError extends Error {
  constructor(outageDeferrals, cause) {
    super(
      `slidelimit: the limiter's Redis was unavailable on ${outageDeferrals + 1} consecutive runs of this job ` +
        `(delayed ${outageDeferrals} times); giving up this attempt (maxOutageDeferrals): ${cause && cause.message}`,
      { cause },
    );
    this.name = 'OutageLimitError';
    this.outageDeferrals = outageDeferrals;
  }
}

const STATE_KEY = 'slidelimit';

// `unbounded`: Infinity is a value (never give up), not only a default.
function checkCount(field, value, fallback, unbounded = false) {
  if (value === undefined) return fallback;
  const whole = Number.isSafeInteger(value) || (unbounded && value === Infinity);
  if (typeof value !== 'number' || !whole || value < 0) {
    throw invalid(field, `must be a non-negative integer${unbounded ? ' or Infinity' : ''}, got ${String(value)}`);
  }
  return value;
}

function checkFunction(field, value, fallback, what) {
  if (value === undefined) return fallback;
  if (typeof value !== 'function') throw invalid(field, `must be ${what}, got ${typeof value}`);
  return value;
}

// Backoff of outage delays: baseMs * 2^(n-1), at most maxMs (whole ms).
function checkBackoff(option) {
  if (option === undefined) return { baseMs: 1000, maxMs: 60_000 };
  if (!isRecord(option)) throw invalid('unavailable_backoff', 'must be an object { baseMs, maxMs }');
  onlyKnown(option, ['baseMs', 'maxMs'], (key) => `unavailableBackoff.${key}`);
  return {
    baseMs: checkCount('unavailable_backoff.base_ms', option.baseMs, 1000),
    maxMs: checkCount('unavailable_backoff.max_ms', option.maxMs, 60_000),
  };
}

/**
 * Wraps `processor(job, token, decision)` so that it runs only with a permit
 * of `limiter` for `tenant(job)`.
 */
function rateLimited(limiter, processor, options = {}) {
  if (!limiter || typeof limiter.acquire !== 'function') throw invalid('limiter', 'must be a slidelimit Limiter');
  if (typeof processor !== 'function') throw invalid('processor', 'must be a function');
  if (!isRecord(options)) throw invalid('options', 'must be an object');
  onlyKnown(options, OPTIONS);
  if (typeof options.tenant !== 'function') throw invalid('tenant', 'must be a function of the job');
  const tenantOf = options.tenant;
  const costOf = checkFunction('cost', options.cost, () => 1, 'a function of the job');
  const jitterMs = checkCount('jitter_ms', options.jitterMs, 250);
  const maxDeferrals = checkCount('max_deferrals', options.maxDeferrals, 100, true);
  const maxOutageDeferrals = checkCount('max_outage_deferrals', options.maxOutageDeferrals, Infinity, true);
  const onUnavailable = options.onUnavailable === undefined ? 'delay' : options.onUnavailable;
  if (!['delay', 'run', 'fail'].includes(onUnavailable)) {
    throw invalid('on_unavailable', `must be "delay", "run" or "fail", got ${JSON.stringify(onUnavailable)}`);
  }
  const backoff = checkBackoff(options.unavailableBackoff);
  const random = checkFunction('random', options.random, Math.random, 'a function returning a number in [0, 1)');

  const jitter = () => Math.floor(random() * (jitterMs + 1));

  // Delays are counted in the job's data, apart from BullMQ's attempts, and
  // per attempt: `deferrals` counts denials, `unavailable` the current streak
  // of outage delays (it drives the backoff and ends when the limiter
  // answers). A new attempt (after a failed one) starts both at 0.
  function stateOf(job) {
    const data = job.data;
    if (!isRecord(data)) {
      throw invalid('job.data', 'must be an object so that deferrals can be counted');
    }
    const s = data[STATE_KEY];
    if (!s || s.attempt !== job.attemptsMade) return { deferrals: 0, unavailable: 0 };
    return { deferrals: savedCount(s, 'deferrals'), unavailable: savedCount(s, 'unavailable') };
  }

  // The wrapper saves only non-negative integers: anything else was written
  // by someone else, and read as it is it would never reach maxDeferrals.
  function savedCount(saved, name) {
    const n = saved[name];
    if (n === undefined) return 0;
    if (!Number.isSafeInteger(n) || n < 0) {
      throw invalid(`job.data.${STATE_KEY}.${name}`, `must be a non-negative integer, got ${JSON.stringify(n)}`);
    }
    return n;
  }

  async function delay(job, token, delayMs, state) {
    const saved = { attempt: job.attemptsMade, deferrals: state.deferrals, unavailable: state.unavailable };
    await job.updateData({ ...job.data, [STATE_KEY]: saved });
    await job.moveToDelayed(Date.now() + delayMs, token);
    throw new DelayedError();
  }

  // The processor sees the job's data as it was enqueued: the wrapper's
  // count is its own (a provider sent `job.data` would get it too).
  function run(job, token, decision, signal) {
    if (Object.hasOwn(job.data, STATE_KEY)) {
      const { [STATE_KEY]: _counts, ...data } = job.data;
      job.data = data;
    }
    return processor(job, token, decision, signal);
  }

  // A cancelled job (worker.cancelJob) spends no permit and is not delayed:
  // the cancellation fails the attempt, as BullMQ's own does.
  function throwIfCancelled(signal) {
    if (!signal || !signal.aborted) return;
    const reason = signal.reason;
    throw reason instanceof Error ? reason : new Error(`job cancelled: ${String(reason)}`);
  }

  // What the limiter is asked for: a cost function that returns nothing (a
  // missing field, an arrow body without return) is a bug to see, not a
  // default of 1 for a job that may spend more.
  function costFor(job) {
    const cost = costOf(job);
    if (typeof cost !== 'number') {
      throw invalid('cost', `the cost function must return a number, got ${cost === null ? 'null' : typeof cost}`);
    }
    return cost;
  }

  // A failed attempt's counts stay for whoever looks, tied to no attempt: a
  // job retried by hand with its attempts reset (retry with
  // resetAttemptsMade) starts its deferrals from 0, as a new attempt does.
  async function failAttempt(job, error) {
    const saved = job.data[STATE_KEY];
    if (isRecord(saved)) await job.updateData({ ...job.data, [STATE_KEY]: { ...saved, attempt: null } });
    throw error;
  }

  // Three parameters: BullMQ makes the cancellation signal only for a
  // processor that declares a third (processor.length), and passes it on.
  return async function rateLimitedProcessor(job, token, signal) {
    const state = stateOf(job);
    throwIfCancelled(signal);
    let decision;
    try {
      decision = await limiter.acquire(tenantOf(job), { cost: costFor(job) });
    } catch (err) {
      if (!(err instanceof UnavailableError)) throw err;
      if (onUnavailable === 'run') return run(job, token, null, signal);
      if (onUnavailable === 'fail') throw err;
      throwIfCancelled(signal);
      // An outage is no denial: it never counts toward maxDeferrals.
      if (state.unavailable >= maxOutageDeferrals) return failAttempt(job, new OutageLimitError(state.unavailable, err));
      const streak = state.unavailable + 1;
      // A long streak's power is Infinity, and 0 * Infinity is NaN.
      const wait = backoff.baseMs === 0 ? 0 : Math.min(backoff.maxMs, backoff.baseMs * 2 ** (streak - 1));
      return delay(job, token, wait + jitter(), { deferrals: state.deferrals, unavailable: streak });
    }
    if (!decision.allowed) {
      throwIfCancelled(signal);
      if (state.deferrals >= maxDeferrals) return failAttempt(job, new DeferralLimitError(state.deferrals));
      return delay(job, token, decision.retryAfterMs + jitter(), { deferrals: state.deferrals + 1, unavailable: 0 });
    }
    return run(job, token, decision, signal);
  };
}

module.exports = { rateLimited, DeferralLimitError, OutageLimitError, SlidelimitError };
