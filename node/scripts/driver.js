#!/usr/bin/env node
'use strict';
// The Node driver of docs/driver.md: the package's public API behind JSON
// lines on stdin and stdout, for the shared conformance, audit and fault
// harnesses. SLIDELIMIT_IMPL (native or wasm) picks the core the package
// loads; drivers/node and drivers/wasm set it. The driver decides nothing:
// what it prints is what the package returned.

const fs = require('node:fs');
const readline = require('node:readline');
const Redis = require('ioredis');
const slidelimit = require('..');

const BINDING = slidelimit.implementation === 'native' ? 'node' : 'wasm';

// A request the driver cannot read; answered with {"error":"protocol"}.
class ProtocolError extends Error {}

const TYPES = {
  string: (v) => typeof v === 'string',
  number: (v) => typeof v === 'number',
  array: Array.isArray,
  boolean: (v) => typeof v === 'boolean',
  object: (v) => typeof v === 'object' && !Array.isArray(v),
};

// The field's value, or undefined when absent (null counts as absent: it is
// what a harness writes for "no value").
function field(req, name, type, required = false) {
  const v = req[name];
  if (v === undefined || v === null) {
    if (required) throw new ProtocolError(`${req.op}: ${name} is required`);
    return undefined;
  }
  if (!TYPES[type](v)) throw new ProtocolError(`${req.op}: ${name} must be a JSON ${type}`);
  // JSON's -0 is the integer 0, as the other drivers read it (docs/driver.md).
  return Object.is(v, -0) ? 0 : v;
}

// Integers as plain digits. Every decision field is one from 0 to 2^53 (core's
// bound, which a double holds exactly; a retry of exactly 2^53 is possible, so
// not Number.isSafeInteger, which stops at 2^53 - 1).
const MAX_FIELD = 2 ** 53;
function digits(name, n) {
  if (!(Number.isInteger(n) && n >= 0 && n <= MAX_FIELD)) {
    throw new Error(`the package returned ${name} = ${n}, not an integer from 0 to 2^53`);
  }
  return String(n);
}

function decisionLine(d) {
  const deniedBy = d.deniedBy === null ? '' : `,"denied_by":${digits('deniedBy', d.deniedBy)}`;
  return (
    `{"allowed":${d.allowed === true},"remaining":${digits('remaining', d.remaining)},` +
    `"retry_after_ms":${digits('retryAfterMs', d.retryAfterMs)},` +
    `"reset_after_ms":${digits('resetAfterMs', d.resetAfterMs)},"now_ms":${digits('nowMs', d.nowMs)}${deniedBy}}`
  );
}

function errorLine(e) {
  return JSON.stringify({ error: e.code, field: e.field === undefined ? null : e.field, message: e.message });
}

const OK = '{"ok":true}';

// The client options the request asks for: TLS trusting only the given CA
// (Node verifies the server's name against the host by default).
function tlsOptions(url, caFile) {
  const secure = url.startsWith('rediss://');
  if (caFile === undefined) return secure ? { tls: {} } : {};
  return { tls: { ca: fs.readFileSync(caFile) } };
}

// Errors reach the callers through the limiter; without a listener ioredis
// would also print each reconnect failure.
function quiet(client) {
  client.on('error', () => {});
  return client;
}

function openStore(req) {
  const kind = field(req, 'kind', 'string', true);
  const timeoutMs = field(req, 'timeout_ms', 'number');
  const caFile = field(req, 'tls_ca_file', 'string');
  const limiterOptions = timeoutMs === undefined ? undefined : { timeoutMs };
  if (kind === 'memory') return { engine: new slidelimit.MemoryEngine() };
  if (kind === 'redis') {
    const url = field(req, 'url', 'string', true);
    return { redis: quiet(new Redis(url, tlsOptions(url, caFile))), limiterOptions };
  }
  if (kind === 'cluster') {
    const urls = field(req, 'urls', 'array', true);
    if (urls.length === 0 || !urls.every((u) => typeof u === 'string')) {
      throw new ProtocolError('store: urls must be a non-empty list of strings');
    }
    // Nodes found through the slot map get only redisOptions: the seed URL's
    // user and password (ACL) and TLS go there.
    const seed = new URL(urls[0]);
    const redisOptions = tlsOptions(urls[0], caFile);
    if (seed.username) redisOptions.username = decodeURIComponent(seed.username);
    if (seed.password) redisOptions.password = decodeURIComponent(seed.password);
    return { redis: quiet(new Redis.Cluster(urls, { redisOptions })), limiterOptions };
  }
  throw new ProtocolError(`store: kind must be memory, redis or cluster, got ${JSON.stringify(kind)}`);
}

