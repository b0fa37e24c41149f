'use strict';
// Faults the binding meets in production, each against real redis-server
// processes this file starts itself (own free port, own pid, loopback): a
// restart mid-run, an unreachable or slow Redis (a loopback proxy that adds
// latency), a key of the wrong type, an ACL user confined to its prefix, TLS
// with verification, and bad input that must write nothing. Run once per
// implementation (SLIDELIMIT_IMPL=native and =wasm, make test-node).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { spawn, execFileSync } = require('node:child_process');
const Redis = require('ioredis');
const { Queue, Worker } = require('bullmq');
const slidelimit = require('..');
const { rateLimited } = require('slidelimit/bullmq');
const { url, unique, freePort, sleep } = require('./helpers');

const { Limiter, UnavailableError, WrongTypeError, PermissionDeniedError, InvalidArgumentError } = slidelimit;

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

// ----------------------------------------------------------- script flush

test('SCRIPT FLUSH between calls is invisible, on server time too', { timeout: 20_000 }, async () => {
  // (limiter.test.js flushes between caller-time calls; this covers server
  // time and the sliding counter.)
  const own = await ownRedis('flush');
  try {
    const redis = client(own.url());
    for (const algorithm of ['sliding_log', 'sliding_counter']) {
      const l = new Limiter(redis, { resource: unique('flush'), algorithm, limit: 3, windowMs: 60_000 });
      const remaining = [];
      for (let i = 0; i < 4; i++) {
        await redis.script('FLUSH');
        const d = await l.acquire('t');
        remaining.push(d.allowed ? d.remaining : -1);
      }
      // Exactly one count per call: the NOSCRIPT fallback never double-counts.
      assert.deepEqual(remaining, [2, 1, 0, -1], algorithm);
    }
    await assertEveryKeyExpires(redis);
  } finally {
    await own.stop();
  }
});

// ---------------------------------------------------------------- restart

test('a restart mid-run costs a bounded number of unavailable errors, then it works', { timeout: 30_000 }, async (t) => {
  const own = await ownRedis('restart');
  try {
    // ioredis defaults (reconnect with backoff, offline queue), as an app has them.
    const redis = client(own.url(), { maxRetriesPerRequest: 20 });
    // The counter: a limit no run reaches (the log's is capped at 10,000,
    // which four fast callers could reach within the window).
    const p = { resource: unique('restart'), algorithm: 'sliding_counter', limit: 1_000_000, windowMs: 60_000 };
    const l = new Limiter(redis, p, { timeoutMs: 300 });
    let running = true;
    let restartedAt = Infinity;
    const caller = async () => {
      const log = []; // [startedAt, ok]
      while (running && log.length < 5_000) {
        const started = Date.now();
        try {
          const d = await l.acquire('tenant-1');
          assert.equal(d.allowed, true, 'far below the limit');
          log.push([started, true]);
        } catch (err) {
          unavailable(err); // never a decision, never another error
          log.push([started, false]);
          await sleep(20); // what a worker does: back off, then try again
        }
      }
      return log;
    };
    const callers = Array.from({ length: 4 }, caller);
    await sleep(300);
    await own.kill();
    await sleep(400);
    await own.start(); // same port, empty, no script cache
    restartedAt = Date.now();
    await sleep(1500);
    running = false;
    let worst = 0;
    for (const log of await Promise.all(callers)) {
      assert.ok(log[0][1], 'the run started healthy');
      assert.ok(
        log.some(([, ok]) => !ok),
        'the outage was seen',
      );
      const after = log.filter(([at]) => at >= restartedAt).map(([, ok]) => ok);
      const errorsAfter = after.findIndex((ok) => ok);
      assert.ok(errorsAfter >= 0, 'recovered after the restart');
      worst = Math.max(worst, errorsAfter);
    }
    t.diagnostic(`restart: at most ${worst} unavailable error(s) per caller after the server was back`);
    assert.ok(worst <= 5, `${worst} errors after the restart`);
    // The new server's script cache was empty: the calls went through EVAL
    // and were counted there, with a TTL.
    const key = l.key('tenant-1');
    assert.equal(await redis.exists(key), 1);
    assert.ok((await redis.pttl(key)) > 0);
    await assertEveryKeyExpires(redis);
  } finally {
    await own.stop();
  }
});

