'use strict';
// The one JS suite, run once per implementation: SLIDELIMIT_IMPL=native and
// SLIDELIMIT_IMPL=wasm (make test-node does both) against a real redis-server.

const test = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const slidelimit = require('..');
const { unique, connect, freePort, sleep } = require('./helpers');

const { Limiter, MemoryLimiter, InvalidArgumentError, UnavailableError, WrongTypeError, SlidelimitError } = slidelimit;

let redis;
test.before(() => {
  redis = connect();
});
test.after(() => redis.disconnect());

function policy(overrides = {}) {
  return { namespace: 'rl', resource: unique('node'), algorithm: 'sliding_log', limit: 3, windowMs: 1000, ...overrides };
}

async function assertInvalid(promiseOrFn, field) {
  const check = (err) => {
    assert.ok(err instanceof InvalidArgumentError, `expected InvalidArgumentError, got ${err && err.stack}`);
    assert.ok(err instanceof SlidelimitError);
    assert.ok(err instanceof Error);
    assert.equal(err.code, 'invalid_argument');
    assert.equal(err.field, field, `field of: ${err.message}`);
    assert.ok(err.message.startsWith(`${field}: `), err.message);
    return true;
  };
  if (typeof promiseOrFn === 'function') assert.throws(promiseOrFn, check);
  else await assert.rejects(promiseOrFn, check);
}

test('the implementation is the one asked for', () => {
  const want = process.env.SLIDELIMIT_IMPL;
  assert.ok(['native', 'wasm'].includes(slidelimit.implementation));
  if (want === 'native' || want === 'wasm') assert.equal(slidelimit.implementation, want);
  assert.match(slidelimit.version, /^\d+\.\d+\.\d+/);
});

test('every core error code has its Error subclass', () => {
  assert.deepEqual(
    [...slidelimit.errorCodes],
    ['invalid_argument', 'unavailable', 'script_error', 'wrong_type', 'malformed_reply', 'permission_denied', 'internal'],
  );
  const classes = [
    slidelimit.InvalidArgumentError,
    slidelimit.UnavailableError,
    slidelimit.ScriptError,
    slidelimit.WrongTypeError,
    slidelimit.MalformedReplyError,
    slidelimit.PermissionDeniedError,
    slidelimit.InternalError,
  ];
  const errors = require('../lib/errors');
  for (const [i, code] of slidelimit.errorCodes.entries()) {
    const err = errors.makeError(code, 'x');
    assert.ok(err instanceof classes[i]);
    assert.equal(err.code, code);
  }
});

// The addon and the wasm build carry core's server-error table unchanged;
// limiter.js only sends EVAL when it says so and converts what it returns.
test('server error replies map by core\'s table', () => {
  const { core } = require('../lib/binding');
  const { fromCore, errorClasses } = require('../lib/errors');
  const p = new core.Policy('rl', 'geocode', 'sliding_counter', 10, 1000);
  const key = p.key('t');
  const noscript = 'NOSCRIPT No matching script. Please use EVAL.';
  assert.equal(p.mapServerError(noscript, key, false), null);
  const cases = [
    [noscript, true, 'script_error', undefined, noscript],
    ['MOVED 3999 127.0.0.1:7001', false, 'unavailable', undefined, /slot map is changing; retry/],
    ['ASK 3999 127.0.0.1:7001', true, 'unavailable', undefined, /slot map is changing; retry/],
    ['LOADING Redis is loading', false, 'unavailable', undefined, 'redis unavailable: LOADING Redis is loading'],
    ['BUSY Redis is busy', false, 'unavailable', undefined, /^redis unavailable: BUSY/],
    ['READONLY replica', false, 'unavailable', undefined, /^redis unavailable: READONLY/],
    ['WRONGTYPE Operation against a key', false, 'wrong_type', undefined,
      `key ${key} holds a value the sliding_counter algorithm does not use (another program's key, or the other algorithm's): WRONGTYPE Operation against a key`],
    ['NOPERM no permissions', false, 'permission_denied', undefined, 'NOPERM no permissions'],
    ['ERR slidelimit invalid_argument cost: must be at least 1', false, 'invalid_argument', 'cost', 'cost: must be at least 1'],
    ['ERR something else', false, 'script_error', undefined, 'ERR something else'],
  ];
  for (const [reply, afterRetry, code, field, message] of cases) {
    const cause = new Error(reply);
    const err = fromCore(p.mapServerError(reply, key, afterRetry), cause);
    assert.ok(err instanceof errorClasses[code], reply);
    assert.equal(err.code, code, reply);
    assert.equal(err.field, field, reply);
    if (typeof message === 'string') assert.equal(err.message, message, reply);
    else assert.match(err.message, message, reply);
    assert.equal(err.cause, cause);
  }
});

test('keys and slots come from core', () => {
  const l = new Limiter(redis, { namespace: 'rl', resource: 'geocode', limit: 600, windowMs: 60000 });
  assert.equal(l.key('tenant-17'), 'rl:{geocode:tenant-17}:log:60000');
  assert.equal(l.key('a}b'), 'rl:{geocode:a%7Db}:log:60000');
  assert.equal(l.key('a\0b c'), 'rl:{geocode:a%00b%20c}:log:60000');
  assert.equal(l.key('zoë-東京'), 'rl:{geocode:zoë-東京}:log:60000');
  assert.equal(slidelimit.slot('foo'), 12182);
  for (const key of [5, null, undefined, {}, ['foo']]) {
    assert.throws(() => slidelimit.slot(key), (e) => e instanceof InvalidArgumentError && e.field === 'key');
  }
  const c = Limiter.memory({ resource: 'geocode', algorithm: 'sliding_counter', limit: 1, windowMs: 1000 });
  assert.equal(c.key('t'), 'rl:{geocode:t}:counter:1000');
  assert.deepEqual(c.policy, {
    namespace: 'rl',
    resource: 'geocode',
    algorithm: 'sliding_counter',
    limit: 1,
    windowMs: 1000,
    limits: [{ algorithm: 'sliding_counter', limit: 1, windowMs: 1000 }],
  });
});

