#!/usr/bin/env node
'use strict';
// Packs the npm packages napi-rs style into OUT_DIR (npm pack tarballs):
//   slidelimit                    JS and types; optionalDependencies on every
//                                 platform package, a dependency on the wasm one
//   @slidelimit/<platform>        one addon each (node/npm/<platform>/package.json)
//   @slidelimit/wasm              the wasm-bindgen build (node/npm/wasm/package.json)
// The dependencies are written into the packed package.json only, as `napi
// prepublish` does: in node/package.json they would break `npm ci` (its lock
// cannot resolve packages that are not published).
//   node scripts/pack-npm.js OUT_DIR [--platforms=host|all|linux-x64-gnu,...]
// The addons and the wasm build come from node/dist (make node-build, and
// make node-addon-cross for the other architectures).
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { addonFile, platformTag } = require('../lib/platform');

const root = path.join(__dirname, '..');
const dist = path.join(root, 'dist');
const args = process.argv.slice(2);
const out = path.resolve(args.find((a) => !a.startsWith('--')) || path.join(root, '..', 'dist', 'npm'));
const platformsArg = (args.find((a) => a.startsWith('--platforms=')) || '--platforms=all').split('=')[1];

const main = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const readPkg = (dir) => JSON.parse(fs.readFileSync(path.join(root, 'npm', dir, 'package.json'), 'utf8'));
const allPlatforms = fs.readdirSync(path.join(root, 'npm')).filter((d) => readPkg(d).os).sort();
const platforms = { all: allPlatforms, host: [platformTag()] }[platformsArg] || platformsArg.split(',');
for (const p of platforms) {
  if (!allPlatforms.includes(p)) throw new Error(`no package for platform ${p} in node/npm (have: ${allPlatforms.join(', ')})`);
}

// ELF e_machine of each npm `cpu`: a wrong-architecture addon in the wrong
// package would install fine and fail only at load time on the user's machine.
const elfMachine = { x64: 62, arm64: 183 };

function checkAddon(file, pkg) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 1, 4) !== 'ELF') throw new Error(`${file} is not an ELF shared object`);
  const want = elfMachine[pkg.cpu[0]];
  if (buf.readUInt16LE(18) !== want) {
    throw new Error(`${file} is for ELF machine ${buf.readUInt16LE(18)}, ${pkg.name} needs ${want} (${pkg.cpu[0]})`);
  }
}

function copy(from, toDir) {
  fs.mkdirSync(toDir, { recursive: true });
  fs.cpSync(from, path.join(toDir, path.basename(from)), { recursive: true });
}

function pack(dir) {
  const [t] = JSON.parse(
    execFileSync('npm', ['pack', '--json', '--pack-destination', out, '--loglevel=error'], { cwd: dir, encoding: 'utf8' }),
  );
  process.stdout.write(`${path.join(out, t.filename)}: ${t.size} bytes packed, ${t.unpackedSize} unpacked\n`);
  return t;
}

const stage = fs.mkdtempSync(path.join(os.tmpdir(), 'slidelimit-npm-stage-'));
try {
  fs.mkdirSync(out, { recursive: true });
  const sub = (pkg) => {
    if (pkg.version !== main.version) throw new Error(`${pkg.name} is version ${pkg.version}, slidelimit is ${main.version}`);
    return pkg;
  };

  // Platform packages: package.json and the addon.
  for (const p of platforms) {
    const pkg = sub(readPkg(p));
    const dir = path.join(stage, p);
    const addon = path.join(dist, addonFile(p));
    if (!fs.existsSync(addon)) throw new Error(`${addon} is missing (make node-build, or make node-addon-cross for other architectures)`);
    checkAddon(addon, pkg);
    copy(path.join(root, 'npm', p, 'package.json'), dir);
    copy(addon, dir);
    pack(dir);
  }

  // The wasm package: package.json and wasm-bindgen's output.
  const wasm = sub(readPkg('wasm'));
  const wasmDir = path.join(stage, 'wasm');
  copy(path.join(root, 'npm', 'wasm', 'package.json'), wasmDir);
  for (const f of wasm.files) copy(path.join(dist, 'wasm', f), wasmDir);
  pack(wasmDir);

  // The main package: node/package.json's files, and the dependencies.
  const mainDir = path.join(stage, 'main');
  for (const f of main.files) {
    if (f.replace(/\/$/, '') === 'dist') throw new Error('node/package.json must not pack dist/: the platform packages carry it');
    copy(path.join(root, f), mainDir);
  }
  // Dev-only fields: the tests and the tsconfig they name are not packed.
  const published = { ...main };
  delete published.devDependencies;
  delete published.scripts;
  published.dependencies = { [wasm.name]: wasm.version };
  // Every platform, whichever were packed now: the main package is the same for all.
  published.optionalDependencies = Object.fromEntries(allPlatforms.map((p) => [readPkg(p).name, sub(readPkg(p)).version]));
  fs.writeFileSync(path.join(mainDir, 'package.json'), `${JSON.stringify(published, null, 2)}\n`);
  pack(mainDir);
} finally {
  fs.rmSync(stage, { recursive: true, force: true });
}