// ------------------------------------------------------------ unreachable

test('an unreachable Redis is unavailable within the configured timeout', { timeout: 30_000 }, async () => {
  const p = { resource: unique('dead'), limit: 5, windowMs: 1000 };
  // Nothing listens: ioredis queues the command while it reconnects, the
  // limiter gives up at its timeout.
  const refused = client(`redis://127.0.0.1:${freePort()}/`, { maxRetriesPerRequest: 20 });
  for (const timeoutMs of [100, 400]) {
    const l = new Limiter(refused, p, { timeoutMs });
    for (const call of [() => l.acquire('t'), () => l.peek('t', { nowMs: T }), () => l.reset('t')]) {
      await rejectsWithin(call, unavailable, timeoutMs - 5, timeoutMs + 500);
    }
  }
  // Without the offline queue ioredis fails at once; still `unavailable`.
  const noQueue = client(`redis://127.0.0.1:${freePort()}/`, { enableOfflineQueue: false });
  await rejectsWithin(() => new Limiter(noQueue, p, { timeoutMs: 2000 }).acquire('t'), unavailable, 0, 1000);
  // A peer that accepts the connection and never answers.
  const sockets = new Set();
  const silent = net.createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
  });
  await new Promise((resolve) => silent.listen(0, '127.0.0.1', resolve));
  try {
    const mute = client(`redis://127.0.0.1:${silent.address().port}/`, { enableReadyCheck: false });
    const l = new Limiter(mute, p, { timeoutMs: 250 });
    await rejectsWithin(() => l.acquire('t'), unavailable, 245, 750);
    await rejectsWithin(() => l.reset('t'), unavailable, 245, 750);
    mute.disconnect();
  } finally {
    for (const s of sockets) s.destroy();
    silent.close();
  }
});

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
    // This job's permit was counted on the restarted server. Acquires that
    // timed out while it was down may have been counted too: ioredis keeps
    // them in its offline queue and sends them on reconnect (an over-count,
    // never an over-admission).
    assert.ok(runs[0].remaining >= 0 && runs[0].remaining <= 3, `remaining ${runs[0].remaining}`);
  } finally {
    if (worker) await worker.close();
    if (queue) await queue.close();
    await queueServer.stop();
    await limiterServer.stop();
  }
});

// ------------------------------------------------------------- slow Redis

/**
 * A loopback TCP proxy to `upstream` that delays every chunk, in both
 * directions, by `delayMs` (changeable at any time; order is kept).
 */
class SlowProxy {
  constructor(upstream) {
    this.upstream = upstream;
    this.delayMs = 0;
    this.sockets = new Set();
    this.server = net.createServer((down) => this.#accept(down));
  }

  listen() {
    return new Promise((resolve) => this.server.listen(0, '127.0.0.1', () => resolve(this)));
  }

  get port() {
    return this.server.address().port;
  }

  #accept(down) {
    const up = net.connect(this.upstream, '127.0.0.1');
    for (const s of [down, up]) {
      this.sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => {
        this.sockets.delete(s);
        down.destroy();
        up.destroy();
      });
    }
    this.#pump(down, up);
    this.#pump(up, down);
  }

  // One queue per direction, drained by one timer: a chunk is written when
  // it is due and never before the chunks that came earlier.
  #pump(from, to) {
    const queue = [];
    let timer = null;
    const drain = () => {
      timer = null;
      while (queue.length && queue[0].due <= Date.now()) to.write(queue.shift().chunk);
      if (queue.length) timer = setTimeout(drain, queue[0].due - Date.now());
    };
    from.on('data', (chunk) => {
      queue.push({ due: Date.now() + this.delayMs, chunk });
      if (!timer) timer = setTimeout(drain, Math.max(0, queue[0].due - Date.now()));
    });
  }

  close() {
    for (const s of this.sockets) s.destroy();
    return new Promise((resolve) => this.server.close(resolve));
  }
}

