'use strict';
// The limiters. Everything about the contract (keys, validation, calls,
// replies, error codes) comes from slidelimit-core through `binding`; this
// file only moves calls to Redis with ioredis and back.

const binding = require('./binding');
const { splitCall, numberReplyParser, textReplyParser } = require('./codec');
const {
  UnavailableError,
  makeError,
  fromCore,
  invalid,
  isRecord,
  onlyKnown,
} = require('./errors');

const { core, constants } = binding;
const parseReply = numberReplyParser();
// For clients with ioredis `stringNumbers`, which hands integers over as strings.
const parseStringReply = textReplyParser();

function str(field, value) {
  if (typeof value !== 'string') throw invalid(field, `must be a string, got ${typeof value}`);
  return value;
}

// JS strings are UTF-16 and may hold unpaired surrogates, which the addon and
// the wasm build would turn into U+FFFD on the way to core: two tenants would
// share a key. Such a string is no valid tenant, like invalid UTF-8 in Go.
const LONE_SURROGATE = /\p{Cs}/u;

function tenantOf(value) {
  str('tenant', value);
  if (LONE_SURROGATE.test(value)) {
    throw invalid('tenant', 'is not well-formed Unicode (it holds an unpaired surrogate)');
  }
  return value;
}

// Only the JS type is checked here; core checks finiteness, sign, integrality
// and ranges of the number itself.
function num(field, value) {
  if (typeof value !== 'number') throw invalid(field, `must be a number, got ${typeof value}`);
  return value;
}

// The fields of a policy of one limit; `limits` replaces all of them.
const SINGLE_FIELDS = ['algorithm', 'limit', 'windowMs', 'buckets'];
const POLICY_FIELDS = ['namespace', 'resource', ...SINGLE_FIELDS, 'limits'];
const LIMITER_OPTIONS = ['timeoutMs', 'metrics', 'denyCache'];
const MEMORY_LIMITER_OPTIONS = ['engine', 'clock', 'metrics'];
const CHECK_OPTIONS = ['cost', 'nowMs'];

/**
 * Builds core's Policy from `{ namespace, resource, algorithm, limit, windowMs, buckets }`
 * or `{ namespace, resource, limits: [{ algorithm, limit, windowMs, buckets }, ...] }`.
 */
function createPolicy(spec) {
  if (!isRecord(spec)) throw invalid('policy', 'must be an object');
  onlyKnown(spec, POLICY_FIELDS);
  if (spec.limits !== undefined) return createLimitsPolicy(spec);
  const {
    namespace = constants.defaults.namespace,
    resource,
    algorithm = constants.defaults.algorithm,
    limit,
    windowMs,
    buckets,
  } = spec;
  str('namespace', namespace);
  str('resource', resource);
  str('algorithm', algorithm);
  num('limit', limit);
  num('window_ms', windowMs);
  // undefined: core's default for a bucketed window, none for the others.
  if (buckets !== undefined) num('buckets', buckets);
  try {
    return new core.Policy(namespace, resource, algorithm, limit, windowMs, buckets);
  } catch (e) {
    throw fromCore(e);
  }
}

