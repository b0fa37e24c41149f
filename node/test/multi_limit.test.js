'use strict';
// Policies of several limits (`limits: [...]`), on a real redis-server and on
// the memory engine; run once per implementation like limiter.test.js.

const test = require('node:test');
const assert = require('node:assert/strict');
const slidelimit = require('..');
const { unique, connect } = require('./helpers');

const { Limiter, MemoryLimiter, InvalidArgumentError } = slidelimit;

let redis;
test.before(() => {
  redis = connect();
});
test.after(() => redis.disconnect());

// 2 per second (log) and 3 per minute (bucketed, 60 buckets of 1 s).
function twoLimits(overrides = {}) {
  return {
    resource: unique('multi'),
    limits: [
      { algorithm: 'sliding_log', limit: 2, windowMs: 1000 },
      { algorithm: 'bucketed_window', limit: 3, windowMs: 60_000 },
    ],
    ...overrides,
  };
}

async function assertInvalid(fn, field) {
  const check = (err) => {
    assert.ok(err instanceof InvalidArgumentError, `expected InvalidArgumentError, got ${err && err.stack}`);
    assert.equal(err.field, field, `field of: ${err.message}`);
    assert.ok(err.message.startsWith(`${field}: `), err.message);
    return true;
  };
  if (typeof fn === 'function') assert.throws(fn, check);
  else await assert.rejects(fn, check);
}

test('the policy lists its limits, frozen, with core\'s defaults filled in', () => {
  const l = new Limiter(redis, twoLimits());
  const { limits } = l.policy;
  assert.deepEqual(limits, [
    { algorithm: 'sliding_log', limit: 2, windowMs: 1000 },
    { algorithm: 'bucketed_window', limit: 3, windowMs: 60_000, buckets: 60 },
  ]);
  assert.ok(Object.isFrozen(limits) && limits.every(Object.isFrozen));
  assert.throws(() => limits.push({}), TypeError);
  assert.throws(() => {
    limits[0].limit = 99;
  }, TypeError);
  // The top-level fields are the first limit's.
  assert.deepEqual([l.policy.algorithm, l.policy.limit, l.policy.windowMs], ['sliding_log', 2, 1000]);
  assert.equal('buckets' in l.policy, false);
  // A missing algorithm is core's default; one limit is the plain policy.
  const one = Limiter.memory({ resource: 'geo', limits: [{ limit: 5, windowMs: 1000 }] });
  assert.deepEqual(one.policy, Limiter.memory({ resource: 'geo', limit: 5, windowMs: 1000 }).policy);
  assert.equal(one.key('t'), 'rl:{geo:t}:log:1000');
});

// Times on the caller's clock, so every value follows from docs/protocol.md:
// the log's retry is s + W - now for the oldest counting entry s; a bucketed
// permit of bucket b (width 1000) is held until (b + 1) * 1000 - 1 + 60000.
test('every limit must allow; records in all or none; deniedBy names the denying limit', async () => {
  const p = twoLimits();
  for (const l of [new Limiter(redis, p), new MemoryLimiter(p)]) {
    const onRedis = l instanceof Limiter;
    const [logKey, bucketKey] = [`rl:{${p.resource}:t}:log:1000`, `rl:{${p.resource}:t}:bucketed:60000:60`];
    const at = (nowMs) => l.acquire('t', { nowMs });
    // The bucketed limit alone is the plain policy on the same key: a peek of
    // cost 1 that allows leaves remaining = 3 - held - 1.
    const bucketedAlone = new Limiter(redis, { resource: p.resource, ...p.limits[1] });
    assert.equal(bucketedAlone.key('t'), bucketKey);
    const bucketedHeld = async (nowMs) => {
      const d = await bucketedAlone.peek('t', { nowMs });
      assert.equal(d.allowed, true);
      return 3 - 1 - d.remaining;
    };
    const T = 1_000_000;
    assert.deepEqual(await at(T), { allowed: true, remaining: 1, retryAfterMs: 0, resetAfterMs: 60_999, nowMs: T, deniedBy: null });
    assert.equal((await at(T)).allowed, true);
    // The log is full (2 at T): denied by limits[0], retry T + 1000 - (T + 1).
    // remaining = min(log 0, bucketed 3 - 2); reset = max(log 999, bucketed 60_998).
    const byLog = { allowed: false, remaining: 0, retryAfterMs: 999, resetAfterMs: 60_998, nowMs: T + 1, deniedBy: 0 };
    assert.deepEqual(await at(T + 1), byLog);
    assert.deepEqual(await l.peek('t', { nowMs: T + 1 }), byLog);
    if (onRedis) {
      // The bucketed window would have taken it, and did not record it.
      assert.deepEqual(await redis.lrange(logKey, 0, -1), [String(T), String(T)]);
      assert.equal(await bucketedHeld(T + 1), 2);
    }
    // At T + 1000 the log's entries have expired: the third permit of the minute.
    assert.equal((await at(T + 1000)).allowed, true);
    // Now the bucketed window is full: denied by limits[1] though the log has
    // room. Its oldest bucket (1000) counts until x = 1001 * 1000 - 1 + 60000
    // (the retry), the newest (1001) until 1_061_999 (the reset).
    assert.deepEqual(await at(T + 1001), {
      allowed: false,
      remaining: 0,
      retryAfterMs: 1_060_999 - (T + 1001),
      resetAfterMs: 1_061_999 - (T + 1001),
      nowMs: T + 1001,
      deniedBy: 1,
    });
    if (onRedis) {
      assert.deepEqual(await redis.lrange(logKey, 0, -1), [String(T + 1000)], 'the log did not record the denial');
      // All 3 held: a peek of the limit alone denies.
      assert.equal((await bucketedAlone.peek('t', { nowMs: T + 1001 })).allowed, false);
      assert.equal((await bucketedAlone.peek('t', { nowMs: T + 1001 })).remaining, 0);
    }
    // A cost above the lowest limit could never pass: core's error on cost.
    await assertInvalid(l.acquire('t', { cost: 3, nowMs: T + 2000 }), 'cost');
    // reset deletes every limit's key.
    assert.equal(await l.reset('t'), true);
    if (onRedis) assert.equal(await redis.exists(logKey, bucketKey), 0);
    assert.equal(await l.reset('t'), false);
    assert.equal((await at(T + 1002)).allowed, true);
    await l.reset('t');
  }
});

