// Benchmarks of the Node binding (make bench-node; needs SLIDELIMIT_TEST_REDIS_URL):
//  1. one check through core without I/O (build the call + parse a reply,
//     and parse only as for a cached call), through the napi addon and
//     through the wasm build;
//  2. Limiter.acquire against raw ioredis EVALSHA of the same script with the
//     same KEYS and ARGV on the same server in the same run (the baseline
//     builds its key per call with a template string, as plain ioredis code
//     would), sequential and with 32 in flight; also against EVALSHA with
//     arguments prepared before the run, acquire with more tenants than its
//     call cache, and rate-limiter-flexible's RateLimiterRedis.consume.
// SLIDELIMIT_IMPL picks the implementation behind Limiter for part 2.
//   node bench/bench.js [--skip-micro]
'use strict';

const path = require('node:path');
const Redis = require('ioredis');
const { RateLimiterRedis } = require('rate-limiter-flexible');
const slidelimit = require('..');
const { addonFile } = require('../lib/platform');
const { splitCall, numberReplyParser } = require('../lib/codec');

const url = process.env.SLIDELIMIT_TEST_REDIS_URL;
if (!url) throw new Error('SLIDELIMIT_TEST_REDIS_URL is not set (run through scripts/with-redis.sh)');
const quick = process.env.SLIDELIMIT_BENCH_QUICK === '1';
const N_MICRO = quick ? 20_000 : 300_000;
const N_SEQ = quick ? 2_000 : 20_000;
const N_PAR = quick ? 8_000 : 100_000;
const ROUNDS = quick ? 1 : 5;
const TENANTS = 1000;
const COLD_TENANTS = 50_000;

// What Limiter.acquire does around the I/O, N_MICRO times: with `build`, a
// call built by core (a tenant not in the limiter's call cache), else only the
// reply parsed (the cached default call). CPU time per check (wall time would
// count other processes on a small machine).
function microRound(core, build) {
  const policy = new core.Policy('rl', 'geocode', 'sliding_log', 600, 60000);
  const parseReply = numberReplyParser(core);
  const reply = [1, 599, 0, 60000, 1764475200000];
  const cached = splitCall(policy.buildCall('tenant-17', 1, undefined, false));
  let sink = 0;
  const t0 = process.cpuUsage();
  for (let i = 0; i < N_MICRO; i++) {
    const call = build ? splitCall(policy.buildCall('tenant-17', 1, undefined, false)) : cached;
    const d = parseReply(reply, 1);
    sink += call.length + d.remaining;
  }
  const used = process.cpuUsage(t0);
  if (sink === 0) throw new Error('unreachable');
  return ((used.user + used.system) * 1000) / N_MICRO;
}

function micro(impls) {
  const best = impls.map(() => [Infinity, Infinity]);
  // Interleaved rounds (the first is a warm-up), best of each.
  for (let r = 0; r <= ROUNDS; r++) {
    impls.forEach(([, core], i) => {
      [true, false].forEach((build, j) => {
        const ns = microRound(core, build);
        if (r > 0) best[i][j] = Math.min(best[i][j], ns);
      });
    });
  }
  impls.forEach(([label], i) =>
    console.log(`| ${label} | ${(best[i][0] / 1000).toFixed(2)} us | ${(best[i][1] / 1000).toFixed(2)} us |`),
  );
}

// Calls per second, and this process's CPU microseconds per call (steadier
// than throughput when other work shares the machine).
async function throughput(n, inFlight, op) {
  let next = 0;
  const t0 = process.hrtime.bigint();
  const c0 = process.cpuUsage();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < n) await op(next++);
    }),
  );
  const cpu = process.cpuUsage(c0);
  return { rate: n / (Number(process.hrtime.bigint() - t0) / 1e9), cpu: (cpu.user + cpu.system) / n };
}