test('a bad policy is invalid_argument naming the field', async () => {
  const bad = [
    [{ namespace: '' }, 'namespace'],
    [{ namespace: 'rl:prod' }, 'namespace'],
    [{ resource: 'geo{code' }, 'resource'],
    [{ resource: 7 }, 'resource'],
    [{ algorithm: 'fixed' }, 'algorithm'],
    [{ limit: 0 }, 'limit'],
    [{ limit: -1 }, 'limit'],
    [{ limit: 1.5 }, 'limit'],
    [{ limit: NaN }, 'limit'],
    [{ limit: Infinity }, 'limit'],
    [{ limit: 2 ** 64 }, 'limit'],
    [{ limit: '5' }, 'limit'],
    [{ limit: 10n }, 'limit'],
    [{ windowMs: 0 }, 'window_ms'],
    [{ windowMs: -Infinity }, 'window_ms'],
    [{ windowMs: 0.5 }, 'window_ms'],
    [{ windowMs: undefined }, 'window_ms'],
    [{ limit: 2 ** 26 + 1, windowMs: 2 ** 26 }, 'limit'],
  ];
  for (const [overrides, field] of bad) {
    await assertInvalid(() => new Limiter(redis, policy(overrides)), field);
    await assertInvalid(() => new MemoryLimiter(policy(overrides)), field);
  }
  await assertInvalid(() => new Limiter(redis, null), 'policy');
  await assertInvalid(() => new Limiter(redis, []), 'policy');
  await assertInvalid(() => new Limiter({}, policy()), 'redis');
  await assertInvalid(() => new Limiter(redis, policy(), { timeoutMs: -1 }), 'timeout_ms');
});

test('assertInvalid fails when nothing or something else is thrown', async () => {
  // It is async: a call site without `await` could never fail a test.
  await assert.rejects(assertInvalid(() => {}, 'cost'));
  await assert.rejects(assertInvalid(() => new Limiter(redis, policy({ limit: 0 })), 'window_ms'));
  await assert.rejects(assertInvalid(Promise.resolve(1), 'cost'));
});

test('limiter options: timeout, options and metrics are checked when the limiter is made', async () => {
  // Core's timeout rule, as in every binding: 1 ..= 2^31 - 1 ms, no "no deadline".
  for (const timeoutMs of [0, -1, 1.5, NaN, Infinity, 2 ** 31, '100', null]) {
    await assertInvalid(() => new Limiter(redis, policy(), { timeoutMs }), 'timeout_ms');
  }
  assert.throws(() => new Limiter(redis, policy(), { timeoutMs: 0 }), /timeout_ms: must be at least 1 ms/);
  new Limiter(redis, policy(), { timeoutMs: 1 }); // valid, if too short to be answered in time
  const longest = new Limiter(redis, policy(), { timeoutMs: 2 ** 31 - 1 });
  assert.equal((await longest.acquire('t', { nowMs: 1000 })).allowed, true);
  // Options must be an object (undefined: the defaults); an array is none.
  for (const options of [null, 'fast', 5, []]) {
    await assertInvalid(() => new Limiter(redis, policy(), options), 'options');
  }
  // Metrics are checked here, not after the first permit is recorded.
  for (const metrics of [5, 'yes', true, {}, { observe: 1 }]) {
    await assertInvalid(() => new Limiter(redis, policy(), { metrics }), 'metrics');
  }
  for (const metrics of [undefined, null, false]) {
    assert.equal((await new Limiter(redis, policy(), { metrics }).acquire('t', { nowMs: 1000 })).allowed, true);
  }
});

test('memory limiter options are checked when the limiter is made, as on Redis', async () => {
  for (const options of [null, 'fast', 5, []]) {
    await assertInvalid(() => new MemoryLimiter(policy(), options), 'options');
    await assertInvalid(() => Limiter.memory(policy(), options), 'options');
  }
  for (const metrics of [5, 'yes', true, {}, { observe: 1 }]) {
    await assertInvalid(() => new MemoryLimiter(policy(), { metrics }), 'metrics');
  }
  await assertInvalid(() => new MemoryLimiter(policy(), { clock: 5 }), 'clock');
  await assertInvalid(() => new MemoryLimiter(policy(), { engine: {} }), 'engine');
  const m = new MemoryLimiter(policy(), { metrics: null, clock: () => 1000 });
  assert.equal((await m.acquire('t')).nowMs, 1000);
  // What the clock returns is checked as any number: native and wasm alike.
  for (const clock of [() => new Date(), () => '1000', () => undefined, () => 1000n, () => NaN, () => -1, () => 1.5]) {
    const bad = new MemoryLimiter(policy(), { metrics: null, clock });
    await assert.rejects(bad.acquire('t'), (e) => e instanceof InvalidArgumentError && e.field === 'clock_ms', String(clock));
  }
});

