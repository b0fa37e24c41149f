// The e2e run's BullMQ worker (docs/e2e.md): it adds the jobs the run feeds it
// (Redis list e2e:feed:bullmq) to a BullMQ queue and works them through
// slidelimit/bullmq's rateLimited: a job calls the provider for its tenant's
// API key only after slidelimit admits it, and is delayed (not failed) when
// denied. Each completed job is recorded in e2e:done with its attemptsMade.
// slidelimit's metrics are served on E2E_METRICS_PORT.
'use strict';

const http = require('node:http');
const Redis = require('ioredis');
const { Queue, Worker } = require('bullmq');
const prom = require('prom-client');
const { Limiter, Metrics } = require('slidelimit');
const { rateLimited } = require('slidelimit/bullmq');

function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} must be set`);
  return value;
}

function intEnv(name) {
  const n = Number(env(name));
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got ${process.env[name]}`);
  return n;
}

async function main() {
  const url = env('E2E_REDIS_URL');
  const provider = env('E2E_PROVIDER_URL');
  const policy = { namespace: 'rl', resource: 'geocode', limit: intEnv('E2E_LIMIT'), windowMs: intEnv('E2E_WINDOW_MS') };
  const jitterMs = intEnv('E2E_JITTER_MS');
  // The bucketed window's buckets (the run picks a count that divides the window).
  const buckets = { bucketed_window: intEnv('E2E_BUCKETS') };

  const connection = new Redis(url, { maxRetriesPerRequest: null });
  const feedConn = new Redis(url, { maxRetriesPerRequest: null });
  const registry = new prom.Registry();
  const metrics = new Metrics({ registry, tenantLabel: true });
  const specs = {};
  for (const algorithm of ['sliding_log', 'bucketed_window', 'sliding_counter']) {
    specs[algorithm] = { ...policy, algorithm, ...(algorithm in buckets ? { buckets: buckets[algorithm] } : {}) };
  }
  // The provider's two limits, checked and recorded together: the short one
  // as a log, the long one as a bucketed window.
  specs.multi = {
    namespace: policy.namespace,
    resource: policy.resource,
    limits: [
      { algorithm: 'sliding_log', limit: intEnv('E2E_SHORT_LIMIT'), windowMs: intEnv('E2E_SHORT_WINDOW_MS') },
      { algorithm: 'bucketed_window', limit: policy.limit, windowMs: policy.windowMs, buckets: buckets.bucketed_window },
    ],
  };
  const processors = {};
  for (const [alg, spec] of Object.entries(specs)) {
    const limiter = new Limiter(connection, spec, { metrics });
    processors[alg] = rateLimited(limiter, (job) => geocode(job), {
      tenant: (job) => job.data.tenant,
      jitterMs,
      maxDeferrals: 100000,
    });
  }

  async function geocode(job) {
    const res = await fetch(`${provider}/geocode?address=${encodeURIComponent(job.data.id)}`, {
      headers: { 'X-Api-Key': job.data.tenant, 'X-Job-Id': job.data.id, 'X-System': 'bullmq', 'X-Sent-Ms': String(Date.now()) },
    });
    await res.arrayBuffer();
    // A 429 is recorded, not retried: the run counts it (the counter's overshoot).
    const record = { id: job.data.id, system: 'bullmq', tenant: job.data.tenant, alg: job.data.alg,
      status: res.status, attempt: job.attemptsMade, ms: Date.now() };
    // (slidelimit/bullmq keeps its deferral count in job data, not as API: not recorded.)
    await connection.rpush('e2e:done', JSON.stringify(record));
  }

  const queue = new Queue('e2e-geocode', { connection });
  const worker = new Worker('e2e-geocode', (job, token) => processors[job.data.alg](job, token), {
    connection,
    concurrency: intEnv('E2E_CONCURRENCY'),
  });
  worker.on('failed', (job, err) => console.error(`job ${job && job.data.id} failed: ${err.stack || err}`));

  const server = http.createServer(async (req, res) => {
    res.setHeader('Content-Type', registry.contentType);
    res.end(await registry.metrics());
  });
  server.listen(intEnv('E2E_METRICS_PORT'), '127.0.0.1');

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    feedConn.disconnect();
    server.close();
    await worker.close();
    await queue.close();
    connection.disconnect();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  console.log(`bullmq worker ready (metrics on :${process.env.E2E_METRICS_PORT})`);
  while (!stopping) {
    let item;
    try {
      item = await feedConn.blpop('e2e:feed:bullmq', 1);
    } catch (e) {
      if (stopping) break;
      throw e;
    }
    if (!item) continue;
    const data = JSON.parse(item[1]);
    await queue.add('geocode', data, { removeOnComplete: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
