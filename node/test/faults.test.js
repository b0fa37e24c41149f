'use strict';
// Faults only the Node binding meets, against real redis-server processes
// this file starts itself (own free port, own pid, loopback): ioredis's
// offline queue (BullMQ through an outage, a client without the queue),
// the error classes and causes a JS caller sees, TLS refused for the right
// reason, and JS values no other language can pass. What every binding meets
// (SCRIPT FLUSH, restarts, an unreachable, hanging or slow Redis, a key of
// the wrong type, ACL, TLS, bad input) runs against every binding through its
// driver: faults/run (make faults). Run once per implementation
// (SLIDELIMIT_IMPL=native and =wasm, make test-node).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn, execFileSync } = require('node:child_process');
const Redis = require('ioredis');
const { Queue, Worker } = require('bullmq');
const slidelimit = require('..');
const { rateLimited } = require('slidelimit/bullmq');
const { url, unique, freePort, sleep } = require('./helpers');

const { Limiter, UnavailableError, WrongTypeError, InvalidArgumentError } = slidelimit;

/** Caller time far from the real clock, so caller-time keys never meet server-time ones. */
const T = 1_800_000_000_000;

// ------------------------------------------------------------ own servers

const children = new Set();
const clients = new Set();
// Should the process die mid-test, no redis-server of ours outlives it.
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

function client(target, options = {}) {
  const c = new Redis(target, { maxRetriesPerRequest: 1, ...options });
  c.on('error', () => {}); // reconnects are expected; the limiter reports failures
  clients.add(c);
  return c;
}

test.after(() => {
  for (const c of clients) c.disconnect();
});

/**
 * A redis-server child of this process (not daemonized, so its pid is ours to
 * signal), on loopback, saving nothing. `start()` again after `kill()` brings
 * up an empty server on the same port.
 */
