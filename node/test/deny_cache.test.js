'use strict';
// The local deny cache (core's DenyCache behind the Limiter): which acquires
// it answers without a Redis call, counted on the server with MONITOR.

const net = require('node:net');
const test = require('node:test');
const assert = require('node:assert/strict');
const prom = require('prom-client');
const Redis = require('ioredis');
const slidelimit = require('..');
const { url, unique, connect, sleep, startRedis } = require('./helpers');

const { Limiter, Metrics, InvalidArgumentError } = slidelimit;

let redis;
let monitor;
// Every command the server ran, as [name, ...args], in the server's order.
const seen = [];

// MONITOR on a plain socket: ioredis's monitor() can take a command logged
// in the same read as MONITOR's +OK for a reply and fail ("Command queue
// state error"), so the stream is read here, one line per command.
function startMonitor() {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    let buffered = '';
    let started = false;
    socket.setEncoding('utf8');
    socket.on('error', reject);
    socket.on('connect', () => socket.write('MONITOR\r\n'));
    socket.on('data', (chunk) => {
      buffered += chunk;
      let end;
      while ((end = buffered.indexOf('\r\n')) >= 0) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (!started) {
          // MONITOR's own reply: +OK, or an error (the socket is closed).
          if (line !== '+OK') {
            socket.destroy(new Error(`MONITOR refused: ${line}`));
            return;
          }
          started = true;
          resolve(socket);
        } else {
          // +<time> [<db> <client>] "name" "arg" ...: the quoted words, unescaped enough for names.
          const words = [...line.slice(line.indexOf(']') + 1).matchAll(/"((?:[^"\\]|\\.)*)"/g)];
          if (words.length > 0) seen.push(words.map((w) => w[1].replace(/\\(.)/g, '$1')));
        }
      }
    });
  });
}

test.before(async () => {
  redis = connect();
  monitor = await startMonitor();
});
test.after(() => {
  redis?.disconnect();
  monitor?.destroy();
});

// The script calls the server ran on `resource`'s keys so far: each starts
// with one EVALSHA (an EVAL follows only a NOSCRIPT, which another test file
// may cause with SCRIPT FLUSH). A marker sent after them, seen by MONITOR, proves that every earlier
// command has been seen too (MONITOR streams in the server's order).
async function scriptCalls(resource) {
  const marker = unique('marker');
  await redis.echo(marker);
  const started = Date.now();
  while (!seen.some((a) => a[0].toLowerCase() === 'echo' && a[1] === marker)) {
    if (Date.now() - started > 5000) throw new Error('MONITOR did not show the marker');
    await sleep(2);
  }
  return seen.filter(
    (a) => a[0].toLowerCase() === 'evalsha' && a.some((x) => x.includes(`{${resource}:`)),
  ).length;
}

function policy(overrides = {}) {
  return { resource: unique('deny'), limit: 3, windowMs: 60_000, ...overrides };
}

test('the counting helper sees every script call', async () => {
  const p = policy();
  const l = new Limiter(redis, p, { denyCache: false });
  assert.equal(await scriptCalls(p.resource), 0);
  await l.acquire('t');
  await l.peek('t');
  assert.equal(await scriptCalls(p.resource), 2);
});

test('a denial answers the same or a higher cost locally until the retry; a lower cost asks Redis', async () => {
  const p = policy();
  const l = new Limiter(redis, p); // on by default
  await l.acquire('t');
  await l.acquire('t'); // 2 of 3 taken
  const denied = await l.acquire('t', { cost: 2 });
  assert.equal(denied.allowed, false);
  assert.equal(await scriptCalls(p.resource), 3);

  await sleep(20);
  const local = await l.acquire('t', { cost: 2 });
  const higher = await l.acquire('t', { cost: 3 });
  assert.equal(await scriptCalls(p.resource), 3, 'no Redis call for cost >= the denied one');
  for (const d of [local, higher]) {
    assert.equal(d.allowed, false);
    assert.equal(d.remaining, denied.remaining);
    assert.equal(d.deniedBy, null);
    // Core's local denial: the cached one, moved on by the time elapsed.
    assert.ok(d.retryAfterMs > 0 && d.retryAfterMs <= denied.retryAfterMs - 15, `${d.retryAfterMs} vs ${denied.retryAfterMs}`);
    assert.ok(d.nowMs >= denied.nowMs + 15, `${d.nowMs} vs ${denied.nowMs}`);
    assert.equal(d.nowMs - denied.nowMs, denied.retryAfterMs - d.retryAfterMs);
  }

  // Cost 1 may pass (1 of 3 is left): Redis is asked, and admits it.
  const lower = await l.acquire('t', { cost: 1 });
  assert.equal(lower.allowed, true);
  assert.equal(await scriptCalls(p.resource), 4);
  // The admission dropped the cached denial: the next cost 2 asks Redis again.
  assert.equal((await l.acquire('t', { cost: 2 })).allowed, false);
  assert.equal(await scriptCalls(p.resource), 5);
  await l.reset('t');
});