test('a one-limit policy and a policy of several share nothing but their keys', async () => {
  const resource = unique('multi-share');
  const multi = new Limiter(redis, twoLimits({ resource }));
  const plain = new Limiter(redis, { resource, limit: 2, windowMs: 1000 });
  assert.equal(plain.key('t'), multi.key('t'), 'key() is the first limit\'s');
  await plain.acquire('t', { cost: 2, nowMs: 5000 });
  assert.equal((await multi.acquire('t', { nowMs: 5001 })).deniedBy, 0, 'one budget for the log');
  assert.equal(slidelimit.slot(multi.key('t')), slidelimit.slot(`rl:{${resource}:t}:bucketed:60000:60`));
  await multi.reset('t');
});

test('server time works for several limits', async () => {
  const l = new Limiter(redis, twoLimits(), { denyCache: false });
  const [seconds] = await redis.time();
  const d = await l.acquire('t');
  assert.equal(d.allowed, true);
  assert.ok(Math.abs(d.nowMs - Number(seconds) * 1000) < 5000, `${d.nowMs}`);
  await l.acquire('t');
  const denied = await l.acquire('t');
  assert.equal(denied.allowed, false);
  assert.equal(denied.deniedBy, 0);
  await l.reset('t');
});

test('bad limits are invalid_argument naming the field as core does', async () => {
  const log = { algorithm: 'sliding_log', limit: 2, windowMs: 1000 };
  const bad = [
    [{ limits: [log, { limit: 3, windowMs: 1.5 }] }, 'limits[1].window_ms'],
    [{ limits: [log, { limit: 3, windowMs: 0 }] }, 'limits[1].window_ms'],
    [{ limits: [log, { limit: 0, windowMs: 10 }] }, 'limits[1].limit'],
    [{ limits: [log, { limit: '3', windowMs: 10 }] }, 'limits[1].limit'],
    [{ limits: [log, { limit: 3 }] }, 'limits[1].window_ms'],
    [{ limits: [{ ...log, algorithm: 'fixed' }, log] }, 'limits[0].algorithm'],
    [{ limits: [log, { ...log, algorithm: 7 }] }, 'limits[1].algorithm'],
    [{ limits: [log, { algorithm: 'bucketed_window', limit: 3, windowMs: 1000, buckets: 7 }] }, 'limits[1].buckets'],
    [{ limits: [log, { algorithm: 'bucketed_window', limit: 3, windowMs: 1000, buckets: '4' }] }, 'limits[1].buckets'],
    [{ limits: [log, { ...log, windowMs: 2000, buckets: 4 }] }, 'limits[1].buckets'],
    // One limit: the plain names.
    [{ limits: [{ limit: 3, windowMs: 1.5 }] }, 'window_ms'],
    // The list itself.
    [{ limits: [] }, 'limits'],
    [{ limits: Array.from({ length: 9 }, (_, i) => ({ limit: 1, windowMs: 1000 + i })) }, 'limits'],
    [{ limits: Array.from({ length: 9 }, () => 'not even an object') }, 'limits'],
    [{ limits: [log, { ...log, limit: 5 }] }, 'limits'], // one key twice
    [{ limits: [log, null] }, 'limits'],
    [{ limits: [log, []] }, 'limits'],
    [{ limits: 'log' }, 'limits'],
    [{ limits: [log], limit: 2 }, 'limits'],
    [{ limits: [log], algorithm: 'sliding_log' }, 'limits'],
    [{ limits: [log], resource: 'a{b' }, 'resource'],
  ];
  for (const [overrides, field] of bad) {
    const p = { resource: 'geo', ...overrides };
    await assertInvalid(() => new Limiter(redis, p), field);
    await assertInvalid(() => new MemoryLimiter(p), field);
  }
  const e = (() => {
    try {
      return new MemoryLimiter({ resource: 'geo', limits: [log, { limit: 3, windowMs: 1.5 }] });
    } catch (err) {
      return err;
    }
  })();
  assert.equal(e.message, 'limits[1].window_ms: must be an integer, got 1.5');
  // Eight is the most core takes.
  const eight = Array.from({ length: 8 }, (_, i) => ({ limit: 1, windowMs: 1000 * (i + 1) }));
  assert.equal(Limiter.memory({ resource: 'geo', limits: eight }).policy.limits.length, 8);
});