test('a resend after TRYAGAIN is not sent once the deadline has passed', async () => {
  let calls = 0;
  const stub = {
    options: {},
    evalsha: () => {
      calls += 1;
      return new Promise((_resolve, reject) => {
        setTimeout(() => {
          const err = new Error('TRYAGAIN Multiple keys request during rehashing of slot');
          err.name = 'ReplyError';
          reject(err);
          // The loop stalls past the deadline after the resend was planned.
          queueMicrotask(() => {
            const until = performance.now() + 80;
            while (performance.now() < until);
          });
        }, 25);
      });
    },
    eval: () => assert.fail('no EVAL'),
  };
  const limiter = new Limiter(stub, policy(), { timeoutMs: 50, metrics: null });
  await assert.rejects(limiter.acquire('t'), UnavailableError);
  await sleep(50);
  assert.equal(calls, 1, 'a resend spent a permit for a call already failed');
});

test('a misspelt key is refused, never left at its default', async () => {
  // `bucket` would leave 60 buckets, `namespce` the default namespace.
  await assertInvalid(() => new MemoryLimiter(policy({ algorithm: 'bucketed_window', windowMs: 60000, bucket: 10 })), 'bucket');
  await assertInvalid(() => new Limiter(redis, policy({ namespce: 'billing' })), 'namespce');
  await assertInvalid(() => new Limiter(redis, policy({ window_ms: 1000 })), 'window_ms');
  const limits = [{ limit: 2, windowMs: 1000 }, { limit: 9, windowMs: 60000, bucket: 10 }];
  const { algorithm, limit, windowMs, ...rest } = policy();
  await assertInvalid(() => new MemoryLimiter({ ...rest, limits }), 'limits[1].bucket');
  await assertInvalid(() => new Limiter(redis, policy(), { timeout: 5 }), 'timeout');
  await assertInvalid(() => new Limiter(redis, policy(), { denyCache: { capacty: 5 } }), 'denyCache.capacty');
  // A memory limiter has no Redis calls to cache or bound: as in Python and Ruby.
  await assertInvalid(() => new MemoryLimiter(policy(), { denyCache: false }), 'denyCache');
  await assertInvalid(() => Limiter.memory(policy(), { timeoutMs: 5 }), 'timeoutMs');
  const onRedis = new Limiter(redis, policy());
  const inMemory = new MemoryLimiter(policy());
  for (const l of [onRedis, inMemory]) {
    await assertInvalid(l.acquire('t', { now_ms: 5 }), 'now_ms');
    await assertInvalid(l.peek('t', { cost: 1, costs: 2 }), 'costs');
    assert.equal((await l.acquire('t', { nowMs: 5000, cost: 2 })).remaining, 1);
  }
  const err = (() => {
    try {
      new MemoryLimiter(policy({ bucket: 10 }));
    } catch (e) {
      return e;
    }
    assert.fail('an unknown policy field must be refused when the limiter is made');
  })();
  assert.match(err.message, /^bucket: unknown field; known: namespace, resource, algorithm, limit, windowMs, buckets, limits$/);
  await assertInvalid(() => new slidelimit.Metrics({ tenantLabels: true }), 'tenantLabels');
  // A wrong type is named here, not met later inside prom-client.
  const prom = require('prom-client');
  await assertInvalid(() => new slidelimit.Metrics(null), 'options');
  await assertInvalid(() => new slidelimit.Metrics([]), 'options');
  for (const [options, field] of [
    [{ tenantLabel: 'yes' }, 'tenant_label'],
    [{ registry: 5 }, 'registry'],
    [{ registry: null }, 'registry'],
    [{ client: {} }, 'client'],
    [{ client: null }, 'client'],
  ]) {
    await assertInvalid(() => new slidelimit.Metrics({ registry: new prom.Registry(), ...options }), field);
  }
});

test('a client whose keyPrefix would split the budget is refused', async () => {
  const cases = [
    [() => new Redis({ lazyConnect: true, keyPrefix: 'app:' }), /ioredis keyPrefix 'app:' would put/],
    [() => new Redis({ lazyConnect: true, keyPrefix: Buffer.from('b:') }), /keyPrefix 'b:'/],
    [
      () => new Redis.Cluster([{ port: 1 }], { lazyConnect: true, keyPrefix: 'app:' }),
      /Cluster option keyPrefix 'app:'/,
    ],
    [
      () => new Redis.Cluster([{ port: 1 }], { lazyConnect: true, redisOptions: { keyPrefix: 'n:' } }),
      /Cluster option keyPrefix 'n:'/, // ioredis copies it to the Cluster's own options
    ],
  ];
  for (const [make, message] of cases) {
    const client = make();
    try {
      await assertInvalid(() => new Limiter(client, policy()), 'redis');
      assert.throws(() => new Limiter(client, policy()), message);
      assert.throws(() => new Limiter(client, policy()), /pass a client without/);
    } finally {
      client.disconnect();
    }
  }
  // An empty prefix changes nothing.
  const plain = connect({ keyPrefix: '' });
  try {
    const l = new Limiter(plain, policy({ limit: 1 }));
    assert.equal((await l.acquire('t', { nowMs: 1000 })).allowed, true);
    assert.equal(await redis.exists(l.key('t')), 1);
  } finally {
    plain.disconnect();
  }
});

