// Every value the .d.ts files declare (class, const, function) is importable
// by name from ESM and from CommonJS: type-checking alone passes when the ESM
// loader cannot see a CommonJS export, and the program then fails at run time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

function declaredValues(dts) {
  const text = readFileSync(new URL(`../${dts}`, import.meta.url), 'utf8');
  const names = [...text.matchAll(/^export (?:declare )?(?:class|const|function) (\w+)/gm)].map((m) => m[1]);
  assert.ok(names.length > 0, `${dts} declares no value`);
  return names;
}

for (const [specifier, dts] of [
  ['slidelimit', 'index.d.ts'],
  ['slidelimit/bullmq', 'bullmq.d.ts'],
]) {
  test(`${specifier}: every declared value is a named ESM export and a CommonJS property`, async () => {
    const esm = await import(specifier);
    const cjs = require(specifier);
    for (const name of declaredValues(dts)) {
      assert.ok(Object.hasOwn(esm, name), `import { ${name} } from '${specifier}' fails`);
      assert.notEqual(esm[name], undefined, `${name} is undefined in ESM`);
      assert.equal(esm[name], cjs[name], `${name} differs between ESM and CommonJS`);
    }
  });
}