async function main() {
  const skipMicro = process.argv.includes('--skip-micro');
  if (!skipMicro) {
    console.log('\n### One check without I/O (build the call + parse a reply)\n');
    console.log('| implementation | build + parse | parse only (cached call) |\n| --- | --- | --- |');
    micro([
      ['napi addon', require(path.join(__dirname, '..', 'dist', addonFile()))],
      ['wasm', require(path.join(__dirname, '..', 'dist', 'wasm', 'slidelimit_wasm.js'))],
    ]);
  }

  const redis = new Redis(url);
  const prefix = `bench-${process.pid}`;
  // A limit no run reaches, so every call is the same allowed path; tenants
  // rotate so that no list grows long.
  const policy = { namespace: prefix, resource: 'geocode', limit: 10_000, windowMs: 60_000 };
  const limiter = new slidelimit.Limiter(redis, policy);
  const tenants = Array.from({ length: TENANTS }, (_, i) => `tenant-${i}`);
  // More tenants than the limiter caches calls for: every call builds its call in core.
  const coldTenants = Array.from({ length: COLD_TENANTS }, (_, i) => `cold-${i}`);
  // Raw EVALSHA of the same script with the same KEYS and ARGV, as a user of
  // plain ioredis would write it: the key built per call with a template
  // string (checked against core's key below), the constant ARGV and SHA1
  // taken once from core.
  const { core } = require('../lib/binding');
  const p = new core.Policy(policy.namespace, policy.resource, 'sliding_log', policy.limit, policy.windowMs);
  const [sha, numKeys, , limitArg, windowArg, costArg, nowArg] = splitCall(p.buildCall('t', 1, undefined, false));
  const rawKey = (tenant) => `${prefix}:{geocode:${tenant}}:log:60000`;
  for (const t of ['tenant-0', 'tenant-999']) {
    if (rawKey(t) !== limiter.key(t)) throw new Error(`raw key ${rawKey(t)} is not core's ${limiter.key(t)}`);
  }
  // The same call prepared once per tenant before the run (no key building at all).
  const prepared = tenants.map((t) => splitCall(p.buildCall(t, 1, undefined, false)));
  await redis.eval(p.scriptText(false), 1, 'x', '1', '1', '1', '');
  const rlf = new RateLimiterRedis({ storeClient: redis, points: 1_000_000, duration: 60, keyPrefix: `${prefix}-rlf` });

  const BASELINE = 'raw ioredis evalsha';
  const ops = {
    [BASELINE]: (i) => redis.evalsha(sha, numKeys, rawKey(tenants[i % TENANTS]), limitArg, windowArg, costArg, nowArg),
    'raw ioredis evalsha, prepared': (i) => {
      const c = prepared[i % TENANTS];
      return redis.evalsha(c[0], c[1], c[2], c[3], c[4], c[5], c[6]);
    },
    'slidelimit acquire': (i) => limiter.acquire(tenants[i % TENANTS]),
    'slidelimit acquire, uncached tenant': (i) => limiter.acquire(coldTenants[i % COLD_TENANTS]),
    'rate-limiter-flexible consume': (i) => rlf.consume(tenants[i % TENANTS]),
  };
  for (const op of Object.values(ops)) await throughput(N_SEQ / 10, 1, op); // warm up

  console.log(`\n### Against Redis (${slidelimit.implementation}), calls per second, best of ${ROUNDS}\n`);
  console.log('| client | sequential | 32 in flight | Node CPU per call (32 in flight) |\n| --- | --- | --- | --- |');
  const results = {};
  for (const name of Object.keys(ops)) results[name] = { seq: 0, par: 0, cpu: Infinity };
  // Interleaved rounds, so that drift of the machine hits every client alike.
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, op] of Object.entries(ops)) {
      const seq = await throughput(N_SEQ, 1, op);
      const par = await throughput(N_PAR, 32, op);
      results[name].seq = Math.max(results[name].seq, seq.rate);
      results[name].par = Math.max(results[name].par, par.rate);
      results[name].cpu = Math.min(results[name].cpu, par.cpu);
    }
  }
  const base = results[BASELINE];
  for (const [name, r] of Object.entries(results)) {
    const ratio = (x, b) => (x / b).toFixed(2);
    console.log(
      `| ${name} | ${Math.round(r.seq)} (${ratio(r.seq, base.seq)}x) | ${Math.round(r.par)} (${ratio(r.par, base.par)}x) | ` +
        `${r.cpu.toFixed(1)} us (${r.cpu >= base.cpu ? '+' : ''}${(r.cpu - base.cpu).toFixed(1)}) |`,
    );
  }
  const keys = await redis.keys(`${prefix}*`);
  for (let i = 0; i < keys.length; i += 500) await redis.del(...keys.slice(i, i + 500));
  redis.disconnect();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
