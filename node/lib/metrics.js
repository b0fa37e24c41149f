'use strict';
// prom-client metrics with the names every slidelimit binding shares.

/** Buckets of `ratelimit_wait_seconds`, 1 ms to 10 min (the Rust binding's). */
const WAIT_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 600];

class Metrics {
  #tenantLabel;

  /**
   * Registers the three metrics in `registry` (prom-client's default registry
   * when omitted). Leave `tenantLabel` false when tenants are unbounded.
   */
  constructor({ registry, tenantLabel = false, client } = {}) {
    // The app's prom-client, so the metrics land in the registry it serves.
    const prom = client || require('prom-client');
    const registers = [registry || prom.register];
    const labelNames = tenantLabel ? ['resource', 'tenant'] : ['resource'];
    this.#tenantLabel = tenantLabel;
    this.allowed = new prom.Counter({
      name: 'ratelimit_allowed_total',
      help: 'Permits admitted by the rate limiter.',
      labelNames,
      registers,
    });
    this.denied = new prom.Counter({
      name: 'ratelimit_denied_total',
      help: 'Acquires denied by the rate limiter.',
      labelNames,
      registers,
    });
    this.wait = new prom.Histogram({
      name: 'ratelimit_wait_seconds',
      help: 'retry_after handed to denied callers, in seconds.',
      labelNames: ['resource'],
      buckets: WAIT_BUCKETS,
      registers,
    });
  }

  /** Records one acquire's decision (limiters call this themselves). */
  observe(resource, tenant, decision) {
    const labels = this.#tenantLabel ? { resource, tenant } : { resource };
    if (decision.allowed) {
      this.allowed.inc(labels);
    } else {
      this.denied.inc(labels);
      this.wait.observe({ resource }, decision.retryAfterMs / 1000);
    }
  }
}

module.exports = { Metrics, WAIT_BUCKETS };