test('the cached denial runs out with its retry', async () => {
  const p = policy({ limit: 1, windowMs: 150 });
  const l = new Limiter(redis, p);
  assert.equal((await l.acquire('t')).allowed, true);
  const denied = await l.acquire('t');
  assert.equal(denied.allowed, false);
  await sleep(denied.retryAfterMs + 5);
  assert.equal((await l.acquire('t')).allowed, true, 'after the retry Redis is asked, and admits');
  assert.equal(await scriptCalls(p.resource), 3);
});

test('reset clears the tenant\'s cached denial, and only its', async () => {
  const p = policy({ limit: 1 });
  const l = new Limiter(redis, p);
  for (const t of ['a', 'b']) {
    await l.acquire(t);
    assert.equal((await l.acquire(t)).allowed, false);
  }
  assert.equal(await scriptCalls(p.resource), 4);
  assert.equal(await l.reset('a'), true);
  assert.equal((await l.acquire('a')).allowed, true, 'reset: Redis is asked');
  assert.equal((await l.acquire('b')).allowed, false);
  assert.equal(await scriptCalls(p.resource), 5, 'b is still answered locally');
  await l.reset('b');
});

test('a reset through another limiter of the process clears the cached denial too', async () => {
  const p = policy({ limit: 1 });
  const cached = new Limiter(redis, p);
  const resetter = new Limiter(redis, p, { denyCache: false }); // its own cache off
  await cached.acquire('elsewhere');
  assert.equal((await cached.acquire('elsewhere')).allowed, false);
  assert.equal((await cached.acquire('elsewhere')).allowed, false);
  assert.equal(await scriptCalls(p.resource), 2, 'the second denial is local');
  assert.equal(await resetter.reset('elsewhere'), true);
  assert.equal((await cached.acquire('elsewhere')).allowed, true, 'Redis is asked');
  assert.equal(await scriptCalls(p.resource), 3);
  await cached.reset('elsewhere');
});

// Forwards to 127.0.0.1:port; while `hold` is set, replies wait until
// `release()`: Redis has answered, the client has not read it yet.
function replyHoldingProxy(port) {
  const held = [];
  const proxy = { hold: false, sockets: [] };
  proxy.release = () => {
    proxy.hold = false;
    for (const [socket, chunk] of held.splice(0)) socket.write(chunk);
  };
  proxy.server = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    proxy.sockets.push(client, upstream);
    client.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk) => {
      if (proxy.hold) held.push([client, chunk]);
      else client.write(chunk);
    });
    for (const [a, b] of [
      [client, upstream],
      [upstream, client],
    ]) {
      a.on('error', () => b.destroy());
      a.on('close', () => b.destroy());
    }
  });
  return new Promise((resolve) => proxy.server.listen(0, '127.0.0.1', () => resolve(proxy)));
}

async function evalshaCalls(client) {
  const line = (await client.info('commandstats')).split('\r\n').find((l) => l.startsWith('cmdstat_evalsha:'));
  return line ? Number(/calls=(\d+)/.exec(line)[1]) : 0;
}

// Two acquires in flight across a reset (sent while the cache was empty,
// so JS did not check them), both denied by Redis before the DEL, their
// replies read only after the reset returned: neither may be cached.
// On a server of its own: no other test file's SCRIPT FLUSH reaches it.
test('denials Redis gave before a reset, read only after it, are not cached', async () => {
  const own = startRedis(unique('deny-race'));
  const direct = new Redis({ port: own.port, host: '127.0.0.1', maxRetriesPerRequest: 1 });
  const proxy = await replyHoldingProxy(own.port);
  const slow = new Redis({ port: proxy.server.address().port, host: '127.0.0.1', maxRetriesPerRequest: 1 });
  try {
    const p = policy({ limit: 1 });
    const cached = new Limiter(slow, p, { timeoutMs: 10_000 });
    const resetter = new Limiter(direct, p, { denyCache: false });
    assert.equal((await cached.acquire('raced')).allowed, true);
    const before = await evalshaCalls(direct);
    proxy.hold = true;
    const earlier = cached.acquire('raced');
    await sleep(3); // a later send time
    const later = cached.acquire('raced');
    const started = Date.now();
    while ((await evalshaCalls(direct)) < before + 2) {
      if (Date.now() - started > 10_000) throw new Error('the acquires never reached Redis');
      await sleep(2);
    }
    assert.equal(await resetter.reset('raced'), true);
    proxy.release();
    assert.equal((await earlier).allowed, false, 'Redis ran it before the DEL');
    assert.equal((await later).allowed, false, 'Redis ran it before the DEL');
    assert.equal((await cached.acquire('raced')).allowed, true, 'a stale denial was cached');
    assert.equal(await evalshaCalls(direct), before + 3);
  } finally {
    slow.disconnect();
    direct.disconnect();
    for (const socket of proxy.sockets) socket.destroy();
    proxy.server.close();
    own.stop();
  }
});