function createLimitsPolicy(spec) {
  const { namespace = constants.defaults.namespace, resource, limits } = spec;
  const both = SINGLE_FIELDS.filter((name) => spec[name] !== undefined);
  if (both.length !== 0) {
    throw invalid('limits', `give either limits or ${both.join(', ')}, not both`);
  }
  str('namespace', namespace);
  str('resource', resource);
  if (!Array.isArray(limits)) throw invalid('limits', 'must be an array of { algorithm, limit, windowMs, buckets }');
  const n = limits.length;
  // Field names are core's: `limit` for one limit, `limits[1].limit` for
  // several. A list longer than core takes (no name for its last limit) core
  // refuses whole before reading any limit: its values are not looked at.
  const named = n === 1 ? (i, field) => field : (i, field) => core.limitField(i, field);
  const readable = n === 0 || named(n - 1, 'limit') != null; // napi: null, wasm: undefined
  const algorithms = new Array(n).fill(constants.defaults.algorithm);
  const values = new Array(n).fill(0);
  const windows = new Array(n).fill(0);
  const buckets = new Array(n).fill(undefined);
  for (let i = 0; readable && i < n; i++) {
    const l = limits[i];
    if (!isRecord(l)) throw invalid('limits', `limits[${i}] must be an object`);
    onlyKnown(l, SINGLE_FIELDS, (key) => `limits[${i}].${key}`);
    const { algorithm = constants.defaults.algorithm, limit, windowMs, buckets: count } = l;
    algorithms[i] = str(named(i, 'algorithm'), algorithm);
    values[i] = num(named(i, 'limit'), limit);
    windows[i] = num(named(i, 'window_ms'), windowMs);
    if (count !== undefined) buckets[i] = num(named(i, 'buckets'), count);
  }
  try {
    return core.Policy.withLimits(namespace, resource, algorithms, values, windows, buckets);
  } catch (e) {
    throw fromCore(e);
  }
}

function describe(policy) {
  const limits = JSON.parse(policy.limitsJson()).map((l) => Object.freeze(l));
  return Object.freeze({
    namespace: policy.namespace,
    resource: policy.resource,
    // The first limit's (the only one's, for a policy of one limit).
    algorithm: policy.algorithm,
    limit: policy.limit,
    windowMs: policy.windowMs,
    // Only a bucketed window has buckets (napi says null, wasm undefined).
    ...(policy.buckets == null ? {} : { buckets: policy.buckets }),
    limits: Object.freeze(limits),
  });
}

// Cost and time of one check: `undefined` options (the common call) allocate nothing.
function readCost(options) {
  if (options === undefined) return 1;
  if (!isRecord(options)) throw invalid('options', 'must be an object');
  onlyKnown(options, CHECK_OPTIONS);
  return options.cost === undefined ? 1 : num('cost', options.cost);
}

function readNow(options) {
  return options === undefined || options.nowMs == null ? undefined : num('now_ms', options.nowMs);
}

// A bounded map from tenant to core's call for the default check (cost 1,
// server time): that call depends on nothing else, and building it is most of
// the binding's CPU per check. Two generations approximate LRU without
// reordering on every hit: a hit in the old generation moves to the young
// one, and a full young generation replaces the old.
const CALL_CACHE_SIZE = 2048;

class CallCache {
  #young = new Map();
  #old = new Map();

  get(tenant) {
    const call = this.#young.get(tenant);
    if (call !== undefined) return call;
    const old = this.#old.get(tenant);
    if (old !== undefined) this.#add(tenant, old);
    return old;
  }

  #add(tenant, call) {
    if (this.#young.size >= CALL_CACHE_SIZE) {
      this.#old = this.#young;
      this.#young = new Map();
    }
    this.#young.set(tenant, call);
  }

  set(tenant, call) {
    this.#add(tenant, call);
  }
}

function isServerError(err) {
  // ioredis (and redis-errors) name server replies `ReplyError`; matching the
  // name keeps working when the app has its own copy of ioredis.
  return err instanceof Error && err.name === 'ReplyError';
}

// A command that failed without a reply from the server (connection refused,
// reset, closed): the server could not be used.
function unavailable(err) {
  return makeError('unavailable', `redis unavailable: ${err && err.message}`, undefined, err);
}

// A failed script call on `key` with no retry left: a server's error reply
// maps by core's table (policy.mapServerError), anything else is unavailable.
function fromRedis(policy, key, err) {
  if (!isServerError(err)) return unavailable(err);
  return fromCore(policy.mapServerError(err.message, key, true), err);
}

// A failed command that is no script call (DEL), by the same table.
function fromRedisCommand(err) {
  if (!isServerError(err)) return unavailable(err);
  return fromCore(core.mapCommandError(err.message), err);
}

function timeoutError(ms) {
  return new UnavailableError('unavailable', `redis did not answer within ${ms} ms`);
}

