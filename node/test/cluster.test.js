'use strict';
// The Limiter on a real three-node Redis Cluster (ioredis Cluster): every
// tenant's key routes by its hash tag, and a NOSCRIPT on any node is invisible.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const Redis = require('ioredis');
const { Limiter, MemoryLimiter, slot } = require('..');
const { unique, startRedis, freeClusterPort, sleep, root } = require('./helpers');

const nodes = [];
let cluster;

test.before(async () => {
  for (let i = 0; i < 3; i++) {
    const name = `node-cluster-${process.pid}-${i}`;
    fs.rmSync(path.join(root, '.tmp', `redis-${name}`), { recursive: true, force: true });
    nodes.push(startRedis(name, ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf'], await freeClusterPort()));
  }
  execFileSync(
    'redis-cli',
    ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '0', '--cluster-yes'],
    { stdio: 'ignore' },
  );
  for (let i = 0; i < 100; i++) {
    const info = execFileSync('redis-cli', ['-p', String(nodes[0].port), 'cluster', 'info']).toString();
    if (info.includes('cluster_state:ok')) break;
    await sleep(100);
  }
  cluster = new Redis.Cluster(nodes.map((n) => ({ host: '127.0.0.1', port: n.port })));
});

test.after(() => {
  if (cluster) cluster.disconnect();
  for (const n of nodes) {
    n.stop();
    fs.rmSync(n.dir, { recursive: true, force: true });
  }
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
  // The keys really are spread over the three masters.
  const owners = await Promise.all(cluster.nodes('master').map((n) => n.dbsize()));
  assert.equal(owners.filter((n) => n > 0).length, 3, `keys per node: ${owners}`);
});

test('a flushed script cache on every node is invisible', async () => {
  const l = new Limiter(cluster, { resource: unique('cluster'), limit: 2, windowMs: 60_000 });
  const tenants = Array.from({ length: 12 }, (_, i) => `t${i}`);
  for (const t of tenants) assert.equal((await l.acquire(t)).remaining, 1);
  await Promise.all(cluster.nodes('master').map((n) => n.script('FLUSH')));
  for (const t of tenants) assert.equal((await l.acquire(t)).remaining, 0);
  for (const t of tenants) assert.equal((await l.acquire(t)).allowed, false);
  for (const t of tenants) assert.equal(await l.reset(t), true);
});
