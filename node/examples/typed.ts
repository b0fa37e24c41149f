// Type-checked by `tsc -p tsconfig.json` (make test-node): the package's
// .d.ts files as a TypeScript user sees them. Not run.
import Redis, { Cluster } from 'ioredis';
import { Queue, Worker } from 'bullmq';
import { Registry } from 'prom-client';
import {
  Limiter,
  MemoryLimiter,
  Metrics,
  SlidelimitError,
  UnavailableError,
  implementation,
  type Decision,
  type ErrorCode,
  type RateLimiter,
} from 'slidelimit';
import { rateLimited, DeferralLimitError, OutageLimitError } from 'slidelimit/bullmq';

const policy = { resource: 'geocode', limit: 600, windowMs: 60_000 } as const;

async function main(): Promise<void> {
  const redis = new Redis('redis://127.0.0.1:6379/');
  const metrics = new Metrics({ registry: new Registry(), tenantLabel: false });
  const limiter: RateLimiter = new Limiter(redis, policy, { timeoutMs: 500, metrics });
  const cluster = new Limiter(new Cluster([{ host: '127.0.0.1', port: 7000 }]), { ...policy, algorithm: 'sliding_counter' });
  const memory: MemoryLimiter = Limiter.memory(policy);
  const bucketed = Limiter.memory({ ...policy, algorithm: 'bucketed_window', buckets: 600 });
  const buckets: number | undefined = bucketed.policy.buckets;
  const twoLimits = new Limiter(
    redis,
    {
      resource: 'geocode',
      limits: [
        { limit: 20, windowMs: 1000 },
        { algorithm: 'bucketed_window', limit: 600, windowMs: 60_000 },
      ],
    },
    { denyCache: { capacity: 50_000 } },
  );
  const perMinute: number = twoLimits.policy.limits[1].limit;
  const denied = await twoLimits.acquire('tenant-17');
  const which2: number | null = denied.deniedBy;
  new Limiter(redis, policy, { denyCache: false });
  console.log(perMinute, which2);

  const d: Decision = await limiter.acquire('tenant-17', { cost: 2 });
  const wait: number = d.allowed ? 0 : d.retryAfterMs;
  const peeked = await cluster.peek('tenant-17', { nowMs: Date.now() });
  const forgotten: boolean = await memory.reset('tenant-17');
  const which: 'native' | 'wasm' = implementation;
  console.log(wait, peeked.remaining, forgotten, which, limiter.key('t'), limiter.policy.windowMs, buckets);

  try {
    await limiter.acquire('tenant-17');
  } catch (e) {
    if (e instanceof UnavailableError) {
      const code: 'unavailable' = e.code;
      console.log(code);
    } else if (e instanceof SlidelimitError) {
      const code: ErrorCode = e.code;
      console.log(code, e.field);
    }
  }

  // @ts-expect-error cost is a number
  await limiter.acquire('t', { cost: '1' });
  // @ts-expect-error timeoutMs is a number of milliseconds
  new Limiter(redis, policy, { timeoutMs: '500' });
  // @ts-expect-error algorithm is one of three names
  new Limiter(redis, { ...policy, algorithm: 'fixed_window' });
  // @ts-expect-error limits replaces limit, windowMs and the rest
  new Limiter(redis, { ...policy, limits: [{ limit: 1, windowMs: 1000 }] });
  // @ts-expect-error the policy's limits are read-only
  twoLimits.policy.limits[0].limit = 5;
  // @ts-expect-error denyCache is a boolean or { capacity }
  new Limiter(redis, policy, { denyCache: 'on' });
  // @ts-expect-error buckets is a number
  new Limiter(redis, { ...policy, algorithm: 'bucketed_window', buckets: '60' });

  interface GeocodeJob {
    apiKey: string;
    address: string;
  }
  const queue = new Queue<GeocodeJob>('geocode', { connection: redis });
  await queue.add('lookup', { apiKey: 'k1', address: 'Main St 1' });
  const worker = new Worker<GeocodeJob>(
    'geocode',
    rateLimited<GeocodeJob, string>(
      limiter,
      async (job, _token, decision) => `${job.data.address} ${decision ? decision.remaining : 'fail-open'}`,
      { tenant: (job) => job.data.apiKey, maxDeferrals: 50, onUnavailable: 'delay', maxOutageDeferrals: Infinity },
    ),
    { connection: redis },
  );
  worker.on('failed', (_job, err) => {
    if (err instanceof DeferralLimitError) console.log(err.deferrals);
    if (err instanceof OutageLimitError) console.log(err.outageDeferrals, err.cause?.message);
  });
}

void main;
