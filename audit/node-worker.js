#!/usr/bin/env node
'use strict';
// The Node process of the cross-language audit (audit/run), run once per
// implementation (SLIDELIMIT_IMPL=native or wasm): --concurrency async loops
// share one Limiter and call acquire on one tenant with server time (Redis
// TIME) from --start-at-ms for --duration-ms, then every decision goes to --out
// as a JSON line {"lang":..,"allowed":..,"now_ms":..,"retry_after_ms":..} (an
// error as {"lang":..,"error":"<code>"}). audit/check.py merges the logs of all
// workers; the Rust and Go workers take the same flags.

const fs = require('node:fs');
const path = require('node:path');
const { createRequire } = require('node:module');
const { parseArgs } = require('node:util');

// The package and its ioredis live in node/.
const nodeDir = path.join(__dirname, '..', 'node');
const slidelimit = require(nodeDir);
const Redis = createRequire(path.join(nodeDir, 'package.json'))('ioredis');

const { values: opts } = parseArgs({
  options: {
    lang: { type: 'string', default: `node-${slidelimit.implementation}` },
    redis: { type: 'string' },
    cluster: { type: 'boolean', default: false },
    namespace: { type: 'string' },
    resource: { type: 'string', default: 'audit' },
    tenant: { type: 'string', default: 'tenant-1' },
    algorithm: { type: 'string', default: 'sliding_log' },
    limit: { type: 'string', default: '50' },
    'window-ms': { type: 'string', default: '2000' },
    'start-at-ms': { type: 'string', default: '0' },
    'duration-ms': { type: 'string', default: '6000' },
    concurrency: { type: 'string', default: '32' },
    pattern: { type: 'string', default: 'uniform' },
    // After each call a caller pauses a random 0..jitter-ms ms, so the
    // processes' calls interleave at Redis instead of arriving in batches.
    'jitter-ms': { type: 'string', default: '3' },
    // Each caller makes its first call at a random point of the first
    // ramp-ms ms, so the first window is not filled by whichever process fires
    // first (the log would then keep that phase for the whole run).
    'ramp-ms': { type: 'string', default: '0' },
    'timeout-ms': { type: 'string', default: '2000' },
    out: { type: 'string' },
  },
});

function fail(message) {
  process.stderr.write(`audit worker ${opts.lang}: ${message}\n`);
  process.exit(1);
}

function int(name) {
  const n = Number(opts[name]);
  if (!Number.isSafeInteger(n) || n < 0) fail(`--${name} must be a non-negative integer`);
  return n;
}

const windowMs = int('window-ms');
const durationMs = int('duration-ms');
const concurrency = int('concurrency');
const jitterMs = int('jitter-ms');
const rampMs = int('ramp-ms');
let startAt = int('start-at-ms');
if (!opts.redis || !opts.namespace || !opts.out) fail('usage: node-worker.js --redis URL --namespace NS --out FILE [flags]');
if (!['uniform', 'burst'].includes(opts.pattern)) fail('--pattern must be uniform or burst');
if (/["\\]/.test(opts.lang)) fail('--lang must not hold quotes or backslashes');
if (windowMs < 1 || concurrency < 1) fail('--window-ms and --concurrency must be at least 1');

// How long to wait at t before the next call; the same rule in every worker.
// Time is the local wall clock: Redis runs on the same host. "burst" cycles
// through three windows: calls only in the last tenth of the first, all
// through the second, none in the third.
function waitMs(t) {
  if (t < startAt) return startAt - t;
  if (opts.pattern === 'uniform') return 0;
  const rel = t - startAt;
  const n = Math.floor(rel / windowMs) % 3;
  const e = rel % windowMs;
  const burst = Math.max(Math.floor(windowMs / 10), 1);
  if (n === 0) return e >= windowMs - burst ? 0 : windowMs - burst - e;
  if (n === 1) return 0;
  return windowMs - e + (windowMs - burst);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function connect() {
  const urls = opts.redis.split(',').map((u) => u.trim());
  if (!opts.cluster) return new Redis(urls[0], { maxRetriesPerRequest: 1 });
  return new Redis.Cluster(urls.map((u) => {
    const { hostname, port } = new URL(u);
    return { host: hostname, port: Number(port) };
  }));
}

async function caller(limiter, end, lines) {
  const first = startAt + Math.floor(Math.random() * (rampMs + 1));
  if (first > Date.now()) await sleep(Math.min(first, end) - Date.now());
  for (;;) {
    const now = Date.now();
    if (now >= end) return;
    const wait = waitMs(now);
    if (wait > 0) {
      await sleep(Math.min(wait, end - now));
      continue;
    }
    try {
      const d = await limiter.acquire(opts.tenant);
      lines.push(
        `{"lang":"${opts.lang}","allowed":${d.allowed},"now_ms":${d.nowMs},"retry_after_ms":${d.retryAfterMs}}`,
      );
    } catch (e) {
      if (!(e instanceof slidelimit.SlidelimitError)) throw e;
      lines.push(`{"lang":"${opts.lang}","error":"${e.code}"}`);
    }
    const pause = Math.floor(Math.random() * (jitterMs + 1));
    if (pause > 0) await sleep(pause);
  }
}

async function main() {
  const redis = connect();
  try {
    const limiter = new slidelimit.Limiter(
      redis,
      {
        namespace: opts.namespace,
        resource: opts.resource,
        algorithm: opts.algorithm,
        limit: int('limit'),
        windowMs,
      },
      { timeoutMs: int('timeout-ms') },
    );
    if (startAt === 0) startAt = Date.now();
    const lines = [];
    const end = startAt + durationMs;
    await Promise.all(Array.from({ length: concurrency }, () => caller(limiter, end, lines)));
    fs.writeFileSync(opts.out, lines.length ? `${lines.join('\n')}\n` : '');
    process.stderr.write(`audit worker ${opts.lang}: ${lines.length} decisions logged\n`);
  } finally {
    redis.disconnect();
  }
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)));