test('switched off, every acquire asks Redis', async () => {
  const p = policy({ limit: 1 });
  const l = new Limiter(redis, p, { denyCache: false });
  await l.acquire('t');
  for (let i = 0; i < 4; i++) assert.equal((await l.acquire('t')).allowed, false);
  assert.equal(await scriptCalls(p.resource), 5);
  await l.reset('t');
});

test('a capacity of one keeps the latest denial only', async () => {
  const p = policy({ limit: 1 });
  const l = new Limiter(redis, p, { denyCache: { capacity: 1 } });
  for (const t of ['a', 'b']) {
    await l.acquire(t);
    await l.acquire(t); // denied, cached; b's entry pushes a's out
  }
  assert.equal(await scriptCalls(p.resource), 4);
  await l.acquire('b');
  assert.equal(await scriptCalls(p.resource), 4, 'b is cached');
  await l.acquire('a');
  assert.equal(await scriptCalls(p.resource), 5, 'a was pushed out');
  await l.reset('a');
  await l.reset('b');
});

test('peeks and caller-time acquires neither use nor fill the cache', async () => {
  const p = policy({ limit: 1 });
  const l = new Limiter(redis, p);
  await l.acquire('t');
  assert.equal((await l.acquire('t')).allowed, false); // cached
  assert.equal(await scriptCalls(p.resource), 2);
  const now = Date.now();
  assert.equal((await l.peek('t')).allowed, false);
  assert.equal((await l.acquire('t', { nowMs: now })).allowed, false);
  assert.equal((await l.peek('t', { nowMs: now })).allowed, false);
  assert.equal(await scriptCalls(p.resource), 5, 'each asked Redis');

  // A denial at caller time is not cached: the server-time acquire asks Redis.
  const q = policy({ limit: 1 });
  const m = new Limiter(redis, q);
  await m.acquire('t', { nowMs: now });
  assert.equal((await m.acquire('t', { nowMs: now })).allowed, false);
  assert.equal((await m.peek('t')).allowed, false);
  assert.equal((await m.acquire('t')).allowed, false);
  assert.equal(await scriptCalls(q.resource), 4);
  await l.reset('t');
  await m.reset('t');
});

test('a local denial of several limits keeps deniedBy', async () => {
  const p = {
    resource: unique('deny-multi'),
    limits: [
      { limit: 5, windowMs: 1000 },
      { algorithm: 'sliding_counter', limit: 2, windowMs: 60_000 },
    ],
  };
  const l = new Limiter(redis, p);
  await l.acquire('t', { cost: 2 });
  const denied = await l.acquire('t');
  const local = await l.acquire('t');
  assert.equal(await scriptCalls(p.resource), 2);
  assert.deepEqual([denied.deniedBy, local.deniedBy], [1, 1]);
  await l.reset('t');
});

test('metrics count local denials as denials and in ratelimit_local_denied_total', async () => {
  const registry = new prom.Registry();
  const metrics = new Metrics({ registry, tenantLabel: true });
  const p = policy({ limit: 1 });
  const l = new Limiter(redis, p, { metrics });
  await l.acquire('t'); // allowed
  await l.acquire('t'); // denied by Redis
  await l.acquire('t'); // denied locally
  await l.acquire('t'); // denied locally
  assert.equal(await scriptCalls(p.resource), 2);
  const text = await registry.metrics();
  const r = p.resource;
  assert.match(text, new RegExp(`ratelimit_allowed_total\\{resource="${r}",tenant="t"\\} 1\\n`));
  assert.match(text, new RegExp(`ratelimit_denied_total\\{resource="${r}",tenant="t"\\} 3\\n`));
  assert.match(text, new RegExp(`ratelimit_local_denied_total\\{resource="${r}",tenant="t"\\} 2\\n`));
  assert.match(text, new RegExp(`ratelimit_wait_seconds_count\\{resource="${r}"\\} 3\\n`));
  assert.match(
    text,
    /# HELP ratelimit_local_denied_total Acquires denied in-process by the local deny cache, without a Redis call\./,
  );
  await l.reset('t');
});

test('the option is checked when the limiter is made', () => {
  const check = (field) => (err) => err instanceof InvalidArgumentError && err.field === field;
  for (const denyCache of ['yes', 5, []]) {
    assert.throws(() => new Limiter(redis, policy(), { denyCache }), check('deny_cache'));
  }
  for (const capacity of [0, -1, 1.5, NaN, 2 ** 24 + 1, '10']) {
    assert.throws(() => new Limiter(redis, policy(), { denyCache: { capacity } }), check('deny_cache_capacity'));
  }
  for (const denyCache of [undefined, true, false, null, {}, { capacity: 1 }, { capacity: 2 ** 24 }]) {
    new Limiter(redis, policy(), { denyCache });
  }
});
