'use strict';
// prom-client metrics with the names every slidelimit binding shares: names,
// help texts, labels and buckets are core's.

const { metrics: spec } = require('./binding').constants;
const { invalid, isRecord, onlyKnown } = require('./errors');

/** Buckets of `ratelimit_wait_seconds`, 1 ms to 10 min (core's). */
const WAIT_BUCKETS = Object.freeze(spec.waitBuckets.slice());
const { resource: RESOURCE, tenant: TENANT } = spec.labels;
// Which labels each metric carries (core's lists).
const COUNTER_LABELS = Object.freeze(spec.labels.counter.slice());
const COUNTER_LABELS_WITH_TENANT = Object.freeze(spec.labels.counterWithTenant.slice());
const WAIT_LABELS = Object.freeze(spec.labels.wait.slice());

class Metrics {
  #tenantLabel;

  /**
   * Registers the four metrics in `registry` (prom-client's default registry
   * when omitted). Leave `tenantLabel` false when tenants are unbounded.
   */
  constructor(options = {}) {
    if (!isRecord(options)) throw invalid('options', 'must be an object');
    onlyKnown(options, ['registry', 'tenantLabel', 'client']);
    // `client`: the app's prom-client, so the metrics land in the registry it serves.
    const { registry, tenantLabel = false, client } = options;
    if (typeof tenantLabel !== 'boolean') throw invalid('tenant_label', `must be true or false, got ${typeof tenantLabel}`);
    if (registry !== undefined && !(registry && typeof registry.registerMetric === 'function')) {
      throw invalid('registry', 'must be a prom-client Registry');
    }
    const prom = client === undefined ? require('prom-client') : client;
    if (!(prom && typeof prom.Counter === 'function' && typeof prom.Histogram === 'function')) {
      throw invalid('client', "must be the prom-client module (require('prom-client'))");
    }
    const registers = [registry || prom.register];
    const labelNames = (tenantLabel ? COUNTER_LABELS_WITH_TENANT : COUNTER_LABELS).slice();
    this.#tenantLabel = tenantLabel;
    this.allowed = new prom.Counter({ ...spec.allowedTotal, labelNames, registers });
    this.denied = new prom.Counter({ ...spec.deniedTotal, labelNames, registers });
    this.localDenied = new prom.Counter({ ...spec.localDeniedTotal, labelNames, registers });
    this.wait = new prom.Histogram({
      ...spec.waitSeconds,
      labelNames: WAIT_LABELS.slice(),
      buckets: WAIT_BUCKETS.slice(),
      registers,
    });
  }

  /**
   * Records one acquire's decision (limiters call this themselves). `local`:
   * the deny cache denied it in-process; it counts as a denial too.
   */
  observe(resource, tenant, decision, local = false) {
    const labels = this.#tenantLabel ? { [RESOURCE]: resource, [TENANT]: tenant } : { [RESOURCE]: resource };
    if (decision.allowed) {
      this.allowed.inc(labels);
    } else {
      this.denied.inc(labels);
      if (local) this.localDenied.inc(labels);
      this.wait.observe({ [RESOURCE]: resource }, decision.retryAfterMs / 1000);
    }
  }
}

module.exports = { Metrics, WAIT_BUCKETS };
