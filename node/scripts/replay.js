#!/usr/bin/env node
'use strict';
// Conformance runner: `node scripts/replay.js VECTOR_FILE` prints the decision
// log of docs/protocol.md for one `slidelimit-vectors/1` file, running every
// decision vector through Limiter + ioredis on the Redis at
// SLIDELIMIT_TEST_REDIS_URL, or the Cluster at SLIDELIMIT_TEST_CLUSTER_URLS
// when SLIDELIMIT_CONFORMANCE_CLUSTER=1 (caller time; every key a vector
// touches is deleted first). SLIDELIMIT_IMPL picks native or wasm. Nothing
// else goes to stdout.

const fs = require('node:fs');
const Redis = require('ioredis');
const slidelimit = require('..');

const FORMAT = 'slidelimit-vectors/1';

function fail(message) {
  process.stderr.write(`replay: ${message}\n`);
  process.exit(2);
}

function load(path) {
  let file;
  try {
    file = JSON.parse(fs.readFileSync(path, 'utf8'));
  } catch (e) {
    fail(`${path}: ${e.message}`);
  }
  if (!file || file.format !== FORMAT) fail(`${path}: format must be ${JSON.stringify(FORMAT)}`);
  if (!Array.isArray(file.vectors)) fail(`${path}: vectors must be an array`);
  for (const [i, v] of file.vectors.entries()) {
    const name = v && typeof v.name === 'string' ? v.name : `#${i}`;
    if (v.kind === 'key') {
      if (!v.input || typeof v.input !== 'object') fail(`vector ${name}: input missing`);
    } else if (v.kind === 'decision') {
      if (!v.policy || typeof v.policy !== 'object') fail(`vector ${name}: policy missing`);
      if (!Array.isArray(v.steps)) fail(`vector ${name}: steps missing`);
    } else {
      fail(`vector ${name}: kind must be "key" or "decision", got ${JSON.stringify(v.kind)}`);
    }
  }
  return file.vectors;
}

function codeOf(err) {
  if (err instanceof slidelimit.SlidelimitError) return err.code;
  throw err;
}

function keyLine(v) {
  const { namespace, resource, tenant, algorithm, window_ms: windowMs } = v.input;
  try {
    // The key does not depend on the limit; 1 is always valid.
    const limiter = slidelimit.Limiter.memory({ namespace, resource, algorithm, limit: 1, windowMs });
    const key = limiter.key(tenant);
    return `{"vector":${JSON.stringify(v.name)},"key":${JSON.stringify(key)},"slot":${slidelimit.slot(key)}}`;
  } catch (e) {
    return `{"vector":${JSON.stringify(v.name)},"error":"${codeOf(e)}"}`;
  }
}

function stepLine(name, i, result) {
  const head = `{"vector":${JSON.stringify(name)},"step":${i},`;
  if (result.error) return `${head}"error":"${result.error}"}`;
  const d = result.decision;
  return (
    `${head}"allowed":${d.allowed},"remaining":${d.remaining},"retry_after_ms":${d.retryAfterMs},` +
    `"reset_after_ms":${d.resetAfterMs},"now_ms":${d.nowMs}}`
  );
}

async function decisionLines(v, redis) {
  const p = v.policy;
  let limiter;
  let policyError = null;
  try {
    limiter = new slidelimit.Limiter(
      redis,
      { namespace: p.namespace, resource: p.resource, algorithm: p.algorithm, limit: p.limit, windowMs: p.window_ms },
      { timeoutMs: 2000 },
    );
    for (const tenant of new Set(v.steps.map((s) => s.tenant))) {
      try {
        await limiter.reset(tenant);
      } catch (e) {
        // A tenant no key can be built for touches no key.
        if (codeOf(e) !== 'invalid_argument') throw e;
      }
    }
  } catch (e) {
    policyError = codeOf(e);
  }
  const lines = [];
  for (const [i, step] of v.steps.entries()) {
    let result;
    if (policyError) {
      result = { error: policyError };
    } else {
      try {
        result = { decision: await limiter.acquire(step.tenant, { cost: step.cost, nowMs: step.now_ms }) };
      } catch (e) {
        result = { error: codeOf(e) };
      }
    }
    lines.push(stepLine(v.name, i, result));
  }
  return lines;
}

// The Redis at SLIDELIMIT_TEST_REDIS_URL or, with
// SLIDELIMIT_CONFORMANCE_CLUSTER=1, the Cluster whose nodes are listed
// (comma-separated URLs) in SLIDELIMIT_TEST_CLUSTER_URLS.
function connect() {
  if (process.env.SLIDELIMIT_CONFORMANCE_CLUSTER === '1') {
    const urls = process.env.SLIDELIMIT_TEST_CLUSTER_URLS;
    if (!urls) fail('SLIDELIMIT_TEST_CLUSTER_URLS is not set');
    const nodes = urls.split(',').map((u) => {
      const { hostname, port } = new URL(u.trim());
      return { host: hostname, port: Number(port) };
    });
    return new Redis.Cluster(nodes, { redisOptions: { maxRetriesPerRequest: 1 } });
  }
  const url = process.env.SLIDELIMIT_TEST_REDIS_URL;
  if (!url) fail('SLIDELIMIT_TEST_REDIS_URL is not set');
  return new Redis(url, { maxRetriesPerRequest: 1 });
}

async function main() {
  const [path] = process.argv.slice(2);
  if (!path) fail('usage: replay.js VECTOR_FILE');
  const vectors = load(path);
  const redis = connect();
  const out = [];
  try {
    for (const v of vectors) {
      if (v.kind === 'key') out.push(keyLine(v));
      else out.push(...(await decisionLines(v, redis)));
    }
  } finally {
    redis.disconnect();
  }
  process.stdout.write(out.length ? `${out.join('\n')}\n` : '');
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)));