test('core reads a text reply only as Redis writes integers', () => {
  // What a stringNumbers client hands over goes to core as is; the addon and
  // the wasm build each turn JS values into core's reply values.
  const { core } = require('../lib/binding');
  assert.deepEqual(core.parseReplyValues(['0', '0', '250', 900, '5000'], 1), {
    allowed: false,
    remaining: 0,
    retryAfterMs: 250,
    resetAfterMs: 900,
    nowMs: 5000,
    deniedBy: null,
  });
  for (const bad of ['01', '+1', '1.0', ' 1', '', '9007199254740993', null, [1], { n: 1 }, true]) {
    assert.throws(
      () => core.parseReplyValues(['1', bad, '0', '1', '5'], 1),
      (e) => e.code === 'malformed_reply' && e.field === undefined,
      `element ${JSON.stringify(bad)}`,
    );
  }
  assert.throws(() => core.parseReplyValues(['1', '0', '0', '1'], 1), (e) => e.code === 'malformed_reply');
  // A reply that fits another policy: six elements for one limit, a
  // denying limit past the policy's last.
  assert.throws(() => core.parseReplyValues([0, 0, 250, 900, 5000, 1], 1), (e) => e.code === 'malformed_reply');
  assert.throws(() => core.parseReplyValues([0, 0, 250, 900, 5000, 3], 2), (e) => e.code === 'malformed_reply');
  assert.equal(core.parseReplyValues([0, 0, 250, 900, 5000, 2], 2).deniedBy, 1);
});

test('a client with stringNumbers shares the budget and reads every decision', async () => {
  // ioredis `stringNumbers` hands integer replies over as strings: the
  // limiter reads them, so a recorded permit is never reported as an error.
  const strings = connect({ stringNumbers: true });
  try {
    const p = policy({ limit: 2, windowMs: 60_000 });
    const viaStrings = new Limiter(strings, p);
    const plain = new Limiter(redis, p);
    assert.deepEqual(await viaStrings.acquire('t', { nowMs: 1_000_000 }), {
      allowed: true,
      remaining: 1,
      retryAfterMs: 0,
      resetAfterMs: 60_000,
      nowMs: 1_000_000,
      deniedBy: null,
    });
    assert.equal((await plain.acquire('t', { nowMs: 1_000_001 })).remaining, 0);
    assert.deepEqual(await viaStrings.acquire('t', { nowMs: 1_000_010 }), {
      allowed: false,
      remaining: 0,
      retryAfterMs: 59_990,
      resetAfterMs: 59_991,
      nowMs: 1_000_010,
      deniedBy: null,
    });
    assert.equal(await redis.llen(plain.key('t')), 2, 'one key, one budget');
    const d = await viaStrings.acquire('server-time');
    assert.equal(d.allowed, true);
    assert.equal(typeof d.nowMs, 'number');
    assert.equal((await viaStrings.peek('server-time')).remaining, 0);
    assert.equal(await viaStrings.reset('server-time'), true);
    assert.equal(await viaStrings.reset('server-time'), false);
  } finally {
    strings.disconnect();
  }
});

test('bad numbers and tenants are invalid_argument naming the field, on every method', async () => {
  const cases = [
    ['', {}, 'tenant'],
    ['x'.repeat(513), {}, 'tenant'],
    [42, {}, 'tenant'],
    [undefined, {}, 'tenant'],
    ['t', { cost: 0 }, 'cost'],
    ['t', { cost: 4 }, 'cost'],
    ['t', { cost: -1 }, 'cost'],
    ['t', { cost: 1.5 }, 'cost'],
    ['t', { cost: NaN }, 'cost'],
    ['t', { cost: Infinity }, 'cost'],
    ['t', { cost: 2 ** 53 + 2 }, 'cost'],
    ['t', { cost: 2 ** 70 }, 'cost'],
    ['t', { cost: '1' }, 'cost'],
    ['t', { cost: null }, 'cost'],
    ['t', { nowMs: -5 }, 'now_ms'],
    ['t', { nowMs: 1.25 }, 'now_ms'],
    ['t', { nowMs: NaN }, 'now_ms'],
    ['t', { nowMs: -Infinity }, 'now_ms'],
    ['t', { nowMs: 2 ** 52 + 1 }, 'now_ms'],
    ['t', { nowMs: 2 ** 60 }, 'now_ms'],
    ['t', { nowMs: '1000' }, 'now_ms'],
    ['t', 'fast', 'options'],
    ['t', [], 'options'],
  ];
  const p = policy();
  for (const limiter of [new Limiter(redis, p), new MemoryLimiter(p)]) {
    for (const [tenant, options, field] of cases) {
      await assertInvalid(limiter.acquire(tenant, options), field);
      await assertInvalid(limiter.peek(tenant, options), field);
    }
    await assertInvalid(limiter.reset(''), 'tenant');
    await assertInvalid(limiter.reset(null), 'tenant');
  }
  // Nothing reached Redis.
  assert.equal(await redis.exists(new Limiter(redis, p).key('t')), 0);
});

test('the sliding log fills, denies with the exact hint, and frees at s + W', async () => {
  const l = new Limiter(redis, policy());
  const at = (nowMs, cost = 1) => l.acquire('t-1', { cost, nowMs });
  assert.deepEqual(await at(10000), { allowed: true, remaining: 2, retryAfterMs: 0, resetAfterMs: 1000, nowMs: 10000, deniedBy: null });
  assert.deepEqual(await at(10100), { allowed: true, remaining: 1, retryAfterMs: 0, resetAfterMs: 1000, nowMs: 10100, deniedBy: null });
  assert.deepEqual(await at(10200), { allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: 1000, nowMs: 10200, deniedBy: null });
  assert.deepEqual(await at(10300), { allowed: false, remaining: 0, retryAfterMs: 700, resetAfterMs: 900, nowMs: 10300, deniedBy: null });
  assert.deepEqual(await at(10300, 2), { allowed: false, remaining: 0, retryAfterMs: 800, resetAfterMs: 900, nowMs: 10300, deniedBy: null });
  assert.equal((await at(10999)).allowed, false);
  assert.deepEqual(await at(11000), { allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: 1000, nowMs: 11000, deniedBy: null });
});

