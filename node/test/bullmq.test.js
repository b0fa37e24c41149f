'use strict';
// The BullMQ integration on real queues and workers on a real Redis: a denied
// job is delayed (not a failed attempt) and completes later; deferrals are
// capped apart from attempts, per attempt; an unavailable limiter delays with
// backoff (never a failed attempt, never a deferral) or runs fail-open. Runs on
// whichever implementation loads (native by default).

const test = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { Queue, Worker } = require('bullmq');
const { Limiter } = require('..');
const { rateLimited, DeferralLimitError, OutageLimitError } = require('slidelimit/bullmq');
const { url, unique, freePort, startRedis, sleep } = require('./helpers');

const open = [];
function redisFor(purpose) {
  // BullMQ workers need maxRetriesPerRequest: null (blocking commands).
  const client = new Redis(url, { maxRetriesPerRequest: purpose === 'worker' ? null : 1 });
  open.push(client);
  return client;
}

test.after(async () => {
  for (const c of open) c.disconnect();
});

async function setup(processorFor, workerOptions = {}) {
  const name = unique('q');
  const queue = new Queue(name, { connection: redisFor('queue') });
  const worker = new Worker(name, processorFor(), { connection: redisFor('worker'), ...workerOptions });
  worker.on('error', () => {});
  const failures = []; // every failed attempt, with its reason
  worker.on('failed', (job, err) => failures.push({ id: job && job.id, err }));
  await worker.waitUntilReady();
  return {
    queue,
    worker,
    failures,
    close: async () => {
      await worker.close();
      await queue.close();
    },
  };
}

