// A BullMQ worker for the geocoding case: the provider allows 600 requests per
// rolling 60 s per API key, and Node, Rust and Go workers share that budget
// through the same Redis key. A job whose key is out of budget is delayed
// until a permit frees (plus jitter); it never burns an attempt.
//
//   REDIS_URL=redis://127.0.0.1:6379/ node examples/geocode-worker.js
//
// The demo enqueues 8 lookups for a key limited (for the demo) to 5 per 2 s,
// prints when each runs, and exits.
'use strict';

const Redis = require('ioredis');
const { Queue, Worker } = require('bullmq');
const prom = require('prom-client');
const { Limiter, Metrics, implementation } = require('slidelimit');
const { rateLimited } = require('slidelimit/bullmq');

const url = process.env.REDIS_URL || process.env.SLIDELIMIT_TEST_REDIS_URL || 'redis://127.0.0.1:6379/';
const demo = { limit: 5, windowMs: 2000 }; // production: { limit: 600, windowMs: 60_000 }

// Stand-in for the provider's HTTP call.
async function geocode(address) {
  return { address, lat: 52.52, lon: 13.405 };
}

async function main() {
  const connection = new Redis(url, { maxRetriesPerRequest: null });
  const registry = new prom.Registry();
  const limiter = new Limiter(connection, { resource: 'geocode', ...demo }, { metrics: new Metrics({ registry }) });
  const queue = new Queue('geocode-demo', { connection });
  await queue.obliterate({ force: true });
  await limiter.reset('api-key-1');

  const started = Date.now();
  const worker = new Worker(
    'geocode-demo',
    rateLimited(
      limiter,
      async (job, _token, decision) => {
        const result = await geocode(job.data.address);
        console.log(`+${Date.now() - started} ms  ${job.data.address}  (remaining ${decision.remaining})`);
        return result;
      },
      { tenant: (job) => job.data.apiKey, jitterMs: 100 },
    ),
    { connection, concurrency: 4 },
  );

  const jobs = Array.from({ length: 8 }, (_, i) => ({ name: 'lookup', data: { apiKey: 'api-key-1', address: `Main St ${i + 1}` } }));
  await queue.addBulk(jobs);
  console.log(`slidelimit on ${implementation}; 8 lookups, budget ${demo.limit} per ${demo.windowMs} ms`);

  let done = 0;
  await new Promise((resolve) => worker.on('completed', () => ++done === jobs.length && resolve()));
  const text = await registry.metrics();
  console.log(text.split('\n').filter((l) => /^ratelimit_(allowed|denied)_total/.test(l)).join('\n'));
  await worker.close();
  await queue.obliterate({ force: true });
  await queue.close();
  connection.disconnect();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
