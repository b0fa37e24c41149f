'use strict';
// The limiters. Everything about the contract (keys, validation, calls,
// replies, error codes) comes from slidelimit-core through `binding`; this
// file only moves calls to Redis with ioredis and back.

const binding = require('./binding');
const { decodeCall, replyParser } = require('./codec');
const {
  UnavailableError,
  makeError,
  fromCore,
  invalid,
} = require('./errors');

const { core } = binding;
const parseReply = replyParser(core);
const DEFAULT_TIMEOUT_MS = 1000;

function str(field, value) {
  if (typeof value !== 'string') throw invalid(field, `must be a string, got ${typeof value}`);
  return value;
}

// Only the JS type is checked here; core checks finiteness, sign, integrality
// and ranges of the number itself.
function num(field, value) {
  if (typeof value !== 'number') throw invalid(field, `must be a number, got ${typeof value}`);
  return value;
}

/** Builds core's Policy from `{ namespace, resource, algorithm, limit, windowMs }`. */
function createPolicy(spec) {
  if (spec === null || typeof spec !== 'object') throw invalid('policy', 'must be an object');
  const { namespace = 'rl', resource, algorithm = 'sliding_log', limit, windowMs } = spec;
  str('namespace', namespace);
  str('resource', resource);
  str('algorithm', algorithm);
  num('limit', limit);
  num('window_ms', windowMs);
  try {
    return new core.Policy(namespace, resource, algorithm, limit, windowMs);
  } catch (e) {
    throw fromCore(e);
  }
}

function describe(policy) {
  return Object.freeze({
    namespace: policy.namespace,
    resource: policy.resource,
    algorithm: policy.algorithm,
    limit: policy.limit,
    windowMs: policy.windowMs,
  });
}

function readOptions(options) {
  if (options === undefined) return { cost: 1, nowMs: undefined };
  if (options === null || typeof options !== 'object') throw invalid('options', 'must be an object');
  const cost = options.cost === undefined ? 1 : num('cost', options.cost);
  const nowMs = options.nowMs == null ? undefined : num('now_ms', options.nowMs);
  return { cost, nowMs };
}

function isServerError(err) {
  // ioredis (and redis-errors) name server replies `ReplyError`; matching the
  // name keeps working when the app has its own copy of ioredis.
  return err instanceof Error && err.name === 'ReplyError';
}

// Maps a failed Redis command to a slidelimit error with core's classification.
function fromRedis(err) {
  if (!isServerError(err)) {
    return makeError('unavailable', `redis unavailable: ${err && err.message}`, undefined, err);
  }
  const { kind, code } = core.classifyServerError(err.message);
  switch (kind) {
    case 'noscript': // still missing after EVAL: the server refuses scripts
      return makeError('script_error', err.message, undefined, err);
    case 'redirect':
    case 'transient':
      return makeError('unavailable', `redis unavailable: ${err.message}`, undefined, err);
    default:
      return makeError(code, err.message, undefined, err);
  }
}

function withTimeout(promise, ms, what) {
  if (!ms) return promise;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new UnavailableError('unavailable', `redis did not answer ${what} within ${ms} ms`)),
      ms,
    );
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

function checkTimeout(timeoutMs) {
  if (timeoutMs === undefined) return DEFAULT_TIMEOUT_MS;
  if (typeof timeoutMs !== 'number' || !Number.isSafeInteger(timeoutMs) || timeoutMs < 0) {
    throw invalid('timeout_ms', 'must be a non-negative integer (0 disables the timeout)');
  }
  return timeoutMs;
}

/** A rate limiter for one policy on Redis (ioredis `Redis` or `Cluster`). */
class Limiter {
  #redis;
  #policy;
  #timeoutMs;
  #metrics;

