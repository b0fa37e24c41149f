'use strict';
// The file name of the native addon for this platform and the npm package
// that carries it (napi-rs names: linux-x64-gnu, ...), shared by the loader
// and the build scripts.

let cached; // process.report.getReport() takes milliseconds: once is enough

function platformTag() {
  if (cached) return cached;
  let tag = `${process.platform}-${process.arch}`;
  if (process.platform === 'linux') {
    // glibc and musl builds are not interchangeable.
    const report = process.report && process.report.getReport();
    const glibc = report && report.header && report.header.glibcVersionRuntime;
    tag += glibc ? '-gnu' : '-musl';
  }
  cached = tag;
  return tag;
}

const addonFile = (tag = platformTag()) => `slidelimit.${tag}.node`;
const platformPackage = (tag = platformTag()) => `@slidelimit/${tag}`;

module.exports = { platformTag, addonFile, platformPackage };