test('peek records nothing and reset forgets the tenant', async () => {
  const l = new Limiter(redis, policy({ limit: 2 }));
  const first = await l.peek('t', { nowMs: 5000 });
  assert.deepEqual(first, { allowed: true, remaining: 1, retryAfterMs: 0, resetAfterMs: 1000, nowMs: 5000, deniedBy: null });
  assert.equal(await redis.exists(l.key('t')), 0);
  await l.acquire('t', { cost: 2, nowMs: 5000 });
  assert.equal((await l.peek('t', { nowMs: 5001 })).allowed, false);
  assert.equal(await l.reset('t'), true);
  assert.equal(await l.reset('t'), false);
  assert.equal((await l.acquire('t', { cost: 2, nowMs: 5002 })).allowed, true);
});

test('server time is the default', async () => {
  const l = new Limiter(redis, policy({ windowMs: 60000 }));
  const [seconds, micros] = await redis.time();
  const d = await l.acquire('t');
  const serverMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  assert.equal(d.allowed, true);
  assert.ok(d.nowMs >= serverMs && d.nowMs < serverMs + 5000, `${d.nowMs} vs ${serverMs}`);
  const m = new MemoryLimiter(policy());
  const before = Date.now();
  const dm = await m.acquire('t');
  assert.ok(dm.nowMs >= before && dm.nowMs <= Date.now());
});

test('any tenant text works, control bytes and UTF-8 included', async () => {
  const l = new Limiter(redis, policy({ limit: 1 }));
  for (const tenant of ['a\0b', 'a%00b', '{x}', 'zoë-東京', 'x'.repeat(512)]) {
    assert.equal((await l.acquire(tenant, { nowMs: 1000 })).allowed, true, tenant);
    assert.equal((await l.acquire(tenant, { nowMs: 1000 })).allowed, false, tenant);
    assert.equal(await redis.exists(l.key(tenant)), 1);
  }
});

test('tenants and algorithms are isolated', async () => {
  const p = policy({ limit: 1 });
  const log = new Limiter(redis, p);
  const counter = new Limiter(redis, { ...p, algorithm: 'sliding_counter' });
  assert.equal((await log.acquire('a', { nowMs: 1000 })).allowed, true);
  assert.equal((await log.acquire('b', { nowMs: 1000 })).allowed, true);
  assert.equal((await counter.acquire('a', { nowMs: 1000 })).allowed, true);
  assert.equal((await log.acquire('a', { nowMs: 1000 })).allowed, false);
});

// A small differential run: Redis and core's memory engine, same steps.
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

for (const algorithm of ['sliding_log', 'sliding_counter']) {
  test(`redis and the memory engine agree (${algorithm})`, async () => {
    const random = rng(algorithm.length * 7919);
    for (let round = 0; round < 5; round++) {
      const p = policy({ algorithm, limit: 1 + Math.floor(random() * 6), windowMs: 50 + Math.floor(random() * 500) });
      const onRedis = new Limiter(redis, p);
      const inMemory = new MemoryLimiter(p);
      let now = 1_000_000;
      for (let i = 0; i < 120; i++) {
        now += Math.floor(random() * p.windowMs * 0.4);
        const tenant = random() < 0.8 ? 'a' : 'b';
        const cost = 1 + Math.floor(random() * p.limit);
        const options = { cost, nowMs: now };
        assert.deepEqual(await onRedis.acquire(tenant, options), await inMemory.acquire(tenant, options), `step ${i}`);
      }
    }
  });
}

test('redis and the memory engine agree (bucketed_window, random bucket counts)', async () => {
  const random = rng(4099);
  // Counts that divide the window, from one bucket to 1 ms buckets. Windows
  // of 1 s and more: keys expire on the real clock (Redis's and the memory
  // engine's), never during a round.
  const shapes = [[1000, 1], [1000, 4], [1200, 60], [3000, 3000], [60000, 60], [1000, 1000]];
  for (let round = 0; round < shapes.length; round++) {
    const [windowMs, buckets] = shapes[round];
    const p = policy({ algorithm: 'bucketed_window', buckets, limit: 1 + Math.floor(random() * 6), windowMs });
    const onRedis = new Limiter(redis, p);
    const inMemory = new MemoryLimiter(p);
    let now = 1_000_000;
    for (let i = 0; i < 120; i++) {
      // Mostly forward, sometimes a lagging caller.
      now += Math.floor((random() - 0.1) * p.windowMs * 0.4);
      const tenant = random() < 0.8 ? 'a' : 'b';
      const options = { cost: 1 + Math.floor(random() * p.limit), nowMs: now };
      const peek = random() < 0.2;
      const [got, want] = peek
        ? [await onRedis.peek(tenant, options), await inMemory.peek(tenant, options)]
        : [await onRedis.acquire(tenant, options), await inMemory.acquire(tenant, options)];
      assert.deepEqual(got, want, `round ${round} step ${i}`);
    }
  }
});