  constructor(redis, policy, options = {}) {
    if (!redis || typeof redis.evalsha !== 'function' || typeof redis.eval !== 'function') {
      throw invalid('redis', 'must be an ioredis Redis or Cluster client');
    }
    this.#redis = redis;
    this.#policy = createPolicy(policy);
    this.#timeoutMs = checkTimeout(options.timeoutMs);
    this.#metrics = options.metrics || null;
    this.policy = describe(this.#policy);
  }

  /** An in-memory limiter with the same decisions (core's engine), for tests and single processes. */
  static memory(policy, options) {
    return new MemoryLimiter(policy, options);
  }

  /** The Redis key of `tenant`. */
  key(tenant) {
    try {
      return this.#policy.key(str('tenant', tenant));
    } catch (e) {
      throw fromCore(e);
    }
  }

  /** Takes `cost` permits (default 1) if the window has room. Server time unless `nowMs` is given. */
  acquire(tenant, options) {
    return this.#check(tenant, options, false);
  }

  /** What `acquire` would answer, recording nothing. */
  peek(tenant, options) {
    return this.#check(tenant, options, true);
  }

  /** Forgets everything recorded for `tenant`; resolves to true if anything was. */
  async reset(tenant) {
    const key = this.key(tenant);
    try {
      return (await withTimeout(this.#redis.del(key), this.#timeoutMs, 'DEL')) > 0;
    } catch (err) {
      throw err instanceof UnavailableError ? err : fromRedis(err);
    }
  }

  async #check(tenant, options, peek) {
    let call;
    try {
      const { cost, nowMs } = readOptions(options);
      call = decodeCall(this.#policy.buildCall(str('tenant', tenant), cost, nowMs, peek));
    } catch (e) {
      throw fromCore(e);
    }
    const reply = await withTimeout(this.#run(call, peek), this.#timeoutMs, 'the script');
    let decision;
    try {
      decision = parseReply(reply);
    } catch (e) {
      throw fromCore(e);
    }
    if (!peek && this.#metrics) this.#metrics.observe(this.policy.resource, tenant, decision);
    return decision;
  }

  // EVALSHA; after a NOSCRIPT (empty cache after a restart or failover, or a
  // new Cluster node) EVAL once on the same routed connection. NOSCRIPT means
  // the script did not run, so the retry cannot double-count.
  // `call` is [sha1, numkeys, ...keys, ...args].
  #run(call, peek) {
    return this.#redis.evalsha(...call).catch((err) => {
      if (!isServerError(err) || core.classifyServerError(err.message).kind !== 'noscript') {
        throw fromRedis(err);
      }
      call[0] = this.#policy.scriptText(peek);
      return this.#redis.eval(...call).catch((retryErr) => {
        throw fromRedis(retryErr);
      });
    });
  }
}

/** Core's in-memory engine behind the Limiter API; the process clock stands in for Redis TIME. */
class MemoryLimiter {
  #engine;
  #policy;
  #clock;
  #metrics;

  constructor(policy, options = {}) {
    this.#policy = createPolicy(policy);
    this.#engine = options.engine || new core.MemoryEngine();
    this.#clock = options.clock || Date.now;
    this.#metrics = options.metrics || null;
    this.policy = describe(this.#policy);
  }

  key(tenant) {
    try {
      return this.#policy.key(str('tenant', tenant));
    } catch (e) {
      throw fromCore(e);
    }
  }

  async acquire(tenant, options) {
    const decision = this.#check(tenant, options, false);
    if (this.#metrics) this.#metrics.observe(this.policy.resource, tenant, decision);
    return decision;
  }

  async peek(tenant, options) {
    return this.#check(tenant, options, true);
  }

  async reset(tenant) {
    try {
      return this.#engine.reset(this.#policy, str('tenant', tenant));
    } catch (e) {
      throw fromCore(e);
    }
  }

  #check(tenant, options, peek) {
    try {
      const { cost, nowMs } = readOptions(options);
      const now = nowMs === undefined ? this.#clock() : nowMs;
      const run = peek ? this.#engine.peek : this.#engine.acquire;
      return run.call(this.#engine, this.#policy, str('tenant', tenant), cost, now);
    } catch (e) {
      throw fromCore(e);
    }
  }
}

module.exports = { Limiter, MemoryLimiter, createPolicy };