function closeStore(store) {
  if (store && store.redis) store.redis.disconnect();
}

// Absent fields take the package's defaults, as a user leaving them out would.
function present(fields) {
  for (const name of Object.keys(fields)) if (fields[name] === undefined) delete fields[name];
  return fields;
}

// The fields each op takes (docs/driver.md); any other is refused, so that a
// misspelt field is no silent default.
const KNOWN_FIELDS = {
  hello: [],
  store: ['kind', 'url', 'urls', 'timeout_ms', 'tls_ca_file'],
  policy: ['namespace', 'resource', 'algorithm', 'limit', 'window_ms', 'buckets', 'limits', 'deny_cache'],
  acquire: ['tenant', 'cost'],
  acquire_at: ['tenant', 'cost', 'now_ms'],
  peek: ['tenant', 'cost', 'now_ms'],
  reset: ['tenant'],
  key: ['tenant'],
  load: ['lang', 'tenant', 'tenants', 'cost', 'concurrency', 'start_at_ms', 'end_at_ms', 'active', 'ramp_ms', 'jitter_ms', 'skew_ms', 'out'],
};

function onlyKnown(req, where, known) {
  for (const name of Object.keys(req)) {
    if (!known.includes(name)) throw new ProtocolError(`${where}: unknown field ${JSON.stringify(name)}`);
  }
}

// One limit of `limits`, each field as in the single form.
function limitOf(entry, i) {
  if (!TYPES.object(entry) || entry === null) throw new ProtocolError(`policy: limits[${i}] must be a JSON object`);
  onlyKnown(entry, `policy: limits[${i}]`, SINGLE_FIELDS);
  const at = { ...entry, op: `policy: limits[${i}]` };
  return present({
    algorithm: field(at, 'algorithm', 'string'),
    limit: field(at, 'limit', 'number'),
    windowMs: field(at, 'window_ms', 'number'),
    buckets: field(at, 'buckets', 'number'),
  });
}

const SINGLE_FIELDS = ['algorithm', 'limit', 'window_ms', 'buckets'];

function buildLimiter(store, req) {
  const limits = field(req, 'limits', 'array');
  const denyCache = field(req, 'deny_cache', 'boolean') === true;
  const policy = present({
    namespace: field(req, 'namespace', 'string'),
    resource: field(req, 'resource', 'string'),
  });
  if (limits !== undefined) {
    const both = SINGLE_FIELDS.filter((name) => req[name] !== undefined && req[name] !== null);
    if (both.length !== 0) throw new ProtocolError(`policy: limits and ${both.join(', ')} are exclusive`);
    policy.limits = limits.map(limitOf);
  } else {
    Object.assign(
      policy,
      present({
        algorithm: field(req, 'algorithm', 'string'),
        limit: field(req, 'limit', 'number'),
        windowMs: field(req, 'window_ms', 'number'),
        buckets: field(req, 'buckets', 'number'),
      }),
    );
  }
  // The memory store has no deny cache; on Redis it is off unless asked for.
  if (store.engine) return new slidelimit.MemoryLimiter(policy, { engine: store.engine });
  return new slidelimit.Limiter(store.redis, policy, { ...store.limiterOptions, denyCache });
}

const sleep = (ms) => new Promise((resolve) => (ms > 0 ? setTimeout(resolve, ms) : setImmediate(resolve)));

// The largest caller-clock skew a load takes (docs/driver.md): an hour.
const MAX_SKEW_MS = 3_600_000;
// The most tenants one load goes round (docs/driver.md).
const MAX_LOAD_TENANTS = 1_000;

// A load's tenant, or its tenants to go round.
function loadTenants(req) {
  const tenants = field(req, 'tenants', 'array');
  if (tenants === undefined) return [field(req, 'tenant', 'string', true)];
  if (req.tenant !== undefined && req.tenant !== null) {
    throw new ProtocolError('load: tenant and tenants are exclusive');
  }
  if (tenants.length < 1 || tenants.length > MAX_LOAD_TENANTS || !tenants.every((t) => typeof t === 'string')) {
    throw new ProtocolError(`load: tenants must be a list of 1 to ${MAX_LOAD_TENANTS} strings`);
  }
  return tenants;
}

