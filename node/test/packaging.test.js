'use strict';
// Installs the packages the way a user does (node/scripts/pack-npm.js packs
// them as `make dist-npm` does; npm install of the tarballs in a fresh
// project) and loads them: the host's platform package first, the
// @slidelimit/wasm package when forced, when the platform package is missing,
// broken or of another version. (make test-install-npm does the same outside
// the repo without cargo on PATH, against Redis.)

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { addonFile, platformTag } = require('../lib/platform');

const pkgDir = path.join(__dirname, '..');
const { version } = require('../package.json');
const host = platformTag();
let project;
let platformDir;

function npm(args, cwd) {
  return execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, encoding: 'utf8' });
}

const tarContents = (tgz) => execFileSync('tar', ['-tzf', tgz], { encoding: 'utf8' }).split('\n').filter(Boolean);
const tarJson = (tgz, file) => JSON.parse(execFileSync('tar', ['-xOzf', tgz, `package/${file}`], { encoding: 'utf8' }));

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
    stdio: ['ignore', 'pipe', 'pipe'], // stderr kept on the error, not printed
    env: { ...process.env, SLIDELIMIT_IMPL: '', ...env },
  });
  return JSON.parse(out);
}

const tgz = {};

test.before(() => {
  project = fs.mkdtempSync(path.join(os.tmpdir(), 'slidelimit-pack-'));
  const out = path.join(project, 'tgz');
  execFileSync(process.execPath, [path.join(pkgDir, 'scripts', 'pack-npm.js'), out, '--platforms=host'], { encoding: 'utf8' });
  tgz.main = path.join(out, `slidelimit-${version}.tgz`);
  tgz.platform = path.join(out, `slidelimit-${host}-${version}.tgz`);
  tgz.wasm = path.join(out, `slidelimit-wasm-${version}.tgz`);
  fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'user-app', private: true }));
  // ioredis, bullmq and prom-client are optional peers the app brings; the
  // probe needs none of them. --offline: the other platforms' optional
  // packages are not published, and npm skips them without asking.
  npm(['install', '--offline', tgz.main, tgz.platform, tgz.wasm], project);
  platformDir = path.join(project, 'node_modules', '@slidelimit', host);
});

test.after(() => fs.rmSync(project, { recursive: true, force: true }));

const expected = {
  key: 'rl:{geocode:a%7Db}:log:1000',
  decision: { allowed: true, remaining: 1, retryAfterMs: 0, resetAfterMs: 1000, nowMs: 5000, deniedBy: null },
  bullmq: true,
};

test('the tarballs hold what each package needs and nothing more', () => {
  const main = tarContents(tgz.main);
  assert.ok(main.includes('package/index.js') && main.includes('package/lib/binding.js'), main.join(' '));
  assert.ok(!main.some((f) => /^package\/(dist|native|test|npm|scripts)\//.test(f)), `no binaries, sources or tests: ${main.join(' ')}`);
  const pkg = tarJson(tgz.main, 'package.json');
  assert.deepEqual(pkg.dependencies, { '@slidelimit/wasm': version });
  assert.deepEqual(pkg.optionalDependencies, { '@slidelimit/linux-arm64-gnu': version, '@slidelimit/linux-x64-gnu': version });
  assert.equal(pkg.devDependencies, undefined);

  assert.deepEqual(tarContents(tgz.platform).sort(), ['package/package.json', `package/${addonFile()}`].sort());
  const plat = tarJson(tgz.platform, 'package.json');
  assert.equal(plat.name, `@slidelimit/${host}`);
  assert.equal(plat.main, addonFile());
  assert.deepEqual([plat.os, plat.cpu], [[process.platform], [process.arch]]);
  if (host.endsWith('-gnu')) assert.deepEqual(plat.libc, ['glibc']);

  assert.deepEqual(tarContents(tgz.wasm).sort(), [
    'package/package.json',
    'package/slidelimit_wasm.d.ts',
    'package/slidelimit_wasm.js',
    'package/slidelimit_wasm_bg.wasm',
  ]);
});

test('the installed package loads the native addon from its platform package', () => {
  assert.ok(!fs.existsSync(path.join(project, 'node_modules', 'slidelimit', 'dist')));
  assert.deepEqual(run(), { implementation: 'native', nativeLoadError: null, ...expected });
});

test('SLIDELIMIT_IMPL=wasm loads the wasm package', () => {
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
  const addon = fs.readFileSync(path.join(platformDir, addonFile()));
  if (addon.toString('latin1', 1, 4) === 'ELF') {
    const sections = elfSections(addon);
    assert.ok(sections.includes('.dynsym'), `an ELF with sections ${sections.join(' ')}`);
    assert.deepEqual(sections.filter((s) => s.startsWith('.debug') || s === '.symtab'), []);
  } else {
    // Other formats: the unstripped build was 7.5 MB, the stripped one 0.7.
    assert.ok(addon.length < 2e6, `addon of ${addon.length} bytes`);
  }
});

const withoutImpl = (seen) => ({ ...seen, implementation: undefined, nativeLoadError: undefined });

test('a platform package of another version falls back to wasm', () => {
  const file = path.join(platformDir, 'package.json');
  const original = fs.readFileSync(file, 'utf8');
  fs.writeFileSync(file, JSON.stringify({ ...JSON.parse(original), version: '0.0.1' }));
  try {
    const seen = run();
    assert.equal(seen.implementation, 'wasm');
    assert.match(seen.nativeLoadError, new RegExp(`@slidelimit/${host} is version 0\\.0\\.1, slidelimit is ${version}`));
    assert.deepEqual(withoutImpl(seen), withoutImpl(expected));
  } finally {
    fs.writeFileSync(file, original);
  }
});

test('a broken addon falls back to wasm', () => {
  fs.writeFileSync(path.join(platformDir, addonFile()), 'not a shared object');
  const seen = run();
  assert.equal(seen.implementation, 'wasm');
  assert.match(seen.nativeLoadError, new RegExp(`@slidelimit/${host}: `));
  assert.doesNotMatch(seen.nativeLoadError, /not installed/);
  assert.deepEqual(withoutImpl(seen), withoutImpl(expected));
});

test('a missing platform package falls back to wasm; forcing native names what it tried', () => {
  fs.rmSync(platformDir, { recursive: true });
  const seen = run();
  assert.equal(seen.implementation, 'wasm');
  assert.match(seen.nativeLoadError, new RegExp(`@slidelimit/${host}: not installed`));
  // An installed package has no dist/ to try: only the platform package is named.
  assert.doesNotMatch(seen.nativeLoadError, /dist/);
  assert.deepEqual(withoutImpl(seen), withoutImpl(expected));
  assert.throws(() => run({ SLIDELIMIT_IMPL: 'native' }), new RegExp(`no native build of slidelimit loaded; tried:\\n  @slidelimit/${host}: not installed`));
});

test('with neither package, the error names every candidate', () => {
  fs.rmSync(path.join(project, 'node_modules', '@slidelimit', 'wasm'), { recursive: true });
  assert.throws(
    () => run(),
    (e) => {
      assert.match(String(e.stderr), new RegExp(`slidelimit could not load for ${host}`));
      assert.match(String(e.stderr), new RegExp(`@slidelimit/${host}: not installed`));
      assert.match(String(e.stderr), /@slidelimit\/wasm: not installed/);
      return true;
    },
  );
});