test('a slow Redis: a timeout below the latency is unavailable in time, above it is served', { timeout: 30_000 }, async () => {
  const own = await ownRedis('slow');
  const proxy = await new SlowProxy(own.port).listen();
  try {
    const redis = client(`redis://127.0.0.1:${proxy.port}/`, { maxRetriesPerRequest: 20 });
    await redis.ping(); // connected while the link is fast
    const p = { resource: unique('slow'), limit: 10, windowMs: 60_000 };
    const short = new Limiter(redis, p, { timeoutMs: 250 });
    const long = new Limiter(redis, p, { timeoutMs: 3000 });
    assert.equal((await short.acquire('t', { nowMs: T })).remaining, 9);

    proxy.delayMs = 300; // 600 ms round trip
    await rejectsWithin(() => short.acquire('t', { nowMs: T + 1 }), unavailable, 245, 750);
    await rejectsWithin(() => short.peek('t', { nowMs: T + 1 }), unavailable, 245, 750);
    await rejectsWithin(() => short.reset('u'), unavailable, 245, 750);
    const started = Date.now();
    const served = await long.acquire('t', { nowMs: T + 2 });
    const elapsed = Date.now() - started;
    assert.equal(served.allowed, true);
    assert.ok(elapsed >= 590, `served in ${elapsed} ms through a 600 ms round trip`);
    // A timed-out call had already left: Redis may still have counted it.
    // Counted or not, the decision stays within "none" and "one" extra.
    assert.ok(served.remaining === 8 || served.remaining === 7, `remaining ${served.remaining}`);

    proxy.delayMs = 0;
    await sleep(700); // let the timed-out commands' replies drain
    const after = await short.acquire('t', { nowMs: T + 3 });
    assert.equal(after.allowed, true);
    assert.equal(after.remaining, served.remaining - 1);
    await assertEveryKeyExpires(redis);
  } finally {
    await proxy.close();
    await own.stop();
  }
});

// ------------------------------------------------------------- wrong type

test('a key of the wrong type is wrong_type with a clear message, and is left alone', { timeout: 20_000 }, async () => {
  const redis = client(url);
  for (const algorithm of ['sliding_log', 'sliding_counter']) {
    const l = new Limiter(redis, { resource: unique('wrongtype'), algorithm, limit: 3, windowMs: 60_000 });
    const key = l.key('t');
    // A TTL, so that the run's TTL check stays about slidelimit's own keys.
    await redis.set(key, 'not a rate limit', 'PX', 60_000);
    // The log expects a list, the counter a hash: give each the other too.
    const other = l.key('u');
    if (algorithm === 'sliding_log') await redis.hset(other, 'f', '1');
    else await redis.rpush(other, 'x');
    await redis.pexpire(other, 60_000);
    for (const [tenant, call] of [
      ['t', () => l.acquire('t')],
      ['t', () => l.acquire('t', { nowMs: T })],
      ['t', () => l.peek('t')],
      ['u', () => l.acquire('u', { nowMs: T })],
    ]) {
      await assert.rejects(call(), (err) => {
        isCode(WrongTypeError, 'wrong_type')(err);
        assert.equal(err.name, 'WrongTypeError');
        // Core's message names the key and the algorithm, then the server's text.
        assert.ok(
          err.message.startsWith(`key ${l.key(tenant)} holds a value the ${algorithm} algorithm does not use`),
          err.message,
        );
        assert.match(err.message, /WRONGTYPE/);
        assert.match(err.message, /wrong kind of value/);
        assert.equal(err.cause && err.cause.name, 'ReplyError', 'the ioredis error is the cause');
        return true;
      });
    }
    assert.equal(await redis.get(key), 'not a rate limit', 'the key was not touched');
    assert.equal(await redis.type(other), algorithm === 'sliding_log' ? 'hash' : 'list');
  }
});

// -------------------------------------------------------------------- ACL

const ACL_COMMANDS = [
  'evalsha', 'eval', 'del', 'time', 'lrange', 'llen', 'lindex', 'lpop', 'ltrim', 'rpush',
  'pexpire', 'hmget', 'hincrby', 'hkeys', 'hdel',
];