// The in-flight calls of one limiter and the one timer that fails them after
// `ms`. All share one timeout, so deadlines grow in order of sending: a ring
// of (reject, deadline) slots, oldest first, with a timer armed for the
// oldest. A per-call setTimeout cost more CPU than the rest of the binding.
class Deadlines {
  #ms;
  #rejects = new Array(16); // undefined once the call settled
  #at = new Float64Array(16); // performance.now() deadlines (monotonic)
  #mask = 15;
  #head = 0; // tickets: slot = ticket & mask; head..tail-1 are in the ring
  #tail = 0;
  #timer = null;
  #sweep = () => this.#expire();

  constructor(ms) {
    this.#ms = ms;
  }

  /** Tracks a call; `reject` fails it with `unavailable` at the deadline. Returns its ticket. */
  add(reject) {
    if (this.#tail - this.#head > this.#mask) this.#grow();
    const ticket = this.#tail++;
    const slot = ticket & this.#mask;
    this.#rejects[slot] = reject;
    this.#at[slot] = performance.now() + this.#ms;
    if (this.#timer === null) this.#arm(this.#ms);
    return ticket;
  }

  /** Milliseconds left until the call's deadline; 0 once it settled or timed out. */
  left(ticket) {
    if (ticket < this.#head) return 0;
    const slot = ticket & this.#mask;
    if (this.#rejects[slot] === undefined) return 0;
    return Math.max(0, this.#at[slot] - performance.now());
  }

  /** Stops tracking a call; false if it already timed out. */
  done(ticket) {
    if (ticket < this.#head) return false;
    const slot = ticket & this.#mask;
    if (this.#rejects[slot] === undefined) return false;
    this.#rejects[slot] = undefined;
    // Replies mostly come back in order, so this is usually the head.
    while (this.#head < this.#tail && this.#rejects[this.#head & this.#mask] === undefined) this.#head++;
    return true;
  }

  #arm(delay) {
    // Unref'd: it must not hold a finished program open for up to `ms`; while a
    // command can still be answered, ioredis's socket or reconnect timer holds it.
    this.#timer = setTimeout(this.#sweep, delay);
    this.#timer.unref();
  }

  #expire() {
    this.#timer = null;
    const now = performance.now();
    while (this.#head < this.#tail) {
      const slot = this.#head & this.#mask;
      const reject = this.#rejects[slot];
      if (reject !== undefined) {
        if (this.#at[slot] > now) {
          this.#arm(Math.max(1, Math.ceil(this.#at[slot] - now)));
          return;
        }
        this.#rejects[slot] = undefined;
        reject(timeoutError(this.#ms));
      }
      this.#head++;
    }
  }

  // Doubles the ring; a ticket keeps its meaning (slot = ticket & mask).
  #grow() {
    const mask = this.#mask * 2 + 1;
    const rejects = new Array(mask + 1);
    const at = new Float64Array(mask + 1);
    for (let t = this.#head; t < this.#tail; t++) {
      rejects[t & mask] = this.#rejects[t & this.#mask];
      at[t & mask] = this.#at[t & this.#mask];
    }
    this.#rejects = rejects;
    this.#at = at;
    this.#mask = mask;
  }
}

// Core's rule and default, the same in every binding: 1 ..= 2^31 - 1 ms; 0
// is invalid (every check has a deadline).
function checkTimeout(timeoutMs) {
  if (timeoutMs === undefined) return constants.defaults.timeoutMs;
  num('timeout_ms', timeoutMs);
  try {
    return core.checkTimeoutMs(timeoutMs);
  } catch (e) {
    throw fromCore(e);
  }
}

// The local deny cache (core's DenyCache): on with core's default capacity
// unless the caller says `false` or gives `{ capacity }`.
function createDenyCache(option) {
  if (option === undefined || option === true) return new core.DenyCache();
  if (option === false || option === null) return null;
  if (!isRecord(option)) throw invalid('deny_cache', 'must be true, false or { capacity }');
  onlyKnown(option, ['capacity'], (key) => `denyCache.${key}`);
  const { capacity } = option;
  if (capacity !== undefined) num('deny_cache_capacity', capacity);
  try {
    return new core.DenyCache(capacity);
  } catch (e) {
    throw fromCore(e);
  }
}

// The deny cache's clock: monotonic, whole milliseconds.
const monoNow = () => Math.floor(performance.now());

function readLimiterOptions(options, known) {
  if (options === undefined) return {};
  if (!isRecord(options)) throw invalid('options', 'must be an object');
  onlyKnown(options, known);
  return options;
}

function checkMetrics(metrics) {
  if (metrics === undefined || metrics === null || metrics === false) return null;
  if (typeof metrics !== 'object' || typeof metrics.observe !== 'function') {
    throw invalid('metrics', 'must be a slidelimit Metrics (an object with observe(resource, tenant, decision))');
  }
  return metrics;
}

function hasPrefix(prefix) {
  return Boolean(prefix) && prefix.length !== 0;
}

function shown(prefix) {
  return `'${String(prefix)}'`;
}

// ioredis options that would change this limiter's keys or replies. A
// keyPrefix puts every key under another name than key() and every other
// binding use: a second, silent budget. Refused. `stringNumbers` hands the
// script's integers over as strings: read as such (see textReplyParser).
// Returns whether replies come as strings.
function checkClientOptions(redis) {
  const options = redis.options;
  if (options === null || typeof options !== 'object') return false;
  const node = options.redisOptions; // ioredis Cluster: the options of each node
  const prefixes = [
    ['keyPrefix', options.keyPrefix],
    ['redisOptions.keyPrefix', node && node.keyPrefix],
  ];
  for (const [name, prefix] of prefixes) {
    if (hasPrefix(prefix)) {
      const kind = redis.isCluster ? 'ioredis Cluster option' : 'ioredis';
      throw invalid(
        'redis',
        `${kind} ${name} ${shown(prefix)} would put this limiter's keys outside the shared budget ` +
          `(other workers and key() use the unprefixed keys); pass a client without ${name}`,
      );
    }
  }
  return Boolean(redis.isCluster ? node && node.stringNumbers : options.stringNumbers);
}

/** A rate limiter for one policy on Redis (ioredis `Redis` or `Cluster`). */
class Limiter {
  #redis;
  #policy;
  #deadlines;
  #metrics;
  #parse = parseReply;
  // How many limits the policy holds: core checks the reply against it.
  #limitCount;
  #calls = new CallCache();
  #denyCache;
  // Tenants the deny cache may hold (exact after each record or forget; a
  // check only drops entries): while 0, its calls would change nothing.
  #denied = 0;
  // The monotonic time of the latest acquire sent through the deny cache.
  #latestSentMs = 0;

  constructor(redis, policy, options) {
    if (!redis || typeof redis.evalsha !== 'function' || typeof redis.eval !== 'function') {
      throw invalid('redis', 'must be an ioredis Redis or Cluster client');
    }
    if (checkClientOptions(redis)) this.#parse = parseStringReply;
    this.#redis = redis;
    this.#policy = createPolicy(policy);
    const opts = readLimiterOptions(options, LIMITER_OPTIONS);
    this.#deadlines = new Deadlines(checkTimeout(opts.timeoutMs));
    this.#metrics = checkMetrics(opts.metrics);
    this.#denyCache = createDenyCache(opts.denyCache);
    this.policy = describe(this.#policy);
    this.#limitCount = this.policy.limits.length;
  }

  /** An in-memory limiter with the same decisions (core's engine), for tests and single processes. */
  static memory(policy, options) {
    return new MemoryLimiter(policy, options);
  }

  /** The Redis key of `tenant`. */
  key(tenant) {
    try {
      return this.#policy.key(tenantOf(tenant));
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

  /**
   * Forgets everything recorded for `tenant` (every limit's key) and its
   * cached denial in every limiter of the process (this one's cache on or
   * off); resolves to true if anything was recorded.
   */
  reset(tenant) {
    let keys;
    try {
      keys = this.#policy.keys(tenantOf(tenant));
    } catch (e) {
      return Promise.reject(fromCore(e));
    }
    this.#forgetDenials(tenant);
    return new Promise((resolve, reject) => {
      const ticket = this.#track(reject);
      this.#redis.del(...keys).then(
        (n) => {
          // Again, even if the call already timed out: the keys are gone,
          // and a denial Redis gave before the DEL may have been cached
          // while it ran.
          this.#forgetDenials(tenant);
          if (this.#settle(ticket)) resolve(n > 0);
        },
        (err) => {
          this.#forgetDenials(tenant);
          if (this.#settle(ticket)) reject(fromRedisCommand(err));
        },
      );
    });
  }

  // Drops `tenant`'s cached denial in every limiter of the process: through
  // this limiter's cache, or core's process-wide call without one.
  #forgetDenials(tenant) {
    if (this.#denyCache !== null) this.#denied = this.#denyCache.forget(tenant);
    else core.forgetTenant(tenant);
  }

  // One promise per check, settled by whichever comes first: the reply (or
  // error) from ioredis, or the shared deadline timer.
  #check(tenant, options, peek) {
    let call;
    let cost;
    let nowMs;
    try {
      cost = readCost(options);
      nowMs = readNow(options);
      call = this.#callFor(tenant, cost, nowMs, peek);
    } catch (e) {
      return Promise.reject(fromCore(e));
    }
    // The deny cache serves acquires on server time only (after the call
    // was built: bad arguments are refused as without it).
    const cache = !peek && nowMs === undefined ? this.#denyCache : null;
    // Taken before the call: Redis decides after it, so a denial's retry
    // counted from here never outlasts Redis's (a slow reply would).
    const sentMs = cache !== null ? monoNow() : 0;
    // check is skipped while the cache is empty: record is told the latest
    // send, so a denial a reset may have overtaken is not cached.
    if (sentMs > this.#latestSentMs) this.#latestSentMs = sentMs;
    if (cache !== null && this.#denied > 0) {
      let local;
      try {
        local = cache.check(tenant, cost, sentMs);
      } catch (e) {
        return Promise.reject(fromCore(e));
      }
      if (local !== null) {
        try {
          if (this.#metrics) this.#metrics.observe(this.policy.resource, tenant, local, true);
        } catch (e) {
          return Promise.reject(e); // a failing metrics hook fails the call
        }
        return Promise.resolve(local);
      }
    }
    const policy = this.#policy;
    const key = call[2]; // [sha1, numkeys, key, ...]: the first limit's key
    return new Promise((resolve, reject) => {
      const ticket = this.#track(reject);
      const fail = (err) => {
        if (this.#settle(ticket)) reject(fromRedis(policy, key, err));
      };
      const answer = (reply) => {
        if (!this.#settle(ticket)) return; // already failed as unavailable
        let decision;
        try {
          decision = this.#parse(reply, this.#limitCount);
          // Every Redis answer to an acquire on server time goes to the cache
          // (an admission at most drops an entry: nothing to do while it is empty).
          if (cache !== null && (!decision.allowed || this.#denied > 0)) {
            this.#denied = cache.record(
              tenant,
              cost,
              decision.allowed,
              decision.remaining,
              decision.retryAfterMs,
              decision.resetAfterMs,
              decision.nowMs,
              decision.deniedBy,
              sentMs,
              this.#latestSentMs,
            );
          }
        } catch (e) {
          reject(fromCore(e));
          return;
        }
        try {
          if (!peek && this.#metrics) this.#metrics.observe(this.policy.resource, tenant, decision);
        } catch (e) {
          reject(e); // as before: a failing metrics hook fails the call
          return;
        }
        resolve(decision);
      };
      // EVALSHA; core's table says what an error reply means. On NOSCRIPT
      // (empty cache after a restart or failover, or a new Cluster node) EVAL
      // once on the same routed connection: the script did not run, so the
      // retry cannot double-count. A TRYAGAIN (a slot migrating under a
      // policy's keys; the script did not run either) goes again after
      // core's pause, while the deadline leaves room for it.
      let attempt = 0;
      const onError = (err) => {
        if (!isServerError(err)) return fail(err);
        const pause = core.resendPauseMs(err.message, attempt);
        if (pause != null && pause < this.#deadlines.left(ticket)) {
          attempt += 1;
          setTimeout(() => {
            // A loop that stalled past the deadline: the call was rejected
            // as unavailable, so no resend may spend a permit for it.
            if (this.#deadlines.left(ticket) > 0) this.#redis.evalsha(...call).then(answer, onError);
          }, pause);
          return undefined;
        }
        const failure = policy.mapServerError(err.message, key, false);
        if (failure !== null) {
          if (this.#settle(ticket)) reject(fromCore(failure, err));
          return undefined;
        }
        // A NOSCRIPT that came back after the deadline: the call is over
        // (rejected as unavailable), so no EVAL may spend a permit for it.
        if (this.#deadlines.left(ticket) <= 0) return undefined;
        const retry = call.slice(); // `call` may be cached: never modify it
        retry[0] = policy.scriptText(peek);
        return this.#redis.eval(...retry).then(answer, fail);
      };
      this.#redis.evalsha(...call).then(answer, onError);
    });
  }

  #track(reject) {
    return this.#deadlines.add(reject);
  }

  // False when the call already timed out.
  #settle(ticket) {
    return this.#deadlines.done(ticket);
  }

  // Core's call as EVALSHA's arguments, [sha1, numkeys, ...keys, ...args].
  // The default acquire (cost 1, server time) is cached per tenant.
  #callFor(tenant, cost, nowMs, peek) {
    if (peek || cost !== 1 || nowMs !== undefined) return this.#build(tenant, cost, nowMs, peek);
    let call = this.#calls.get(tenant);
    if (call === undefined) {
      call = this.#build(tenant, 1, undefined, false);
      this.#calls.set(tenant, call);
    }
    return call;
  }

  #build(tenant, cost, nowMs, peek) {
    return splitCall(this.#policy.buildCall(tenantOf(tenant), cost, nowMs, peek));
  }
}

/** Core's in-memory engine behind the Limiter API; the process clock stands in for Redis TIME. */
class MemoryLimiter {
  #engine;
  #policy;
  #clock;
  #metrics;

  constructor(policy, options) {
    this.#policy = createPolicy(policy);
    const opts = readLimiterOptions(options, MEMORY_LIMITER_OPTIONS);
    if (opts.engine !== undefined && !(opts.engine instanceof core.MemoryEngine)) {
      throw invalid('engine', 'must be a MemoryEngine from this package');
    }
    if (opts.clock !== undefined && typeof opts.clock !== 'function') {
      throw invalid('clock', 'must be a function returning Unix milliseconds');
    }
    this.#engine = opts.engine || new core.MemoryEngine();
    this.#clock = opts.clock || Date.now;
    this.#metrics = checkMetrics(opts.metrics);
    this.policy = describe(this.#policy);
  }

  key(tenant) {
    try {
      return this.#policy.key(tenantOf(tenant));
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
      return this.#engine.reset(this.#policy, tenantOf(tenant));
    } catch (e) {
      throw fromCore(e);
    }
  }

  #check(tenant, options, peek) {
    try {
      const cost = readCost(options);
      const nowMs = readNow(options);
      // The clock stands in for Redis's and alone expires keys (as PEXPIRE
      // runs on server time), so it goes along even when the caller passes nowMs.
      const run = peek ? this.#engine.peek : this.#engine.acquire;
      const clockMs = num('clock_ms', this.#clock());
      return run.call(this.#engine, this.#policy, tenantOf(tenant), cost, nowMs, clockMs);
    } catch (e) {
      throw fromCore(e);
    }
  }
}

module.exports = { Limiter, MemoryLimiter, createPolicy };