function checkLoad(req) {
  const load = {
    lang: field(req, 'lang', 'string', true),
    tenants: loadTenants(req),
    cost: field(req, 'cost', 'number'),
    concurrency: field(req, 'concurrency', 'number', true),
    startAt: field(req, 'start_at_ms', 'number', true),
    endAt: field(req, 'end_at_ms', 'number', true),
    active: field(req, 'active', 'array'),
    rampMs: field(req, 'ramp_ms', 'number') || 0,
    jitterMs: field(req, 'jitter_ms', 'number') || 0,
    skewMs: field(req, 'skew_ms', 'number'),
    out: field(req, 'out', 'string', true),
  };
  if (!Number.isSafeInteger(load.concurrency) || load.concurrency < 1) {
    throw new ProtocolError('load: concurrency must be a positive integer');
  }
  if (load.skewMs !== undefined && !(Number.isSafeInteger(load.skewMs) && Math.abs(load.skewMs) <= MAX_SKEW_MS)) {
    throw new ProtocolError(`load: skew_ms must be an integer within ±${MAX_SKEW_MS}`);
  }
  const pair = (p) => Array.isArray(p) && p.length === 2 && p.every((t) => typeof t === 'number');
  if (load.active !== undefined && !load.active.every(pair)) {
    throw new ProtocolError('load: active must be a list of [from, to] pairs of numbers');
  }
  return load;
}

// How long a caller waits at `now` before it may call: 0 inside an active
// interval, else until the next one starts (or the run ends).
function idleMs(load, now) {
  if (load.active === undefined) return 0;
  let next = load.endAt;
  for (const [from, to] of load.active) {
    if (from <= now && now < to) return 0;
    if (from > now && from < next) next = from;
  }
  return next - now;
}

async function runLoad(limiter, load) {
  const options = load.cost === undefined ? undefined : { cost: load.cost };
  const lines = [];
  let errors = 0;
  // Each tenant with the head of its calls' lines ({"lang":..., and
  // ,"tenant":... when there are several). Caller i's j-th call (from 0) is
  // for rounds[(i + j) % length].
  const lang = `{"lang":${JSON.stringify(load.lang)}`;
  const several = load.tenants.length > 1;
  const rounds = load.tenants.map((tenant) => ({
    tenant,
    head: several ? `${lang},"tenant":${JSON.stringify(tenant)}` : lang,
  }));
  async function caller(_, index) {
    let turn = index;
    const first = load.startAt + Math.floor(Math.random() * (load.rampMs + 1));
    await sleep(Math.min(first, load.endAt) - Date.now());
    for (let now = Date.now(); now < load.endAt; now = Date.now()) {
      const idle = idleMs(load, now);
      if (idle > 0) {
        await sleep(idle);
        continue;
      }
      const { tenant, head } = rounds[turn % rounds.length];
      turn += 1;
      try {
        // With skew_ms: caller time, the wall clock plus the skew; else server time.
        const at = load.skewMs === undefined ? options : { ...options, nowMs: Date.now() + load.skewMs };
        const d = await limiter.acquire(tenant, at);
        lines.push(
          `${head},"allowed":${d.allowed === true},"now_ms":${digits('nowMs', d.nowMs)},` +
            `"retry_after_ms":${digits('retryAfterMs', d.retryAfterMs)},` +
            `"reset_after_ms":${digits('resetAfterMs', d.resetAfterMs)}}`,
        );
      } catch (e) {
        errors += 1;
        const code = e instanceof slidelimit.SlidelimitError ? e.code : 'internal';
        const message = JSON.stringify(String(e?.message));
        lines.push(`${head},"error":${JSON.stringify(code)},"message":${message}}`);
      }
      // Yield even without jitter, so that a memory store's calls (settled
      // without I/O) do not starve the other callers' timers.
      await sleep(Math.floor(Math.random() * (load.jitterMs + 1)));
    }
  }
  await Promise.all(Array.from({ length: load.concurrency }, caller));
  fs.writeFileSync(load.out, lines.length ? `${lines.join('\n')}\n` : '');
  return `{"ok":true,"calls":${lines.length},"errors":${errors}}`;
}

