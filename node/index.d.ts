// Types of the `slidelimit` package. Checked by `tsc --noEmit` on
// examples/typed.ts (make test-node).

export type Algorithm = 'sliding_log' | 'sliding_counter' | 'bucketed_window';

/** One limit: `limit` permits per rolling `windowMs` milliseconds under `algorithm`. */
export interface LimitSpec {
  /**
   * Default `'sliding_log'` (exact). `'sliding_counter'` is approximate, O(1) memory.
   * `'bucketed_window'` is exact with O(buckets) memory; a permit may be held up to
   * one bucket width longer than the log would hold it.
   */
  algorithm?: Algorithm;
  limit: number;
  windowMs: number;
  /**
   * Buckets of a `'bucketed_window'`: 1 to 3600, dividing `windowMs`. Default 60.
   * Given with another algorithm it is `InvalidArgumentError` on `buckets`.
   */
  buckets?: number;
}

interface PolicyNames {
  /** Key namespace, `[A-Za-z0-9_.-]{1,64}`. Default `'rl'`. */
  namespace?: string;
  /** What is limited, e.g. `'geocode'`; `[A-Za-z0-9_.-]{1,64}`. */
  resource: string;
}

/** A policy of one limit: `limit` permits per rolling `windowMs` milliseconds. */
export interface SinglePolicySpec extends PolicyNames, LimitSpec {
  limits?: undefined;
}

/**
 * A policy of several limits (1 to 8), e.g. 20 per second and 600 per minute:
 * a check passes only if every limit allows it, and records in all or none.
 * Errors name a limit's field by position (`limits[1].window_ms`); two limits
 * with the same algorithm, window and buckets are an error on `limits`, and so
 * is `limits` given with `algorithm`, `limit`, `windowMs` or `buckets`.
 */
export interface MultiLimitPolicySpec extends PolicyNames {
  limits: readonly LimitSpec[];
  algorithm?: undefined;
  limit?: undefined;
  windowMs?: undefined;
  buckets?: undefined;
}

export type PolicySpec = SinglePolicySpec | MultiLimitPolicySpec;

/** One validated limit, as core holds it (frozen). */
export interface LimitInfo {
  readonly algorithm: Algorithm;
  readonly limit: number;
  readonly windowMs: number;
  /** The bucket count of a `'bucketed_window'` (default filled in); absent for the others. */
  readonly buckets?: number;
}

/** The validated policy, as core holds it. `algorithm` to `buckets` are its first limit's. */
export interface PolicyInfo {
  readonly namespace: string;
  readonly resource: string;
  readonly algorithm: Algorithm;
  readonly limit: number;
  readonly windowMs: number;
  /** The bucket count of a `'bucketed_window'` (default filled in); absent for the others. */
  readonly buckets?: number;
  /** Every limit, in the order given (one for a policy of one limit). */
  readonly limits: readonly LimitInfo[];
}

export interface CheckOptions {
  /** Permits to take, 1 <= cost <= limit. Default 1. */
  cost?: number;
  /** Caller time in ms (tests, replays). Default: Redis `TIME` (the memory engine: `Date.now()`). */
  nowMs?: number | null;
}

/** What a check answered; times in milliseconds. */
export interface Decision {
  allowed: boolean;
  /** Permits of cost 1 that would still pass at `nowMs`. */
  remaining: number;
  /** 0 when allowed; otherwise how long until a retry of the same cost passes. */
  retryAfterMs: number;
  /** How long until the key holds nothing that still counts. */
  resetAfterMs: number;
  /** The time the decision was made at. */
  nowMs: number;
  /**
   * For a denial by a policy of several limits: the position (from 0) of the
   * limit that denied with the longest retry. null when allowed and for a
   * policy of one limit.
   */
  deniedBy: number | null;
}