async function waitFor(what, predicate, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await predicate();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

const stateOf = async (queue, id) => (await queue.getJob(id)).getState();

test('a denied job is delayed for the hint, not failed, and completes later', async () => {
  const limiter = new Limiter(redisFor('limiter'), { resource: unique('geo'), limit: 1, windowMs: 1500 });
  const first = await limiter.acquire('k1'); // the budget of k1 is now spent
  const runs = [];
  const env = await setup(() =>
    rateLimited(
      limiter,
      async (job, _token, decision) => {
        runs.push({ at: Date.now(), decision, data: job.data });
        return `geocoded ${job.data.address}`;
      },
      { tenant: (job) => job.data.apiKey, jitterMs: 100 },
    ),
  );
  try {
    // attempts: 1: had the deferral counted as an attempt, the job would fail.
    const job = await env.queue.add('lookup', { apiKey: 'k1', address: 'Main St 1' }, { attempts: 1 });
    await waitFor('the job to be delayed', async () => (await stateOf(env.queue, job.id)) === 'delayed');
    const delayed = await env.queue.getJob(job.id);
    assert.equal(delayed.attemptsMade, 0, 'a deferral is not an attempt');
    assert.equal(delayed.data.slidelimit.deferrals, 1);
    assert.equal(runs.length, 0);
    const freeAt = first.nowMs + 1500; // the permit frees on the server clock (same machine)
    await waitFor('completion', async () => (await stateOf(env.queue, job.id)) === 'completed');
    const done = await env.queue.getJob(job.id);
    assert.equal(done.returnvalue, 'geocoded Main St 1');
    assert.equal(done.failedReason, undefined);
    assert.equal(runs.length, 1);
    assert.equal(runs[0].decision.allowed, true);
    // The wrapper's count stays its own: the processor gets the data enqueued.
    assert.deepEqual(runs[0].data, { apiKey: 'k1', address: 'Main St 1' });
    assert.ok(runs[0].decision.nowMs >= freeAt, 'not run before the permit freed');
    // Delayed for the hint plus at most 100 ms jitter; the rest is slack for a busy machine.
    assert.ok(runs[0].at - freeAt < 100 + 1500, `ran ${runs[0].at - freeAt} ms after the permit freed`);
  } finally {
    await env.close();
  }
});

test('one tenant out of budget does not hold up another', async () => {
  const limiter = new Limiter(redisFor('limiter'), { resource: unique('geo'), limit: 1, windowMs: 60_000 });
  await limiter.acquire('busy');
  const env = await setup(() => rateLimited(limiter, async (job) => job.data.apiKey, { tenant: (job) => job.data.apiKey }));
  try {
    const blocked = await env.queue.add('lookup', { apiKey: 'busy' });
    const free = await env.queue.add('lookup', { apiKey: 'quiet' });
    await waitFor('the free tenant', async () => (await stateOf(env.queue, free.id)) === 'completed');
    assert.equal(await stateOf(env.queue, blocked.id), 'delayed');
  } finally {
    await env.close();
  }
});

test('deferrals are capped apart from attempts', async () => {
  const limiter = new Limiter(redisFor('limiter'), { resource: unique('geo'), limit: 2, windowMs: 400 });
  let hog = true;
  // Another worker takes a permit whenever one frees, so the window is never
  // empty and a job of cost 2 (the whole limit) can never pass.
  const hogLoop = (async () => {
    while (hog) {
      await limiter.acquire('k1');
      await sleep(5);
    }
  })();
  const env = await setup(() =>
    rateLimited(limiter, async () => 'never', {
      tenant: (job) => job.data.apiKey,
      cost: () => 2,
      maxDeferrals: 2,
      jitterMs: 0,
    }),
  );
  try {
    const job = await env.queue.add('lookup', { apiKey: 'k1' }, { attempts: 1 });
    await waitFor('failure after the cap', async () => (await stateOf(env.queue, job.id)) === 'failed');
    const failed = await env.queue.getJob(job.id);
    assert.equal(failed.data.slidelimit.deferrals, 2);
    assert.equal(failed.attemptsMade, 1, 'only the capped run is an attempt');
    assert.match(failed.failedReason, /deferred 2 times/);
  } finally {
    hog = false;
    await hogLoop;
    await env.close();
  }
  assert.equal(new DeferralLimitError(3).deferrals, 3);
});

function deadLimiter() {
  // Nothing listens on this port: every acquire is `unavailable` after 100 ms.
  const dead = new Redis(freePort(), '127.0.0.1', { retryStrategy: () => 50, maxRetriesPerRequest: null });
  dead.on('error', () => {});
  open.push(dead);
  return new Limiter(dead, { resource: unique('geo'), limit: 10, windowMs: 1000 }, { timeoutMs: 100 });
}

test('an unavailable Redis delays the job with backoff by default', async () => {
  const limiter = deadLimiter();
  const env = await setup(() =>
    rateLimited(limiter, async () => 'ran', {
      tenant: (job) => job.data.apiKey,
      jitterMs: 0,
      unavailableBackoff: { baseMs: 300, maxMs: 1000 },
    }),
  );
  try {
    const job = await env.queue.add('lookup', { apiKey: 'k1' }, { attempts: 1 });
    await waitFor('a second deferral', async () => {
      const j = await env.queue.getJob(job.id);
      return j.data.slidelimit && j.data.slidelimit.unavailable >= 2 && (await j.getState()) === 'delayed' ? j : null;
    });
    const j = await env.queue.getJob(job.id);
    assert.equal(j.attemptsMade, 0);
    // The second deferral waits twice as long as the first (300 ms).
    assert.ok(j.delay > 550 && j.delay <= 600, `delay ${j.delay}`);
  } finally {
    await env.close();
  }
});

test('fail-open runs the job without a decision when Redis is unavailable', async () => {
  const limiter = deadLimiter();
  const decisions = [];
  const env = await setup(() =>
    rateLimited(
      limiter,
      async (_job, _token, decision) => {
        decisions.push(decision);
        return 'ran';
      },
      { tenant: (job) => job.data.apiKey, onUnavailable: 'run' },
    ),
  );
  try {
    const job = await env.queue.add('lookup', { apiKey: 'k1' });
    await waitFor('completion', async () => (await stateOf(env.queue, job.id)) === 'completed');
    assert.deepEqual(decisions, [null]);
  } finally {
    await env.close();
  }
});

test('an outage never fails the job: delayed apart from denials until the limiter Redis is back, then run once', async () => {
  // The limiter's Redis is down (nothing listens on its port yet); BullMQ's
  // own Redis is up. maxDeferrals: 1 and attempts: 1, so had an outage delay
  // counted as a deferral (or an attempt), the job would fail.
  const port = freePort();
  const limiterRedis = new Redis(port, '127.0.0.1', { retryStrategy: () => 50, maxRetriesPerRequest: null });
  limiterRedis.on('error', () => {});
  open.push(limiterRedis);
  // ioredis queues the acquires that timed out during the outage and sends
  // them when the server is back (over-counting, never under-counting): the
  // limit leaves room for them.
  const p = { resource: unique('geo'), limit: 1000, windowMs: 60_000 };
  const limiter = new Limiter(limiterRedis, p, { timeoutMs: 100 });
  const runs = [];
  const env = await setup(() =>
    rateLimited(
      limiter,
      async (job, _token, decision) => {
        runs.push(decision);
        return 'ran';
      },
      {
        tenant: (job) => job.data.apiKey,
        maxDeferrals: 1,
        jitterMs: 0,
        unavailableBackoff: { baseMs: 50, maxMs: 100 },
      },
    ),
  );
  let server;
  try {
    const job = await env.queue.add('lookup', { apiKey: 'k1' }, { attempts: 1 });
    const delayed = await waitFor('four outage delays', async () => {
      const j = await env.queue.getJob(job.id);
      return j.data.slidelimit && j.data.slidelimit.unavailable >= 4 && (await j.getState()) === 'delayed' ? j : null;
    });
    assert.equal(delayed.attemptsMade, 0, 'an outage delay is not an attempt');
    assert.equal(delayed.data.slidelimit.deferrals, 0, 'an outage delay is not a denial');
    assert.deepEqual(env.failures, []);
    assert.equal(runs.length, 0);

    server = startRedis(unique('bullmq-limiter'), [], port);
    await waitFor('completion', async () => (await stateOf(env.queue, job.id)) === 'completed');
    const done = await env.queue.getJob(job.id);
    assert.equal(done.returnvalue, 'ran');
    assert.equal(done.failedReason, undefined);
    assert.deepEqual(env.failures, [], 'no failed attempt at any time');
    assert.equal(runs.length, 1, 'ran exactly once');
    assert.equal(runs[0].allowed, true, 'with a permit from the limiter Redis');
  } finally {
    await env.close();
    limiterRedis.disconnect();
    if (server) server.stop();
  }
});

test('maxOutageDeferrals, when asked for, fails the attempt with OutageLimitError', async () => {
  const limiter = deadLimiter();
  const env = await setup(() =>
    rateLimited(limiter, async () => 'ran', {
      tenant: (job) => job.data.apiKey,
      jitterMs: 0,
      maxOutageDeferrals: 2,
      unavailableBackoff: { baseMs: 50, maxMs: 100 },
    }),
  );
  try {
    const job = await env.queue.add('lookup', { apiKey: 'k1' }, { attempts: 1 });
    await waitFor('failure after the outage cap', async () => (await stateOf(env.queue, job.id)) === 'failed');
    const failed = await env.queue.getJob(job.id);
    assert.equal(failed.attemptsMade, 1);
    assert.equal(failed.data.slidelimit.unavailable, 2);
    assert.equal(failed.data.slidelimit.deferrals, 0);
    assert.match(failed.failedReason, /unavailable on 3 consecutive runs of this job \(delayed 2 times\)/);
    assert.match(failed.failedReason, /maxOutageDeferrals/);
    assert.equal(env.failures.length, 1);
    assert.ok(env.failures[0].err instanceof OutageLimitError);
    assert.equal(env.failures[0].err.outageDeferrals, 2);
    assert.equal(env.failures[0].err.cause.code, 'unavailable');
  } finally {
    await env.close();
  }
});

test('each attempt gets its own deferral budget', async () => {
  const limiter = new Limiter(redisFor('limiter'), { resource: unique('geo'), limit: 2, windowMs: 300 });
  let hog = true;
  // As above: the window is never empty, so a job of cost 2 never passes.
  const hogLoop = (async () => {
    while (hog) {
      await limiter.acquire('k1');
      await sleep(5);
    }
  })();
  let checks = 0; // the job's own acquires
  const counted = { acquire: (...args) => (checks++, limiter.acquire(...args)) };
  const env = await setup(() =>
    rateLimited(counted, async () => 'never', {
      tenant: (job) => job.data.apiKey,
      cost: () => 2,
      maxDeferrals: 1,
      jitterMs: 0,
    }),
  );
  try {
    const job = await env.queue.add('lookup', { apiKey: 'k1' }, { attempts: 2 });
    await waitFor('the second attempt to fail', async () => (await stateOf(env.queue, job.id)) === 'failed');
    const failed = await env.queue.getJob(job.id);
    assert.equal(failed.attemptsMade, 2);
    // Both attempts were deferred once before their cap: the second did not
    // inherit the first one's count (it would have failed at its first denial).
    assert.equal(env.failures.length, 2);
    assert.equal(checks, 4, 'each attempt: a denial deferred, then a denial that fails it');
    for (const { err } of env.failures) {
      assert.ok(err instanceof DeferralLimitError, String(err));
      assert.equal(err.deferrals, 1);
    }
    // The failed attempt's counts stay to be seen, tied to no attempt.
    assert.deepEqual(failed.data.slidelimit, { attempt: null, deferrals: 1, unavailable: 0 });
  } finally {
    hog = false;
    await hogLoop;
    await env.close();
  }
});

test('bad options are rejected when wrapping', () => {
  const limiter = Limiter.memory({ resource: 'geo', limit: 1, windowMs: 1000 });
  const noop = async () => {};
  assert.throws(() => rateLimited(limiter, noop, {}), { code: 'invalid_argument', field: 'tenant' });
  assert.throws(() => rateLimited(limiter, noop, { tenant: () => 't', maxDeferrals: -1 }), { field: 'max_deferrals' });
  assert.throws(() => rateLimited(limiter, noop, { tenant: () => 't', maxOutageDeferrals: 1.5 }), {
    field: 'max_outage_deferrals',
  });
  assert.throws(() => rateLimited(limiter, noop, { tenant: () => 't', onUnavailable: 'maybe' }), { field: 'on_unavailable' });
  assert.throws(() => rateLimited(null, noop, { tenant: () => 't' }), { field: 'limiter' });
  // A misspelt option would keep its default (100 deferrals) without a word.
  assert.throws(() => rateLimited(limiter, noop, { tenant: () => 't', maxDeferals: 3 }), {
    code: 'invalid_argument',
    field: 'maxDeferals',
  });
  assert.throws(() => rateLimited(limiter, noop, { tenant: () => 't', unavailableBackoff: { base: 5 } }), {
    field: 'unavailableBackoff.base',
  });
  assert.throws(() => rateLimited(limiter, noop, null), { field: 'options' });
  assert.throws(() => rateLimited(limiter, noop, []), { field: 'options' });
  // A falsy or non-function value would fall back to the default (cost 0, an
  // empty onUnavailable) or fail every job at run time (cost 2): refused here.
  const t = () => 't';
  for (const [option, field] of [
    [{ cost: 2 }, 'cost'],
    [{ cost: 0 }, 'cost'],
    [{ random: 0 }, 'random'],
    [{ onUnavailable: '' }, 'on_unavailable'],
    [{ jitterMs: Infinity }, 'jitter_ms'],
    [{ unavailableBackoff: 5 }, 'unavailable_backoff'],
    [{ unavailableBackoff: [] }, 'unavailable_backoff'],
    [{ unavailableBackoff: { baseMs: 'x' } }, 'unavailable_backoff.base_ms'],
    [{ unavailableBackoff: { baseMs: -1 } }, 'unavailable_backoff.base_ms'],
    [{ unavailableBackoff: { maxMs: Infinity } }, 'unavailable_backoff.max_ms'],
  ]) {
    const check = { code: 'invalid_argument', field };
    assert.throws(() => rateLimited(limiter, noop, { tenant: t, ...option }), check, field);
  }
  rateLimited(limiter, noop, { tenant: t, unavailableBackoff: { baseMs: 5, maxMs: 50 } });
  rateLimited(limiter, noop, { tenant: t, maxDeferrals: Infinity, maxOutageDeferrals: Infinity, jitterMs: 0 });
});

test('a saved count that is no count fails the job naming it', async () => {
  const limiter = Limiter.memory({ resource: 'geo', limit: 1, windowMs: 1000 });
  const processor = rateLimited(limiter, async () => 'ran', { tenant: () => 't' });
  for (const [saved, name] of [
    [{ deferrals: 'abc' }, 'deferrals'],
    [{ deferrals: -5 }, 'deferrals'],
    [{ unavailable: 1.5 }, 'unavailable'],
  ]) {
    const job = { attemptsMade: 0, data: { slidelimit: { attempt: 0, ...saved } } };
    await assert.rejects(processor(job, 'token'), { code: 'invalid_argument', field: `job.data.slidelimit.${name}` });
  }
  const job = { attemptsMade: 0, data: { slidelimit: { attempt: 0, deferrals: 2, unavailable: 0 } } };
  assert.equal(await processor(job, 'token'), 'ran');
});

test("BullMQ's cancellation signal reaches the processor, and worker.cancelJob ends the job", async () => {
  const limiter = Limiter.memory({ resource: unique('geo'), limit: 10, windowMs: 60_000 });
  let started;
  const running = new Promise((resolve) => (started = resolve));
  const env = await setup(() =>
    rateLimited(
      limiter,
      (job, _token, decision, signal) =>
        new Promise((_resolve, reject) => {
          started(job.id);
          assert.equal(decision.allowed, true);
          // Without a signal BullMQ would wait on this job for good.
          setTimeout(() => reject(new Error('no abort in 5 s')), 5000);
          signal.addEventListener('abort', () => reject(new Error('aborted by cancelJob')));
        }),
      { tenant: (job) => job.data.apiKey },
    ),
  );
  try {
    const job = await env.queue.add('lookup', { apiKey: 'k1' }, { attempts: 1 });
    assert.equal(await running, job.id);
    assert.equal(env.worker.cancelJob(job.id), true, 'BullMQ made a signal for the wrapped processor');
    await waitFor('the cancelled job to fail', async () => (await stateOf(env.queue, job.id)) === 'failed');
    assert.match((await env.queue.getJob(job.id)).failedReason, /aborted by cancelJob/);
  } finally {
    await env.close();
  }
});

test('a cancelled job spends no permit and is not delayed', async () => {
  const limiter = Limiter.memory({ resource: unique('geo'), limit: 1, windowMs: 60_000 });
  const processor = rateLimited(limiter, async () => 'ran', { tenant: () => 't' });
  const cancelled = new AbortController();
  cancelled.abort(new Error('cancelled before its turn'));
  const job = {
    attemptsMade: 0,
    data: {},
    updateData: () => assert.fail('a cancelled job was delayed'),
    moveToDelayed: () => assert.fail('a cancelled job was delayed'),
  };
  await assert.rejects(processor(job, 'token', cancelled.signal), /cancelled before its turn/);
  assert.equal((await limiter.acquire('t')).allowed, true, 'no permit spent');
});

test('a cost function that returns no number fails the job naming cost, and spends nothing', async () => {
  const limiter = Limiter.memory({ resource: unique('geo'), limit: 5, windowMs: 60_000 });
  const processor = rateLimited(limiter, async () => 'ran', { tenant: () => 't', cost: (job) => job.data.units });
  for (const data of [{}, { units: null }, { units: '2' }]) {
    const job = { attemptsMade: 0, data };
    await assert.rejects(processor(job, 'token'), { code: 'invalid_argument', field: 'cost' }, JSON.stringify(data));
  }
  assert.equal((await limiter.peek('t', { cost: 5 })).allowed, true, 'no permit spent');
  assert.equal(await processor({ attemptsMade: 0, data: { units: 2 } }, 'token'), 'ran');
});

test('a cancellation whose reason is no Error still fails the job with an Error', async () => {
  const limiter = Limiter.memory({ resource: unique('geo'), limit: 1, windowMs: 60_000 });
  const processor = rateLimited(limiter, async () => 'ran', { tenant: () => 't' });
  const cancelled = new AbortController();
  cancelled.abort('user');
  await assert.rejects(processor({ attemptsMade: 0, data: {} }, 'token', cancelled.signal), (e) => e instanceof Error && /user/.test(e.message));
});

test('a retry that resets attempts starts its deferrals from 0', async () => {
  const limiter = Limiter.memory({ resource: unique('geo'), limit: 1, windowMs: 60_000 });
  await limiter.acquire('t');
  const processor = rateLimited(limiter, async () => 'ran', { tenant: () => 't', maxDeferrals: 2, jitterMs: 0 });
  const delayed = [];
  const job = {
    attemptsMade: 0,
    data: { address: 'Main St 1', slidelimit: { attempt: 0, deferrals: 2, unavailable: 0 } },
    updateData: async (data) => {
      job.data = data;
    },
    moveToDelayed: async (at) => delayed.push(at),
  };
  await assert.rejects(processor(job, 'token'), DeferralLimitError);
  // The counts stay to be seen, tied to no attempt.
  assert.deepEqual(job.data.slidelimit, { attempt: null, deferrals: 2, unavailable: 0 });
  // job.retry('failed', { resetAttemptsMade: true }): attemptsMade is 0 again.
  await assert.rejects(processor(job, 'token'), { name: 'DelayedError' });
  assert.equal(delayed.length, 1);
  assert.deepEqual(job.data.slidelimit, { attempt: 0, deferrals: 1, unavailable: 0 });
});

test('an outage streak past 2^10 with a base of 0 ms still delays by a number', async () => {
  const { UnavailableError } = require('..');
  const down = {
    acquire: async () => {
      throw new UnavailableError('unavailable', 'redis unavailable: down for the test');
    },
  };
  const processor = rateLimited(down, async () => 'ran', {
    tenant: () => 't',
    jitterMs: 0,
    unavailableBackoff: { baseMs: 0, maxMs: 1000 },
  });
  const delays = [];
  const job = {
    attemptsMade: 0,
    data: { slidelimit: { attempt: 0, deferrals: 0, unavailable: 1100 } },
    updateData: async (data) => {
      job.data = data;
    },
    moveToDelayed: async (at) => delays.push(at - Date.now()),
  };
  await assert.rejects(processor(job, 'token'), { name: 'DelayedError' });
  assert.equal(delays.length, 1);
  assert.ok(Number.isFinite(delays[0]) && delays[0] <= 0, `delayed by ${delays[0]} ms`);
  assert.equal(job.data.slidelimit.unavailable, 1101);
});

test('the geocoding example runs: 5 lookups at once, the other 3 after the window', () => {
  const { execFileSync } = require('node:child_process');
  const path = require('node:path');
  const out = execFileSync(process.execPath, [path.join(__dirname, '..', 'examples', 'geocode-worker.js')], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  const times = [...out.matchAll(/^\+(\d+) ms {2}Main St/gm)].map((m) => Number(m[1]));
  assert.equal(times.length, 8, out);
  assert.equal(times.filter((t) => t < 2000).length, 5, out);
  assert.match(out, /ratelimit_allowed_total\{resource="geocode"\} 8/);
});
