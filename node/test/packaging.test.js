'use strict';
// Installs the package the way a user does (npm pack, then npm install of the
// tarball in a fresh project) and loads it: native addon first, the wasm
// build when forced, when the addon is missing and when it is broken.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { addonFile } = require('../lib/platform');

const pkgDir = path.join(__dirname, '..');
let project;

function npm(args, cwd) {
  return execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, encoding: 'utf8' });
}

// What a user's script sees, as JSON.
const probe = `
  const s = require('slidelimit');
  const l = s.Limiter.memory({ resource: 'geocode', limit: 2, windowMs: 1000 });
  l.acquire('t', { nowMs: 5000 }).then((d) => console.log(JSON.stringify({
    implementation: s.implementation,
    nativeLoadError: s.nativeLoadError ? s.nativeLoadError.message : null,
    key: l.key('a}b'),
    decision: d,
    bullmq: require.resolve('slidelimit/bullmq').endsWith('lib/bullmq.js'),
  })));
`;

function run(env = {}) {
  const out = execFileSync(process.execPath, ['-e', probe], {
    cwd: project,
    encoding: 'utf8',
    env: { ...process.env, SLIDELIMIT_IMPL: '', ...env },
  });
  return JSON.parse(out);
}

test.before(() => {
  project = fs.mkdtempSync(path.join(os.tmpdir(), 'slidelimit-pack-'));
  const [tarball] = JSON.parse(npm(['pack', '--json', '--pack-destination', project], pkgDir));
  const files = tarball.files.map((f) => f.path);
  assert.ok(files.includes(`dist/${addonFile()}`), 'the addon is packed');
  assert.ok(files.includes('dist/wasm/slidelimit_wasm_bg.wasm'), 'the wasm build is packed');
  assert.ok(!files.some((f) => f.startsWith('native/') || f.startsWith('test/')), 'no sources or tests packed');
  fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'user-app', private: true }));
  // ioredis, bullmq and prom-client are optional peers the app brings; the
  // probe needs none of them, so the install needs nothing but the tarball.
  npm(['install', path.join(project, tarball.filename)], project);
});

test.after(() => fs.rmSync(project, { recursive: true, force: true }));

const expected = {
  key: 'rl:{geocode:a%7Db}:log:1000',
  decision: { allowed: true, remaining: 1, retryAfterMs: 0, resetAfterMs: 1000, nowMs: 5000 },
  bullmq: true,
};

test('the installed package loads the native addon', () => {
  assert.deepEqual(run(), { implementation: 'native', nativeLoadError: null, ...expected });
});

test('SLIDELIMIT_IMPL=wasm loads the wasm build', () => {
  assert.deepEqual(run({ SLIDELIMIT_IMPL: 'wasm' }), { implementation: 'wasm', nativeLoadError: null, ...expected });
});

test('ES module users get the same package', () => {
  const out = execFileSync(
    process.execPath,
    ['--input-type=module', '-e', "import s from 'slidelimit'; import { Limiter } from 'slidelimit'; console.log(s.implementation, typeof Limiter)"],
    { cwd: project, encoding: 'utf8' },
  );
  assert.equal(out.trim(), 'native function');
});

// Section names of an ELF (64-bit, little-endian) shared object.
function elfSections(buf) {
  const shoff = Number(buf.readBigUInt64LE(0x28));
  const shentsize = buf.readUInt16LE(0x3a);
  const shnum = buf.readUInt16LE(0x3c);
  const strtab = shoff + buf.readUInt16LE(0x3e) * shentsize;
  const names = Number(buf.readBigUInt64LE(strtab + 0x18)); // sh_offset of the name table
  const out = [];
  for (let i = 0; i < shnum; i++) {
    const start = names + buf.readUInt32LE(shoff + i * shentsize);
    out.push(buf.toString('latin1', start, buf.indexOf(0, start)));
  }
  return out;
}

test('the shipped addon is stripped (no debug info, no local symbol table)', () => {
  const addon = fs.readFileSync(path.join(project, 'node_modules', 'slidelimit', 'dist', addonFile()));
  if (addon.toString('latin1', 1, 4) === 'ELF') {
    const sections = elfSections(addon);
    assert.ok(sections.includes('.dynsym'), `an ELF with sections ${sections.join(' ')}`);
    assert.deepEqual(sections.filter((s) => s.startsWith('.debug') || s === '.symtab'), []);
  } else {
    // Other formats: the unstripped build was 7.5 MB, the stripped one 0.7.
    assert.ok(addon.length < 2e6, `addon of ${addon.length} bytes`);
  }
});

test('a broken addon falls back to wasm', () => {
  const addon = path.join(project, 'node_modules', 'slidelimit', 'dist', addonFile());
  fs.writeFileSync(addon, 'not a shared object');
  const seen = run();
  assert.equal(seen.implementation, 'wasm');
  assert.ok(seen.nativeLoadError, 'the native error is kept');
  assert.deepEqual({ ...seen, implementation: undefined, nativeLoadError: undefined }, { ...expected, implementation: undefined, nativeLoadError: undefined });
});

test('a missing addon falls back to wasm', () => {
  fs.rmSync(path.join(project, 'node_modules', 'slidelimit', 'dist', addonFile()));
  const seen = run();
  assert.equal(seen.implementation, 'wasm');
  assert.match(seen.nativeLoadError, /Cannot find module/);
  assert.throws(() => run({ SLIDELIMIT_IMPL: 'native' }), /Cannot find module/);
});