class Driver {
  #store = null;
  #limiter = null;
  #policyError = null; // the reply of a refused policy, repeated by every op needing one

  close() {
    closeStore(this.#store);
    this.#store = null;
    this.#limiter = null;
  }

  #needLimiter() {
    if (this.#policyError !== null) return this.#policyError;
    if (this.#limiter === null) throw new ProtocolError('no policy: send a policy first');
    return null;
  }

  async handle(req) {
    if (req === null || typeof req !== 'object' || Array.isArray(req)) {
      throw new ProtocolError('a request must be a JSON object');
    }
    const op = field(req, 'op', 'string', true);
    if (Object.hasOwn(KNOWN_FIELDS, op)) onlyKnown(req, op, ['op', ...KNOWN_FIELDS[op]]);
    switch (op) {
      case 'hello':
        return JSON.stringify({ ok: true, binding: BINDING, version: slidelimit.version });
      case 'store': {
        const store = openStore(req);
        this.close();
        this.#store = store;
        this.#policyError = null;
        return OK;
      }
      case 'policy': {
        if (this.#store === null) throw new ProtocolError('no store: send a store first');
        let limiter;
        try {
          limiter = buildLimiter(this.#store, req);
        } catch (e) {
          // A request the driver cannot read changes nothing (docs/driver.md).
          if (e instanceof ProtocolError) throw e;
          this.#limiter = null;
          this.#policyError = reply(e);
          return this.#policyError;
        }
        this.#limiter = limiter;
        this.#policyError = null;
        return OK;
      }
      case 'acquire':
      case 'acquire_at':
      case 'peek': {
        const tenant = field(req, 'tenant', 'string');
        const cost = field(req, 'cost', 'number');
        const nowMs = field(req, 'now_ms', 'number', op === 'acquire_at');
        if (op === 'acquire' && nowMs !== undefined) throw new ProtocolError('acquire: now_ms is acquire_at');
        const refused = this.#needLimiter();
        if (refused !== null) return refused;
        const options = {};
        if (cost !== undefined) options.cost = cost;
        if (nowMs !== undefined) options.nowMs = nowMs;
        const call = op === 'peek' ? this.#limiter.peek(tenant, options) : this.#limiter.acquire(tenant, options);
        return decisionLine(await call);
      }
      case 'reset': {
        const tenant = field(req, 'tenant', 'string');
        const refused = this.#needLimiter();
        if (refused !== null) return refused;
        await this.#limiter.reset(tenant);
        return OK;
      }
      case 'key': {
        const tenant = field(req, 'tenant', 'string');
        const refused = this.#needLimiter();
        if (refused !== null) return refused;
        const key = this.#limiter.key(tenant);
        return JSON.stringify({ ok: true, key, slot: slidelimit.slot(key) });
      }
      case 'load': {
        const load = checkLoad(req);
        const refused = this.#needLimiter();
        if (refused !== null) return refused;
        return runLoad(this.#limiter, load);
      }
      default:
        throw new ProtocolError(`unknown op ${JSON.stringify(op)}`);
    }
  }
}

// A slidelimit error as the package reported it; anything else is the
// driver's (or the package's) failure, which the harness counts as such.
function reply(e) {
  if (e instanceof slidelimit.SlidelimitError) return errorLine(e);
  const message = e instanceof ProtocolError ? e.message : `unexpected failure: ${e && e.stack ? e.stack : e}`;
  return JSON.stringify({ error: 'protocol', message });
}

async function main() {
  const driver = new Driver();
  const input = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of input) {
    if (line.trim() === '') continue;
    let out;
    let req;
    try {
      req = JSON.parse(line);
    } catch (e) {
      process.stdout.write(`${JSON.stringify({ error: 'protocol', message: `bad JSON: ${e.message}` })}\n`);
      continue;
    }
    if (req !== null && typeof req === 'object' && req.op === 'exit') {
      process.stdout.write(`${OK}\n`);
      break;
    }
    try {
      out = await driver.handle(req);
    } catch (e) {
      out = reply(e);
    }
    process.stdout.write(`${out}\n`);
  }
  driver.close();
  input.close();
  // Writes to a pipe or file are synchronous on Linux; exit without waiting
  // for ioredis's sockets to wind down.
  process.exit(0);
}

main().catch((e) => {
  process.stderr.write(`driver: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