class OwnRedis {
  constructor(name, { port = freePort(), args = [] } = {}) {
    this.port = port;
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), `slidelimit-node-${name}-`));
    this.args = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir, '--logfile', ''];
    this.args.push(...(args.length ? args : ['--port', String(port)]));
    this.child = null;
  }

  url() {
    return `redis://127.0.0.1:${this.port}/`;
  }

  /** Starts the server and resolves once it logs that it accepts connections. */
  start() {
    const child = spawn('redis-server', this.args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    children.add(child);
    let log = '';
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`redis-server did not start in 10 s:\n${log}`)), 10_000);
      const onData = (chunk) => {
        log += chunk;
        if (log.includes('Ready to accept connections')) {
          clearTimeout(timer);
          child.stdout.removeListener('data', onData);
          child.stdout.resume();
          resolve(this);
        }
      };
      child.stdout.setEncoding('utf8');
      child.stdout.on('data', onData);
      child.stderr.on('data', (chunk) => {
        log += chunk;
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`redis-server exited with ${code}:\n${log}`));
      });
    });
  }

  /** SIGKILL to our own pid (a crash: nothing is saved), resolves when it is gone. */
  kill() {
    const child = this.child;
    this.child = null;
    if (!child || child.exitCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      child.once('exit', () => {
        children.delete(child);
        resolve();
      });
      child.kill('SIGKILL');
    });
  }

  async stop() {
    await this.kill();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

async function ownRedis(name, options) {
  return new OwnRedis(name, options).start();
}

/** Every key on the server expires by itself (what scripts/check-ttl.py checks on the shared server). */
async function assertEveryKeyExpires(admin) {
  let cursor = '0';
  for (let round = 0; round < 10_000; round++) {
    const [next, keys] = await admin.scan(cursor, 'COUNT', 1000);
    for (const key of keys) {
      const ttl = await admin.pttl(key);
      assert.notEqual(ttl, -1, `${key} has no TTL`);
    }
    cursor = next;
    if (cursor === '0') return;
  }
  throw new Error('SCAN did not finish');
}

function isCode(Class, code) {
  return (err) => {
    assert.ok(err instanceof Class, `expected ${Class.name}, got ${err && err.stack}`);
    assert.equal(err.code, code);
    return true;
  };
}

const unavailable = isCode(UnavailableError, 'unavailable');

async function rejectsWithin(call, check, minMs, maxMs) {
  const started = Date.now();
  await assert.rejects(call(), check);
  const elapsed = Date.now() - started;
  assert.ok(elapsed >= minMs && elapsed < maxMs, `failed after ${elapsed} ms, expected [${minMs}, ${maxMs})`);
  return elapsed;
}

test('BullMQ delays a job while the limiter Redis is down and runs it, with no failed attempt, once it is back', { timeout: 30_000 }, async () => {
  // The queue lives on one server, the limiter on another that goes down.
  const queueServer = await ownRedis('bullmq-queue');
  const limiterServer = await ownRedis('bullmq-limiter');
  const name = unique('q');
  let queue;
  let worker;
  try {
    const limiter = new Limiter(
      client(limiterServer.url(), { maxRetriesPerRequest: 20, retryStrategy: () => 50 }),
      { resource: unique('geo'), limit: 5, windowMs: 1000 },
      { timeoutMs: 150 },
    );
    await limiter.acquire('k1');
    await limiterServer.kill();
    queue = new Queue(name, { connection: client(queueServer.url()) });
    const runs = [];
    worker = new Worker(
      name,
      rateLimited(
        limiter,
        async (job, _token, decision) => {
          runs.push(decision);
          return 'done';
        },
        { tenant: (job) => job.data.apiKey, jitterMs: 0, unavailableBackoff: { baseMs: 200, maxMs: 400 } },
      ),
      { connection: client(queueServer.url(), { maxRetriesPerRequest: null }) },
    );
    worker.on('error', () => {});
    await worker.waitUntilReady();
    // attempts: 1: had an unavailable limiter counted as an attempt, the job would fail.
    const job = await queue.add('lookup', { apiKey: 'k1' }, { attempts: 1 });
    let state;
    for (let i = 0; i < 200; i++) {
      const j = await queue.getJob(job.id);
      state = await j.getState();
      if (j.data.slidelimit && j.data.slidelimit.unavailable >= 2 && state === 'delayed') break;
      await sleep(25);
    }
    const delayed = await queue.getJob(job.id);
    assert.equal(state, 'delayed');
    assert.equal(delayed.attemptsMade, 0, 'an unavailable limiter is not a failed attempt');
    assert.equal(runs.length, 0);
    await limiterServer.start();
    for (let i = 0; i < 400 && state !== 'completed' && state !== 'failed'; i++) {
      await sleep(25);
      state = await (await queue.getJob(job.id)).getState();
    }
    assert.equal(state, 'completed');
    const done = await queue.getJob(job.id);
    assert.equal(done.returnvalue, 'done');
    assert.equal(done.failedReason, undefined);
    assert.equal(runs.length, 1);
    assert.equal(runs[0].allowed, true);
    // This job's permit was counted on the restarted server (remaining 4).
    // Acquires that timed out while it was down may have been counted too:
    // ioredis keeps them in its offline queue and sends them on reconnect,
    // and one that finds the script loaded is recorded (an over-count, never
    // an over-admission); one that meets the empty script cache sends no
    // EVAL past its deadline and counts nothing.
    assert.ok(runs[0].remaining >= 0 && runs[0].remaining <= 4, `remaining ${runs[0].remaining}`);
  } finally {
    if (worker) await worker.close();
    if (queue) await queue.close();
    await queueServer.stop();
    await limiterServer.stop();
  }
});

// ------------------------------------------------------------ unreachable

test('without the offline queue ioredis fails at once; still unavailable', { timeout: 10_000 }, async () => {
  const p = { resource: unique('dead'), limit: 5, windowMs: 1000 };
  const noQueue = client(`redis://127.0.0.1:${freePort()}/`, { enableOfflineQueue: false });
  await rejectsWithin(() => new Limiter(noQueue, p, { timeoutMs: 2000 }).acquire('t'), unavailable, 0, 1000);
});

// ------------------------------------------------------------- wrong type

test('wrong_type is a WrongTypeError whose cause is the ioredis ReplyError', { timeout: 20_000 }, async () => {
  const redis = client(url);
  for (const algorithm of ['sliding_log', 'sliding_counter']) {
    const l = new Limiter(redis, { resource: unique('wrongtype'), algorithm, limit: 3, windowMs: 60_000 });
    // A TTL, so that the run's TTL check stays about slidelimit's own keys.
    await redis.set(l.key('t'), 'not a rate limit', 'PX', 60_000);
    await assert.rejects(l.acquire('t'), (err) => {
      isCode(WrongTypeError, 'wrong_type')(err);
      assert.equal(err.name, 'WrongTypeError');
      assert.equal(err.cause && err.cause.name, 'ReplyError', 'the ioredis error is the cause');
      return true;
    });
    assert.equal(await redis.get(l.key('t')), 'not a rate limit');
    await l.reset('t');
  }
});

// -------------------------------------------------------------------- TLS

/** A CA and a server certificate for `localhost` only, made with the openssl CLI in a temp dir. */
function makeCertificates() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slidelimit-node-tls-'));
  const openssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  for (const who of ['ca', 'other-ca']) {
    openssl('req', ...ec, '-x509', '-keyout', `${who}.key`, '-out', `${who}.crt`, '-days', '2', '-subj', `/CN=slidelimit ${who}`);
  }
  openssl('req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost');
  fs.writeFileSync(
    path.join(dir, 'server.ext'),
    'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost\n',
  );
  openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-set_serial', '2',
    '-days', '2', '-extfile', 'server.ext', '-out', 'server.crt');
  return { dir, file: (name) => path.join(dir, name), read: (name) => fs.readFileSync(path.join(dir, name)) };
}