/** What runs the scripts: an ioredis `Redis` or `Cluster` (or anything with these methods). */
export interface RedisLike {
  evalsha(sha1: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
  del(...keys: string[]): Promise<number>;
}

export interface LimiterOptions {
  /**
   * Upper bound of one call in ms, NOSCRIPT retry included; then `UnavailableError`.
   * Default 1000. An integer from 1 to 2^31 - 1 (core's rule in every binding):
   * 0 is `InvalidArgumentError` naming `timeout_ms`, there is no check without a deadline.
   */
  timeoutMs?: number;
  /** Metrics to update on every acquire; anything else than a Metrics (or null) is `InvalidArgumentError` naming `metrics`. */
  metrics?: Metrics | null;
  /**
   * The local deny cache, on by default with room for 10,000 tenants: after
   * Redis denies an acquire of cost c with retry R, acquires of the same
   * tenant with cost >= c within R are denied in-process without a Redis
   * call. Only acquires on server time use it (not peeks, not `nowMs`).
   * A reset by another process is not seen: the tenant stays denied here
   * until the cached retry runs out (a `reset` through any limiter of this
   * process clears it in every limiter's cache).
   * `false` switches it off; `capacity` is 1 to 2^24 tenants
   * (`InvalidArgumentError` naming `deny_cache_capacity` otherwise).
   */
  denyCache?: boolean | { capacity?: number } | null;
}

export interface MemoryLimiterOptions {
  /** Share one engine between limiters. */
  engine?: MemoryEngine;
  /** The clock used when `nowMs` is not given. Default `Date.now`. */
  clock?: () => number;
  metrics?: Metrics;
}

/** Common surface of `Limiter` and `MemoryLimiter`. */
export interface RateLimiter {
  readonly policy: PolicyInfo;
  key(tenant: string): string;
  acquire(tenant: string, options?: CheckOptions): Promise<Decision>;
  peek(tenant: string, options?: CheckOptions): Promise<Decision>;
  reset(tenant: string): Promise<boolean>;
}

/**
 * A rate limiter for one policy on Redis. A client with ioredis `keyPrefix`
 * (or, on a Cluster, `redisOptions.keyPrefix`) is refused with
 * `InvalidArgumentError` naming `redis`: its keys would leave the shared budget.
 */
export class Limiter implements RateLimiter {
  constructor(redis: RedisLike, policy: PolicySpec, options?: LimiterOptions);
  /** An in-memory limiter with the same decisions (core's engine). */
  static memory(policy: PolicySpec, options?: MemoryLimiterOptions): MemoryLimiter;
  readonly policy: PolicyInfo;
  key(tenant: string): string;
  /** Takes `cost` permits if the window has room. */
  acquire(tenant: string, options?: CheckOptions): Promise<Decision>;
  /** What `acquire` would answer, recording nothing. */
  peek(tenant: string, options?: CheckOptions): Promise<Decision>;
  /** Forgets `tenant` (every limit's key, and its cached denial); true if anything was recorded. */
  reset(tenant: string): Promise<boolean>;
}

/** Core's in-memory engine behind the limiter API (no deny cache). */
export class MemoryLimiter implements RateLimiter {
  constructor(policy: PolicySpec, options?: MemoryLimiterOptions);
  readonly policy: PolicyInfo;
  key(tenant: string): string;
  acquire(tenant: string, options?: CheckOptions): Promise<Decision>;
  peek(tenant: string, options?: CheckOptions): Promise<Decision>;
  reset(tenant: string): Promise<boolean>;
}

/** Core's thread-safe in-memory store; pass one to several `MemoryLimiter`s to share it. */
export class MemoryEngine {
  constructor();
  readonly keyCount: number;
}

export interface MetricsOptions {
  /** A prom-client `Registry` to register in. Default: prom-client's global registry. */
  registry?: { registerMetric(metric: any): void };
  /** Add a `tenant` label to the counters (only for bounded tenant counts). Default false. */
  tenantLabel?: boolean;
  /** The prom-client module to use. Default: `require('prom-client')`. */
  client?: unknown;
}

/**
 * `ratelimit_allowed_total`, `ratelimit_denied_total`, `ratelimit_local_denied_total`
 * (denials of the local deny cache, counted in `ratelimit_denied_total` too) and
 * `ratelimit_wait_seconds`.
 */
export class Metrics {
  constructor(options?: MetricsOptions);
  /** `local`: the deny cache denied it without a Redis call. */
  observe(resource: string, tenant: string, decision: Decision, local?: boolean): void;
}

export type ErrorCode =
  | 'invalid_argument'
  | 'unavailable'
  | 'script_error'
  | 'wrong_type'
  | 'malformed_reply'
  | 'permission_denied'
  | 'internal';

/** Every slidelimit error: `code` is core's stable code. */
export class SlidelimitError extends Error {
  readonly code: ErrorCode;
  /** The field at fault (invalid_argument). */
  readonly field?: string;
}
export class InvalidArgumentError extends SlidelimitError {
  readonly code: 'invalid_argument';
}
export class UnavailableError extends SlidelimitError {
  readonly code: 'unavailable';
}
export class ScriptError extends SlidelimitError {
  readonly code: 'script_error';
}
export class WrongTypeError extends SlidelimitError {
  readonly code: 'wrong_type';
}
export class MalformedReplyError extends SlidelimitError {
  readonly code: 'malformed_reply';
}
export class PermissionDeniedError extends SlidelimitError {
  readonly code: 'permission_denied';
}
export class InternalError extends SlidelimitError {
  readonly code: 'internal';
}

/** Which build of slidelimit-core is in use. */
export const implementation: 'native' | 'wasm';
/** Why the native addon did not load, when `implementation` fell back to wasm. */
export const nativeLoadError: Error | null;
/** slidelimit-core's version. */
export const version: string;
export const errorCodes: readonly ErrorCode[];
/** Redis Cluster slot of a key. */
export function slot(key: string): number;