test('an ACL user confined to its prefix works, and writes nowhere else', { timeout: 30_000 }, async () => {
  const own = await ownRedis('acl');
  try {
    const admin = client(own.url());
    const ns = `acl${process.pid}`;
    const user = `slidelimit-${ns}`;
    await admin.call(
      'ACL', 'SETUSER', user, 'reset', 'on', '>s3cret-pass', `~${ns}:*`, 'resetchannels', '-@all',
      ...ACL_COMMANDS.map((c) => `+${c}`),
    );
    // The ready check sends INFO, which this user may not run.
    const asUser = client(`redis://${user}:s3cret-pass@127.0.0.1:${own.port}/`, { enableReadyCheck: false });
    await assert.rejects(asUser.call('ACL', 'WHOAMI'), /NOPERM/); // really confined

    for (const algorithm of ['sliding_log', 'sliding_counter']) {
      const l = new Limiter(asUser, { namespace: ns, resource: 'geocode', algorithm, limit: 3, windowMs: 60_000 });
      // Server time (the script calls TIME), cost, peek, denial, reset.
      assert.equal((await l.acquire('t')).allowed, true);
      assert.equal((await l.acquire('t', { cost: 2 })).allowed, true);
      assert.equal((await l.peek('t')).allowed, false);
      assert.equal((await l.acquire('t')).allowed, false);
      assert.equal(await l.reset('t'), true);
      for (let i = 0; i < 4; i++) assert.equal((await l.acquire('t', { nowMs: T + i })).allowed, i < 3);
      // After the window: the log trims, the counter drops old fields.
      assert.equal((await l.acquire('t', { nowMs: T + 200_000 })).allowed, true);
      // NOSCRIPT on an empty cache falls back to EVAL, which the user may run.
      await admin.script('FLUSH');
      assert.equal((await l.acquire('t', { nowMs: T + 200_001 })).allowed, true);
      assert.ok((await admin.pttl(l.key('t'))) > 0);
    }
    const before = await admin.dbsize();

    // The same user, another namespace: refused by the ACL, nothing written.
    for (const algorithm of ['sliding_log', 'sliding_counter']) {
      const l = new Limiter(asUser, { namespace: `other${ns}`, resource: 'geocode', algorithm, limit: 3, windowMs: 60_000 });
      for (const call of [() => l.acquire('t'), () => l.acquire('t', { nowMs: T }), () => l.peek('t'), () => l.reset('t')]) {
        await assert.rejects(call(), (err) => {
          isCode(PermissionDeniedError, 'permission_denied')(err);
          assert.match(err.message, /NOPERM/);
          return true;
        });
      }
      assert.equal(await admin.exists(l.key('t')), 0, 'nothing written outside the prefix');
    }
    assert.equal(await admin.dbsize(), before);
    // Nor any other command inside its own prefix.
    await assert.rejects(asUser.set(`${ns}:x`, '1'), /NOPERM/);
    assert.equal(await admin.exists(`${ns}:x`), 0);
    await assertEveryKeyExpires(admin);
  } finally {
    await own.stop();
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

test('TLS with verification works; an untrusted or misnamed server is unavailable', { timeout: 60_000 }, async () => {
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
    for (const redis of [
      client({ host: '127.0.0.1', port, tls: { ca, servername: 'localhost' } }),
      client(`rediss://127.0.0.1:${port}/`, { tls: { ca, servername: 'localhost' } }),
    ]) {
      const l = new Limiter(redis, p, { timeoutMs: 2000 });
      assert.equal(redis.options.tls.rejectUnauthorized, undefined, 'verification is not turned off');
      const d = await l.acquire('t');
      assert.equal(d.allowed, true);
      assert.equal((await l.peek('t')).allowed, d.remaining > 0);
      assert.equal(await l.reset('t'), true);
      assert.ok((await l.acquire('t', { nowMs: T })).allowed);
      assert.ok((await redis.pttl(l.key('t'))) > 0);
      await assertEveryKeyExpires(redis);
    }
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

test('bad input is invalid_argument naming the field, and writes nothing', { timeout: 30_000 }, async () => {
  const own = await ownRedis('badinput');
  try {
    const redis = client(own.url());
    // Core's rule is 512 bytes of UTF-8, not 512 JS characters.
    const utf8of513 = `${'é'.repeat(256)}x`;
    assert.equal(Buffer.byteLength(utf8of513), 513);
    const badNumbers = [NaN, Infinity, -Infinity, -1, 1.5, 2 ** 53 + 2, 2 ** 64, '1', 1n, null, {}];
    const base = { namespace: 'bad', resource: 'geocode', limit: 5, windowMs: 1000 };

    const expectInvalid = (field) => (err) => {
      assert.ok(err instanceof InvalidArgumentError, `expected InvalidArgumentError for ${field}, got ${err && err.stack}`);
      assert.equal(err.code, 'invalid_argument');
      assert.equal(err.field, field, `field of: ${err.message}`);
      assert.ok(err.message.startsWith(`${field}: `), err.message);
      return true;
    };

    // The policy: limit and window_ms.
    const policyCases = [
      ...badNumbers.map((v) => [{ limit: v }, 'limit']),
      ...badNumbers.map((v) => [{ windowMs: v }, 'window_ms']),
      [{ limit: 0 }, 'limit'],
      [{ windowMs: 0 }, 'window_ms'],
      [{ limit: 2 ** 53 + 2, windowMs: 1 }, 'limit'],
      [{ limit: 2 ** 30, windowMs: 2 ** 30 }, 'limit'],
    ];
    for (const [overrides, field] of policyCases) {
      assert.throws(() => new Limiter(redis, { ...base, ...overrides }), expectInvalid(field), `${String(Object.values(overrides)[0])}`);
    }

    const l = new Limiter(redis, base);
    const callCases = [
      ['', undefined, 'tenant'],
      [utf8of513, undefined, 'tenant'],
      ['x'.repeat(513), undefined, 'tenant'],
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
      ['t', { cost: 0 }, 'cost'],
      ['t', { cost: -0 }, 'cost'],
      ['t', { cost: 6 }, 'cost'], // above the limit
      ...badNumbers.filter((v) => v !== null).map((v) => ['t', { nowMs: v }, 'now_ms']),
      ['t', { nowMs: 2 ** 52 + 1 }, 'now_ms'],
      ['t', 'fast', 'options'],
    ];
    for (const [tenant, options, field] of callCases) {
      await assert.rejects(l.acquire(tenant, options), expectInvalid(field));
      await assert.rejects(l.peek(tenant, options), expectInvalid(field));
    }
    for (const tenant of ['', utf8of513, 42, null, undefined, '\uD800']) {
      await assert.rejects(l.reset(tenant), expectInvalid('tenant'));
      assert.throws(() => l.key(tenant), expectInvalid('tenant'));
    }
    assert.equal(await redis.dbsize(), 0, 'no key written by bad input');

    // Valid edges: 512 bytes of UTF-8, and the largest numbers allowed.
    assert.equal((await l.acquire('é'.repeat(256), { nowMs: T })).allowed, true);
    assert.equal((await l.acquire('edge', { cost: 5, nowMs: 2 ** 52 })).allowed, true);
    await redis.flushdb();

    // Braces in a tenant are not an error: they are escaped, so the key still
    // holds exactly one hash tag, and it is the only key written.
    for (const tenant of ['}{a}{{b}}', '{', '}', '{}', '{{{{']) {
      const d = await l.acquire(tenant, { nowMs: T });
      assert.equal(d.allowed, true);
      const keys = await redis.keys('*');
      assert.deepEqual(keys, [l.key(tenant)], tenant);
      assert.equal(keys[0].split('{').length, 2, keys[0]);
      assert.equal(keys[0].split('}').length, 2, keys[0]);
      await redis.flushdb();
    }
    assert.equal(l.key('}{a}{{b}}'), 'bad:{geocode:%7D%7Ba%7D%7B%7Bb%7D%7D}:log:1000');
    assert.equal(await redis.dbsize(), 0);
    // The process is alive and the limiter still works.
    assert.equal((await l.acquire('t', { nowMs: T })).remaining, 4);
    await assertEveryKeyExpires(redis);
  } finally {
    await own.stop();
  }
});
