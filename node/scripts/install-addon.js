#!/usr/bin/env node
'use strict';
// Copies the cdylib cargo built into dist/ under the name the loader expects,
// stripped: the workspace's release profile keeps debug info (for profiling
// the Rust side), which made the shipped addon 7.5 MB instead of 0.7 MB.
//   node scripts/install-addon.js TARGET_DIR            the host's build
//   node scripts/install-addon.js TARGET_DIR TRIPLE     a cross build (make node-addon-cross)
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { addonFile } = require('../lib/platform');

const targetDir = process.argv[2] || path.join(__dirname, '..', '..', 'target');
// Cross builds: the napi-rs platform name and binutils' strip for the target.
const cross = {
  'aarch64-unknown-linux-gnu': { tag: 'linux-arm64-gnu', strip: ['aarch64-linux-gnu-strip', '--strip-unneeded'] },
  'x86_64-unknown-linux-gnu': { tag: 'linux-x64-gnu', strip: ['x86_64-linux-gnu-strip', '--strip-unneeded'] },
};
const triple = process.argv[3];
if (triple && !cross[triple]) throw new Error(`no cross build set up for ${triple} (known: ${Object.keys(cross).join(', ')})`);
const lib = triple ? 'libslidelimit_node.so' : { darwin: 'libslidelimit_node.dylib', win32: 'slidelimit_node.dll' }[process.platform] || 'libslidelimit_node.so';
const built = triple ? path.join(targetDir, triple, 'release', lib) : path.join(targetDir, 'release', lib);
const dist = path.join(__dirname, '..', 'dist');
fs.mkdirSync(dist, { recursive: true });
const to = path.join(dist, addonFile(triple ? cross[triple].tag : undefined));
// Copy to a temporary name and rename, so a running process never sees half a file.
const tmp = `${to}.tmp`;
fs.copyFileSync(built, tmp);
// Debug info and local symbols go; the dynamic symbols napi loads by stay.
// (MSVC keeps debug info in a separate .pdb: nothing to strip on Windows.)
const strip = triple ? cross[triple].strip : { linux: ['strip', '--strip-unneeded'], darwin: ['strip', '-x'] }[process.platform];
if (strip) {
  try {
    execFileSync(strip[0], [...strip.slice(1), tmp], { stdio: ['ignore', 'inherit', 'inherit'] });
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw new Error(`${strip.join(' ')} failed (binutils needed to ship the addon stripped): ${e.message}`);
  }
}
fs.renameSync(tmp, to);
const mb = (fs.statSync(to).size / 1e6).toFixed(2);
process.stdout.write(`installed ${path.relative(process.cwd(), to)} (${mb} MB)\n`);