test('TLS: ioredis keeps verification on, and a refused server is refused for the right reason', { timeout: 60_000 }, async () => {
  const certs = makeCertificates();
  const port = freePort();
  const own = await ownRedis('tls', {
    port,
    args: ['--port', '0', '--tls-port', String(port), '--tls-cert-file', certs.file('server.crt'),
      '--tls-key-file', certs.file('server.key'), '--tls-ca-cert-file', certs.file('ca.crt'), '--tls-auth-clients', 'no'],
  });
  try {
    const ca = certs.read('ca.crt');
    const p = { resource: unique('tls'), limit: 2, windowMs: 60_000 };
    // 127.0.0.1 is where the server listens; the name checked is `localhost`.
    const redis = client(`rediss://127.0.0.1:${port}/`, { tls: { ca, servername: 'localhost' } });
    assert.equal(redis.options.tls.rejectUnauthorized, undefined, 'verification is not turned off');
    const l = new Limiter(redis, p, { timeoutMs: 2000 });
    assert.equal((await l.acquire('t', { nowMs: T })).allowed, true);
    assert.equal(await l.reset('t'), true);
    const refused = [
      ['no CA (system trust store only)', { host: '127.0.0.1', port, tls: { servername: 'localhost' } }, /SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY/],
      ['another CA', { host: '127.0.0.1', port, tls: { ca: certs.read('other-ca.crt'), servername: 'localhost' } }, /SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY/],
      ['a name not in the certificate', { host: '127.0.0.1', port, tls: { ca, servername: 'redis.example' } }, /ERR_TLS_CERT_ALTNAME_INVALID/],
      ['plain text on the TLS port', { host: '127.0.0.1', port }, /ECONNRESET|EPROTO|closed/],
    ];
    for (const [why, options, reason] of refused) {
      const redis = client({ ...options, retryStrategy: () => 100 });
      const seen = [];
      redis.on('error', (err) => seen.push(err.code || err.message));
      const l = new Limiter(redis, p, { timeoutMs: 500 });
      await assert.rejects(l.acquire('t'), (err) => {
        assert.ok(err instanceof UnavailableError, `${why}: ${err && err.stack}`);
        assert.equal(err.code, 'unavailable', why);
        return true;
      });
      // Refused for the right reason (the connection's own error events).
      assert.ok(seen.some((code) => reason.test(code)), `${why}: ${seen}`);
      redis.disconnect();
    }
  } finally {
    await own.stop();
    fs.rmSync(certs.dir, { recursive: true, force: true });
  }
});

// -------------------------------------------------------------- bad input

test('JS values no other language can pass are invalid_argument naming the field, and write nothing', { timeout: 30_000 }, async () => {
  const own = await ownRedis('badinput');
  try {
    const redis = client(own.url());
    const badNumbers = [NaN, Infinity, -Infinity, -1, 1.5, 2 ** 53 + 2, 2 ** 64, '1', 1n, null, {}];
    const base = { namespace: 'bad', resource: 'geocode', limit: 5, windowMs: 1000 };

    const expectInvalid = (field) => (err) => {
      assert.ok(err instanceof InvalidArgumentError, `expected InvalidArgumentError for ${field}, got ${err && err.stack}`);
      assert.equal(err.code, 'invalid_argument');
      assert.equal(err.field, field, `field of: ${err.message}`);
      assert.ok(err.message.startsWith(`${field}: `), err.message);
      return true;
    };

    const policyCases = [
      ...badNumbers.map((v) => [{ limit: v }, 'limit']),
      ...badNumbers.map((v) => [{ windowMs: v }, 'window_ms']),
      [{ limit: 2 ** 53 + 2, windowMs: 1 }, 'limit'],
    ];
    for (const [overrides, field] of policyCases) {
      assert.throws(() => new Limiter(redis, { ...base, ...overrides }), expectInvalid(field), `${String(Object.values(overrides)[0])}`);
    }

    const l = new Limiter(redis, base);
    const callCases = [
      [42, undefined, 'tenant'],
      [null, undefined, 'tenant'],
      [undefined, undefined, 'tenant'],
      [{ toString: () => 't' }, undefined, 'tenant'],
      [['t'], undefined, 'tenant'],
      [Buffer.from('t'), undefined, 'tenant'],
      // Unpaired surrogates would become U+FFFD and share '\uFFFD''s key.
      ['\uD800', undefined, 'tenant'],
      ['a\uDC00b', undefined, 'tenant'],
      ['\uDBFF', undefined, 'tenant'],
      ...badNumbers.map((v) => ['t', { cost: v }, 'cost']),
      ['t', { cost: -0 }, 'cost'],
      ...badNumbers.filter((v) => v !== null).map((v) => ['t', { nowMs: v }, 'now_ms']),
      ['t', 'fast', 'options'],
    ];
    for (const [tenant, options, field] of callCases) {
      await assert.rejects(l.acquire(tenant, options), expectInvalid(field));
      await assert.rejects(l.peek(tenant, options), expectInvalid(field));
    }
    for (const tenant of [42, null, undefined, '\uD800']) {
      await assert.rejects(l.reset(tenant), expectInvalid('tenant'));
      assert.throws(() => l.key(tenant), expectInvalid('tenant'));
    }
    assert.equal(await redis.dbsize(), 0, 'no key written by bad input');
    // The process is alive and the limiter still works.
    assert.equal((await l.acquire('t', { nowMs: T })).remaining, 4);
    await assertEveryKeyExpires(redis);
  } finally {
    await own.stop();
  }
});
