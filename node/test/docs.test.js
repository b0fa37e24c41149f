'use strict';
// The ```js blocks of docs/node.md and README.md, run against a real Redis so
// that the docs cannot drift from the API. A doc's blocks run in order as one
// program (a later block uses what an earlier one made, as a reader would),
// with the few names the prose leaves to the reader supplied below, and a
// check afterwards that they did what the text says. The docs' Redis URL is
// replaced by the test server's.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { url, root } = require('./helpers');

const DOC_URL = 'redis://127.0.0.1:6379/';

function jsBlocks(doc) {
  const text = fs.readFileSync(path.join(root, doc), 'utf8');
  return [...text.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

// What each doc leaves to the reader (before its blocks) and what its blocks
// must have done (after). A doc with js blocks and no entry here fails.
const CONTEXT = {
  'docs/node.md': {
    before: `
      const provided = [];
      const callProvider = async (data) => { provided.push(data); return 'ok'; };
      const connection = new (require('ioredis'))(TEST_URL, { maxRetriesPerRequest: null });
      const registry = new (require('prom-client').Registry)();
      const policy = { resource: 'doc-metrics', limit: 1, windowMs: 1000 };
    `,
    after: `
      assert.deepEqual(Object.keys(d), ['allowed', 'remaining', 'retryAfterMs', 'resetAfterMs', 'nowMs', 'deniedBy']);
      assert.deepEqual([d.allowed, d.remaining, d.retryAfterMs, d.resetAfterMs], [true, 599, 0, 60000]);
      // The BullMQ worker of the docs runs a job of the 'geocode' queue with a permit.
      const { Queue } = require('bullmq');
      const queue = new Queue('geocode', { connection: new (require('ioredis'))(TEST_URL, { maxRetriesPerRequest: 1 }) });
      await queue.add('lookup', { apiKey: 'api-key-17', address: 'Main St 1' });
      for (let i = 0; i < 500 && provided.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
      assert.deepEqual(provided, [{ apiKey: 'api-key-17', address: 'Main St 1' }]);
      // The snippet's acquire and the job spent 2 of 600; a peek answers as an acquire would.
      assert.equal((await geocode.peek('api-key-17')).remaining, 597, 'the job spent a permit of its tenant');
      await geocode.reset('api-key-17');
      const text = await registry.metrics();
      for (const name of ['ratelimit_allowed_total', 'ratelimit_denied_total', 'ratelimit_wait_seconds']) {
        assert.match(text, new RegExp('# HELP ' + name + ' '));
      }
    `,
  },
};

for (const doc of ['docs/node.md', 'README.md']) {
  const blocks = jsBlocks(doc);
  test(`the js blocks of ${doc} run (${blocks.length})`, { timeout: 60_000 }, () => {
    if (doc === 'docs/node.md') assert.ok(blocks.length >= 3, 'the Node guide has its three examples');
    if (blocks.length === 0) return;
    const ctx = CONTEXT[doc];
    assert.ok(ctx, `${doc} has js blocks: say in CONTEXT what they need and do`);
    const code = blocks.join('\n');
    assert.ok(!code.includes('redis://') || code.includes(DOC_URL), `${doc}: Redis URLs are ${DOC_URL}`);
    const program = [
      "const assert = require('node:assert/strict');",
      `const TEST_URL = ${JSON.stringify(url)};`,
      '(async () => {',
      ctx.before,
      code.split(DOC_URL).join(url),
      ctx.after,
      '})().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });',
    ].join('\n');
    // Run from the package directory, where require('slidelimit') is the package itself.
    execFileSync(process.execPath, ['-e', program], {
      cwd: path.join(__dirname, '..'),
      stdio: ['ignore', 'inherit', 'inherit'],
      timeout: 50_000,
    });
  });
}
