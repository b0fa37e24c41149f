#!/usr/bin/env node
'use strict';
// Copies the cdylib cargo built into dist/ under the name the loader expects:
//   node scripts/install-addon.js TARGET_DIR
const fs = require('node:fs');
const path = require('node:path');
const { addonFile } = require('../lib/platform');

const targetDir = process.argv[2] || path.join(__dirname, '..', '..', 'target');
const lib = { darwin: 'libslidelimit_node.dylib', win32: 'slidelimit_node.dll' }[process.platform] || 'libslidelimit_node.so';
const dist = path.join(__dirname, '..', 'dist');
fs.mkdirSync(dist, { recursive: true });
const to = path.join(dist, addonFile());
// Copy to a temporary name and rename, so a running process never sees half a file.
fs.copyFileSync(path.join(targetDir, 'release', lib), `${to}.tmp`);
fs.renameSync(`${to}.tmp`, to);
process.stdout.write(`installed ${path.relative(process.cwd(), to)}\n`);
