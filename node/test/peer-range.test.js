'use strict';
// The low end of each peer dependency range in package.json, installed from
// npm into a fresh project with the packed package, runs a smoke test on a
// real Redis: Limiter over ioredis, Metrics on prom-client, a BullMQ worker
// whose job over budget is delayed, not failed. The high end is what the rest
// of the suite runs on (the devDependencies, inside the range: checked below).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { url, unique } = require('./helpers');
const { platformTag } = require('../lib/platform');

const pkgDir = path.join(__dirname, '..');
const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
const PEERS = ['ioredis', 'bullmq', 'prom-client'];

// ">=A.B.C <N": every peer range has this form, so that npm never picks an
// untested major.
function bounds(name) {
  const m = /^>=(\d+)\.(\d+)\.(\d+) <(\d+)$/.exec(pkg.peerDependencies[name]);
  assert.ok(m, `${name}: peer range ${pkg.peerDependencies[name]} is not ">=A.B.C <N"`);
  return { low: `${m[1]}.${m[2]}.${m[3]}`, lowMajor: Number(m[1]), nextMajor: Number(m[4]) };
}

function npm(args, cwd) {
  return execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, encoding: 'utf8' });
}

test('every peer range is bounded above and the tested versions lie inside it', () => {
  for (const name of PEERS) {
    const { low, nextMajor } = bounds(name);
    const tested = pkg.devDependencies[name].split('.').map(Number);
    const lowParts = low.split('.').map(Number);
    const cmp = tested.findIndex((n, i) => n !== lowParts[i]);
    assert.ok(cmp === -1 || tested[cmp] > lowParts[cmp], `${name} ${pkg.devDependencies[name]} below ${low}`);
    assert.ok(tested[0] < nextMajor, `${name} ${pkg.devDependencies[name]} not below ${nextMajor}`);
  }
});

// Runs in the fresh project, with only its own node_modules.
const smoke = `
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const prom = require('prom-client');
const { Queue, Worker } = require('bullmq');
const { Limiter, Metrics } = require('slidelimit');
const { rateLimited } = require('slidelimit/bullmq');
const [url, name] = process.argv.slice(2);

(async () => {
  const clients = [];
  const connect = (options) => {
    const c = new Redis(url, options);
    clients.push(c);
    return c;
  };
  const redis = connect({ maxRetriesPerRequest: 1 });
  const registry = new prom.Registry();
  const metrics = new Metrics({ registry, client: prom });
  const limiter = new Limiter(redis, { namespace: name, resource: 'smoke', limit: 2, windowMs: 60000 }, { metrics });
  const seen = [];
  for (let i = 0; i < 3; i++) seen.push((await limiter.acquire('t')).allowed);
  assert.deepEqual(seen, [true, true, false]);
  assert.equal((await limiter.peek('t')).allowed, false);
  const text = await registry.metrics();
  assert.match(text, /ratelimit_allowed_total\\{resource="smoke"\\} 2/);
  assert.match(text, /ratelimit_denied_total\\{resource="smoke"\\} 1/);
  assert.equal(await limiter.reset('t'), true);

  // BullMQ: limit 1 per 700 ms; the second job waits for its permit in the
  // delayed set and completes on its first attempt.
  const gate = new Limiter(redis, { namespace: name, resource: 'jobs', limit: 1, windowMs: 700 });
  const queue = new Queue(name, { connection: connect({ maxRetriesPerRequest: 1 }) });
  const ran = [];
  const worker = new Worker(
    name,
    rateLimited(gate, async (job) => { ran.push({ id: job.id, at: Date.now() }); }, { tenant: () => 't', jitterMs: 0 }),
    { connection: connect({ maxRetriesPerRequest: null }) },
  );
  const failed = [];
  worker.on('failed', (job, err) => failed.push(err.message));
  await worker.waitUntilReady();
  const jobs = [await queue.add('a', {}), await queue.add('b', {})];
  const deadline = Date.now() + 10000;
  while (ran.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.equal(ran.length, 2, 'both jobs ran');
  assert.ok(ran[1].at - ran[0].at >= 500, 'the second job waited for the window: ' + (ran[1].at - ran[0].at) + ' ms');
  assert.deepEqual(failed, []);
  for (const j of jobs) assert.equal(await (await queue.getJob(j.id)).getState(), 'completed');
  await gate.reset('t');
  await worker.close();
  await queue.obliterate({ force: true });
  await queue.close();
  for (const c of clients) c.disconnect();
  console.log(JSON.stringify(['ioredis', 'bullmq', 'prom-client'].map((p) => require(p + '/package.json').version)));
})().catch((e) => { console.error(e); process.exit(1); });
`;

test('the low end of every peer range works', { timeout: 300_000 }, () => {
  const project = fs.mkdtempSync(path.join(os.tmpdir(), 'slidelimit-peers-'));
  try {
    // The packages as make dist-npm packs them: main, host platform, wasm.
    execFileSync(process.execPath, [path.join(pkgDir, 'scripts', 'pack-npm.js'), project, '--platforms=host'], { encoding: 'utf8' });
    const tarballs = [`slidelimit-${pkg.version}.tgz`, `slidelimit-${platformTag()}-${pkg.version}.tgz`, `slidelimit-wasm-${pkg.version}.tgz`];
    fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'low-peers', private: true }));
    const lows = PEERS.map((name) => `${name}@${bounds(name).low}`);
    npm(['install', ...tarballs.map((t) => path.join(project, t)), ...lows], project);
    fs.writeFileSync(path.join(project, 'smoke.js'), smoke);
    const out = execFileSync(process.execPath, ['smoke.js', url, unique('peers')], {
      cwd: project,
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.deepEqual(JSON.parse(out), PEERS.map((name) => bounds(name).low));
  } finally {
    fs.rmSync(project, { recursive: true, force: true });
  }
});