// Limit 3, window 1000 ms in 4 buckets of 250 ms: a permit admitted in bucket
// b is held until (b + 1) * 250 - 1 + 1000 (docs/protocol.md).
test('the bucketed window holds permits to the end of their bucket, on Redis and in memory', async () => {
  const p = policy({ algorithm: 'bucketed_window', buckets: 4 });
  for (const l of [new Limiter(redis, p), new MemoryLimiter(p)]) {
    const T = 1_800_000_000_000;
    const at = (ms, cost = 1) => l.acquire('t', { cost, nowMs: T + ms });
    assert.deepEqual(await at(0), { allowed: true, remaining: 2, retryAfterMs: 0, resetAfterMs: 1249, nowMs: T, deniedBy: null });
    assert.equal((await at(249)).allowed, true);
    assert.deepEqual(await at(250), { allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: 1249, nowMs: T + 250, deniedBy: null });
    assert.deepEqual(await at(260), { allowed: false, remaining: 0, retryAfterMs: 989, resetAfterMs: 1239, nowMs: T + 260, deniedBy: null });
    assert.equal((await at(1248)).allowed, false, 'bucket 0 counts through 1248');
    assert.deepEqual(await l.peek('t', { cost: 2, nowMs: T + 1249 }), { allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: 1000, nowMs: T + 1249, deniedBy: null });
    assert.equal((await at(1249, 2)).allowed, true);
    assert.deepEqual(await at(1300), { allowed: false, remaining: 0, retryAfterMs: 199, resetAfterMs: 949, nowMs: T + 1300, deniedBy: null });
    await assertInvalid(at(1300, 4), 'cost');
    assert.equal(await l.reset('t'), true);
    assert.equal((await at(1300, 3)).allowed, true);
  }
});

test('buckets: the option, the key, the default and core\'s errors', async () => {
  const l = new Limiter(redis, policy({ algorithm: 'bucketed_window', buckets: 4 }));
  assert.match(l.key('t'), /:bucketed:1000:4$/);
  assert.equal(l.policy.buckets, 4);
  const d = Limiter.memory({ resource: 'geocode', algorithm: 'bucketed_window', limit: 5, windowMs: 60000 });
  assert.equal(d.policy.buckets, 60, 'core\'s default');
  assert.equal(d.key('t'), 'rl:{geocode:t}:bucketed:60000:60');
  assert.deepEqual(d.policy, {
    namespace: 'rl',
    resource: 'geocode',
    algorithm: 'bucketed_window',
    limit: 5,
    windowMs: 60000,
    buckets: 60,
    limits: [{ algorithm: 'bucketed_window', limit: 5, windowMs: 60000, buckets: 60 }],
  });
  assert.equal('buckets' in new MemoryLimiter(policy()).policy, false, 'only a bucketed window has buckets');
  for (const [overrides, field] of [
    [{ algorithm: 'bucketed_window' }, 'buckets'], // the default 60 does not divide 1000
    [{ algorithm: 'bucketed_window', buckets: 7 }, 'buckets'],
    [{ algorithm: 'bucketed_window', buckets: 0 }, 'buckets'],
    [{ algorithm: 'bucketed_window', buckets: 2.5 }, 'buckets'],
    [{ algorithm: 'bucketed_window', buckets: -4 }, 'buckets'],
    [{ algorithm: 'bucketed_window', buckets: NaN }, 'buckets'],
    [{ algorithm: 'bucketed_window', buckets: '4' }, 'buckets'],
    [{ algorithm: 'bucketed_window', buckets: null }, 'buckets'],
    [{ algorithm: 'bucketed_window', windowMs: 3601, buckets: 3601 }, 'buckets'],
    [{ algorithm: 'sliding_log', buckets: 4 }, 'buckets'],
    [{ algorithm: 'sliding_counter', buckets: 4 }, 'buckets'],
  ]) {
    await assertInvalid(() => new Limiter(redis, policy(overrides)), field);
    await assertInvalid(() => new MemoryLimiter(policy(overrides)), field);
  }
});

test('a flushed script cache is invisible (NOSCRIPT falls back to EVAL once)', async () => {
  const l = new Limiter(redis, policy());
  assert.equal((await l.acquire('t', { nowMs: 1000 })).remaining, 2);
  await redis.script('FLUSH');
  assert.equal((await l.acquire('t', { nowMs: 1001 })).remaining, 1);
  await redis.script('FLUSH');
  assert.deepEqual(await l.peek('t', { nowMs: 1002 }), { allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: 1000, nowMs: 1002, deniedBy: null });
  assert.equal((await l.acquire('t', { nowMs: 1003 })).remaining, 0);
  assert.equal((await l.acquire('t', { nowMs: 1004 })).allowed, false);
});

test('the cached default call falls back to EVAL after NOSCRIPT and stays intact', async () => {
  // acquire(tenant) with no options reuses core's call for the tenant: the
  // EVAL retry must not change it for the next call.
  const l = new Limiter(redis, policy({ windowMs: 60000 }));
  assert.equal((await l.acquire('t')).remaining, 2);
  await redis.script('FLUSH');
  assert.equal((await l.acquire('t')).remaining, 1);
  await redis.script('FLUSH');
  assert.equal((await l.acquire('t')).remaining, 0);
  assert.equal((await l.acquire('t')).allowed, false);
  assert.equal(await redis.llen(l.key('t')), 3);
});

