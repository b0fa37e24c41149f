'use strict';
// The file name of the native addon for this platform, shared by the loader
// and the build script that installs it.

function platformTag() {
  let tag = `${process.platform}-${process.arch}`;
  if (process.platform === 'linux') {
    // glibc and musl builds are not interchangeable.
    const report = process.report && process.report.getReport();
    const glibc = report && report.header && report.header.glibcVersionRuntime;
    tag += glibc ? '-gnu' : '-musl';
  }
  return tag;
}

const addonFile = () => `slidelimit.${platformTag()}.node`;

module.exports = { platformTag, addonFile };
