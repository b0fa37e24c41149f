'use strict';
// The Limiter on the six-node Redis Cluster (three masters, three replicas)
// that `make test-node` starts (scripts/with-cluster.sh), through ioredis
// Cluster: every tenant's key routes by its hash tag, and a NOSCRIPT on any
// node is invisible. Other test files share the Cluster, so every resource
// here is unique().

const test = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { Limiter, MemoryLimiter, slot } = require('..');
const { unique } = require('./helpers');

const urls = process.env.SLIDELIMIT_TEST_CLUSTER_URLS;
if (!urls) {
  throw new Error(
    'SLIDELIMIT_TEST_CLUSTER_URLS is not set: run the tests through `make test-node` ' +
      '(or scripts/with-cluster.sh), which starts a local Redis Cluster of its own',
  );
}

let cluster;

test.before(async () => {
  const nodes = urls.split(',').map((u) => {
    const { hostname, port } = new URL(u);
    return { host: hostname, port: Number(port) };
  });
  cluster = new Redis.Cluster(nodes);
  // Resolves once the slot map is loaded, which the spread check reads.
  await cluster.ping();
});

test.after(() => {
  if (cluster) cluster.disconnect();
});

test('a Cluster gives the same decisions as the memory engine, on every node', async () => {
  const policy = { resource: unique('cluster'), limit: 3, windowMs: 1000 };
  const onCluster = new Limiter(cluster, policy);
  const inMemory = new MemoryLimiter(policy);
  const tenants = Array.from({ length: 24 }, (_, i) => `tenant-${i}`);
  const slots = new Set(tenants.map((t) => slot(onCluster.key(t))));
  assert.ok(slots.size > 10, 'tenants spread over many slots');
  for (let step = 0; step < 5; step++) {
    for (const t of tenants) {
      const options = { nowMs: 10_000 + step * 100 };
      assert.deepEqual(await onCluster.acquire(t, options), await inMemory.acquire(t, options));
    }
  }
  // The keys really are spread over the three masters: ioredis's slot map
  // lists each slot's master first. (DBSIZE would count other tests' keys.)
  const owners = new Set([...slots].map((s) => cluster.slots[s][0]));
  assert.equal(owners.size, 3, `masters holding keys: ${[...owners]}`);
  for (const t of tenants) {
    assert.equal(await cluster.exists(onCluster.key(t)), 1, `${t}'s key is on the Cluster`);
  }
});

test('a flushed script cache on every node is invisible', async () => {
  const l = new Limiter(cluster, { resource: unique('cluster'), limit: 2, windowMs: 60_000 });
  const tenants = Array.from({ length: 12 }, (_, i) => `t${i}`);
  for (const t of tenants) assert.equal((await l.acquire(t)).remaining, 1);
  // Replicas too: one of them may be promoted and must not matter.
  await Promise.all(cluster.nodes('all').map((n) => n.script('FLUSH')));
  for (const t of tenants) assert.equal((await l.acquire(t)).remaining, 0);
  for (const t of tenants) assert.equal((await l.acquire(t)).allowed, false);
  for (const t of tenants) assert.equal(await l.reset(t), true);
});

test('a Cluster client with redisOptions.stringNumbers reads every decision', async () => {
  // ioredis hands integers over as strings then: the limiter reads them, so a
  // recorded permit is never reported as malformed_reply.
  const strings = new Redis.Cluster(cluster.startupNodes, { redisOptions: { stringNumbers: true } });
  try {
    const policy = { resource: unique('cluster'), limit: 1, windowMs: 60_000 };
    const viaStrings = new Limiter(strings, policy);
    const plain = new Limiter(cluster, policy);
    assert.deepEqual(await viaStrings.acquire('t', { nowMs: 1_000_000 }), {
      allowed: true,
      remaining: 0,
      retryAfterMs: 0,
      resetAfterMs: 60_000,
      nowMs: 1_000_000,
      deniedBy: null,
    });
    assert.equal((await plain.acquire('t', { nowMs: 1_000_001 })).allowed, false, 'one budget');
    assert.equal((await viaStrings.acquire('t', { nowMs: 1_000_002 })).retryAfterMs, 59_998);
    assert.equal(await viaStrings.reset('t'), true);
  } finally {
    strings.disconnect();
  }
});