test('tenants beyond the call cache get their own budgets', async () => {
  // More tenants than the limiter keeps calls for, so early ones are evicted
  // and built again; each must still hit its own key.
  const l = new Limiter(redis, policy({ windowMs: 60000 }));
  const tenants = Array.from({ length: 5000 }, (_, i) => `tenant-${i}`);
  for (let i = 0; i < tenants.length; i += 500) {
    await Promise.all(tenants.slice(i, i + 500).map((t) => l.acquire(t)));
  }
  for (const t of ['tenant-0', 'tenant-2500', 'tenant-4999']) {
    assert.equal((await l.acquire(t)).remaining, 1, t);
    assert.equal(await redis.llen(l.key(t)), 2, t);
  }
  assert.equal((await l.acquire('tenant-0', { cost: 1 })).remaining, 0);
});

test('a key of another type is wrong_type', async () => {
  const l = new Limiter(redis, policy());
  await redis.set(l.key('t'), 'not a log', 'PX', 60_000); // a TTL: the run's TTL check is about slidelimit's keys
  await assert.rejects(l.acquire('t', { nowMs: 1000 }), (err) => {
    assert.ok(err instanceof WrongTypeError);
    assert.equal(err.code, 'wrong_type');
    assert.ok(err.message.startsWith(`key ${l.key('t')} holds a value the sliding_log algorithm`), err.message);
    return true;
  });
});

test('an unreachable Redis is unavailable within the timeout, never a decision', async () => {
  // Nothing listens on this port; ioredis keeps retrying, the limiter gives up.
  const dead = new Redis(freePort(), '127.0.0.1', { lazyConnect: false, retryStrategy: () => 50 });
  dead.on('error', () => {});
  try {
    const l = new Limiter(dead, policy(), { timeoutMs: 200 });
    for (const call of [() => l.acquire('t'), () => l.peek('t'), () => l.reset('t')]) {
      const started = Date.now();
      await assert.rejects(call(), (err) => {
        assert.ok(err instanceof UnavailableError, String(err));
        assert.equal(err.code, 'unavailable');
        return true;
      });
      assert.ok(Date.now() - started < 1500, 'answered within the timeout');
    }
  } finally {
    dead.disconnect();
  }
});

test('a Redis that stops answering is unavailable after the timeout', async () => {
  const admin = connect();
  const client = connect();
  try {
    const l = new Limiter(client, policy(), { timeoutMs: 150 });
    await l.acquire('t', { nowMs: 1000 });
    await admin.call('CLIENT', 'PAUSE', '600', 'ALL');
    const started = Date.now();
    await assert.rejects(l.acquire('t', { nowMs: 1001 }), UnavailableError);
    const elapsed = Date.now() - started;
    assert.ok(elapsed >= 140 && elapsed < 500, `elapsed ${elapsed}`);
  } finally {
    await sleep(500);
    admin.disconnect();
    client.disconnect();
  }
});

test('calls in flight all fail after the timeout, then the limiter works again', async () => {
  const admin = connect();
  const client = connect();
  try {
    const l = new Limiter(client, policy({ limit: 1000, windowMs: 60000 }), { timeoutMs: 150 });
    await l.acquire('t');
    await admin.call('CLIENT', 'PAUSE', '600', 'ALL');
    const started = Date.now();
    // More calls than the timer's first ring holds, default and explicit options.
    const calls = Array.from({ length: 100 }, (_, i) => (i % 2 ? l.acquire(`t${i}`) : l.peek('t', { nowMs: 1000 + i })));
    const outcomes = await Promise.allSettled(calls);
    const elapsed = Date.now() - started;
    for (const o of outcomes) {
      assert.equal(o.status, 'rejected');
      assert.ok(o.reason instanceof UnavailableError, String(o.reason));
    }
    assert.ok(elapsed >= 140 && elapsed < 500, `elapsed ${elapsed}`);
    await sleep(600);
    assert.equal((await l.acquire('t')).allowed, true);
    assert.equal(await l.reset('t'), true);
  } finally {
    admin.disconnect();
    client.disconnect();
  }
});

