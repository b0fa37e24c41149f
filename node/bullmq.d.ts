// Types of `slidelimit/bullmq`.

import type { Job } from 'bullmq';
import type { Decision, RateLimiter } from './index';

export interface RateLimitedOptions<D = any> {
  /** The tenant whose budget a job spends (e.g. the API key). */
  tenant: (job: Job<D>) => string;
  /** Permits a job takes. Default 1. */
  cost?: (job: Job<D>) => number;
  /** Random extra delay in [0, jitterMs] ms so deferred jobs do not return in lockstep. Default 250. */
  jitterMs?: number;
  /**
   * Denials deferred per attempt; the next denial fails the attempt with
   * DeferralLimitError. Outage delays do not count. Default 100.
   */
  maxDeferrals?: number;
  /**
   * Consecutive outage delays ('delay' on an unavailable Redis) per attempt;
   * the next outage fails the attempt with OutageLimitError. Default Infinity:
   * an outage never fails an attempt.
   */
  maxOutageDeferrals?: number;
  /** When Redis is unavailable: 'delay' with backoff (default), 'run' (fail open) or 'fail' (a failed attempt). */
  onUnavailable?: 'delay' | 'run' | 'fail';
  /** Backoff of 'delay' on unavailable: baseMs * 2^(n-1), at most maxMs. Default 1000 and 60000. */
  unavailableBackoff?: { baseMs?: number; maxMs?: number };
  /** Source of randomness for the jitter. Default Math.random. */
  random?: () => number;
}

/**
 * Wraps a processor so that it runs only with a permit. The processor gets the
 * decision (null when it runs fail-open) and BullMQ's cancellation signal
 * (when BullMQ gives one); `job.data` without the wrapper's `slidelimit` count.
 */
export function rateLimited<D = any, R = any>(
  limiter: RateLimiter,
  processor: (
    job: Job<D>,
    token: string | undefined,
    decision: Decision | null,
    signal: AbortSignal | undefined,
  ) => Promise<R>,
  options: RateLimitedOptions<D>,
): (job: Job<D>, token?: string, signal?: AbortSignal) => Promise<R>;

/** The attempt failed: denied again after `maxDeferrals` deferrals in this attempt. */
export class DeferralLimitError extends Error {
  constructor(deferrals: number);
  readonly deferrals: number;
}

/** The attempt failed: Redis still unavailable after `maxOutageDeferrals` consecutive outage delays. */
export class OutageLimitError extends Error {
  constructor(outageDeferrals: number, cause?: Error);
  readonly outageDeferrals: number;
  readonly cause?: Error;
}