test('metrics count allowed and denied and observe the wait', async () => {
  const prom = require('prom-client');
  const registry = new prom.Registry();
  const metrics = new slidelimit.Metrics({ registry, tenantLabel: true });
  const p = policy({ limit: 1 });
  const l = new Limiter(redis, p, { metrics });
  await l.acquire('t', { nowMs: 1000 });
  await l.acquire('t', { nowMs: 1250 });
  await l.peek('t', { nowMs: 1250 }); // peeks are not counted
  const m = new MemoryLimiter(p, { metrics });
  await m.acquire('u', { nowMs: 1000 });
  const text = await registry.metrics();
  assert.match(text, new RegExp(`ratelimit_allowed_total\\{resource="${p.resource}",tenant="t"\\} 1`));
  assert.match(text, new RegExp(`ratelimit_allowed_total\\{resource="${p.resource}",tenant="u"\\} 1`));
  assert.match(text, new RegExp(`ratelimit_denied_total\\{resource="${p.resource}",tenant="t"\\} 1`));
  assert.match(text, new RegExp(`ratelimit_wait_seconds_sum\\{resource="${p.resource}"\\} 0.75`));
  assert.match(text, new RegExp(`ratelimit_wait_seconds_count\\{resource="${p.resource}"\\} 1`));
  // Names, help texts and buckets are core's, the same in every binding.
  assert.match(text, /# HELP ratelimit_allowed_total Acquires allowed by the rate limiter\./);
  assert.match(text, /# HELP ratelimit_denied_total Acquires denied by the rate limiter\./);
  assert.match(text, /# HELP ratelimit_wait_seconds retry_after handed to denied callers, in seconds\./);
  assert.match(text, new RegExp(`ratelimit_wait_seconds_bucket\\{le="0.001",resource="${p.resource}"\\} 0`));
  assert.match(text, new RegExp(`ratelimit_wait_seconds_bucket\\{le="600",resource="${p.resource}"\\} 1`));

  const bare = new prom.Registry();
  const noTenant = new slidelimit.Metrics({ registry: bare });
  await new Limiter(redis, p, { metrics: noTenant }).acquire('v', { nowMs: 1000 });
  assert.match(await bare.metrics(), new RegExp(`ratelimit_allowed_total\\{resource="${p.resource}"\\} 1`));
});

test('concurrent acquires never admit more than the limit', async () => {
  const l = new Limiter(redis, policy({ limit: 50, windowMs: 60000 }));
  const results = await Promise.all(Array.from({ length: 200 }, () => l.acquire('hot')));
  assert.equal(results.filter((d) => d.allowed).length, 50);
});

// Redis expires a key by PEXPIRE on its own clock; the caller's nowMs is only
// the script's notion of time. The memory engine must do the same: a peek at a
// far caller time, or other tenants' calls, never make it forget a tenant.
for (const algorithm of ['sliding_log', 'sliding_counter']) {
  test(`the memory engine expires keys on its clock, never on caller time (${algorithm})`, async () => {
    const p = policy({ algorithm, limit: 1, windowMs: 60000 });
    const sequences = {
      'a peek at a far time': async (l) => [await l.peek('A', { nowMs: 1_000_000 })],
      '5,000 peeks on other tenants': async (l) => {
        const peeks = [];
        for (let i = 0; i < 5000; i += 500) {
          const batch = Array.from({ length: 500 }, (_, j) => l.peek(`other-${i + j}`, { nowMs: 5_000_000 }));
          peeks.push(...(await Promise.all(batch)));
        }
        return peeks;
      },
    };
    for (const [name, between] of Object.entries(sequences)) {
      const onRedis = new Limiter(redis, { ...p, resource: unique('node') });
      const inMemory = Limiter.memory(p);
      const steps = async (l) => [
        await l.acquire('A', { nowMs: 1000 }),
        ...(await between(l)),
        await l.acquire('A', { nowMs: 1001 }),
      ];
      const want = await steps(onRedis);
      const got = await steps(inMemory);
      assert.deepEqual(got, want, name);
      const last = got[got.length - 1];
      assert.equal(last.allowed, false, name);
      if (algorithm === 'sliding_log') assert.equal(last.retryAfterMs, 59999, name);
      await onRedis.reset('A');
    }
  });
}

// The driver's load op (docs/driver.md, node/scripts/driver.js) with skew_ms:
// every call is on the caller's clock, the wall clock plus the skew, and each
// decision record carries reset_after_ms; a skew beyond an hour is refused.
test('the driver load op with skew_ms calls on the caller clock', () => {
  const { spawnSync } = require('node:child_process');
  const fs = require('node:fs');
  const os = require('node:os');
  const path = require('node:path');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slidelimit-driver-'));
  const out = path.join(dir, 'node.jsonl');
  const skew = 3_600_000; // behind: far from the clock a memory store would use
  const before = Date.now();
  const [start, end] = [before + 2000, before + 2300]; // after the driver has started
  const load = { op: 'load', lang: 'node', tenant: 't', concurrency: 4, start_at_ms: start, end_at_ms: end };
  const requests = [
    { op: 'store', kind: 'memory' },
    { op: 'policy', resource: 'r', limit: 5, window_ms: 1000 },
    { ...load, jitter_ms: 2, skew_ms: -skew, out },
    ...[3_600_001, -3_600_001, 1.5, '5'].map((bad) => ({ ...load, end_at_ms: 0, skew_ms: bad, out })),
  ];
  const proc = spawnSync(process.execPath, [path.join(__dirname, '..', 'scripts', 'driver.js')], {
    input: requests.map((r) => JSON.stringify(r)).join('\n') + '\n',
    encoding: 'utf8',
    timeout: 30_000,
  });
  const after = Date.now();
  assert.equal(proc.status, 0, proc.stderr);
  const replies = proc.stdout.trim().split('\n').map((l) => JSON.parse(l));
  const records = fs.readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  fs.rmSync(dir, { recursive: true });
  assert.deepEqual(replies[2], { ok: true, calls: records.length, errors: 0 });
  assert.ok(records.length > 5, `calls were made: ${records.length}`);
  let allowed = 0;
  for (const r of records) {
    assert.ok(r.now_ms >= start - skew && r.now_ms <= after - skew, `now_ms ${r.now_ms} is not the caller clock`);
    assert.ok(Number.isSafeInteger(r.reset_after_ms), JSON.stringify(r));
    if (r.allowed) {
      allowed += 1;
      // The log records at now + reset_after - W, on the caller clock too.
      const recorded = r.now_ms + r.reset_after_ms - 1000;
      assert.ok(recorded >= start - skew && recorded <= after - skew, `recorded at ${recorded}`);
    }
  }
  assert.equal(allowed, 5, 'the limit holds within one window');
  for (const reply of replies.slice(3)) {
    assert.equal(reply.error, 'protocol');
    assert.match(reply.message, /^load: skew_ms must be/);
  }
});
