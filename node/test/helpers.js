'use strict';
// Shared by the tests: a real Redis from scripts/with-redis.sh, unique names
// per run, and a way to start extra throwaway servers through scripts/redis.sh.

const { execFileSync } = require('node:child_process');
const path = require('node:path');
const Redis = require('ioredis');

const root = path.join(__dirname, '..', '..');
const url = process.env.SLIDELIMIT_TEST_REDIS_URL;
if (!url) {
  throw new Error('SLIDELIMIT_TEST_REDIS_URL is not set: run the tests through scripts/with-redis.sh (make test-node)');
}

let counter = 0;
/** A resource name no other test (or run) uses. */
function unique(prefix) {
  counter += 1;
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${counter}`;
}

function connect(options = {}) {
  return new Redis(url, { maxRetriesPerRequest: 1, ...options });
}

function freePort() {
  return Number(execFileSync(path.join(root, 'scripts', 'free-port.sh')).toString().trim());
}

/** Starts a redis-server of our own (own port, pid file); returns { port, stop }. */
function startRedis(name, extraArgs = [], port = freePort()) {
  const script = path.join(root, 'scripts', 'redis.sh');
  execFileSync(script, ['start', name, String(port), ...extraArgs], { stdio: ['ignore', 'ignore', 'pipe'] });
  return {
    port,
    dir: path.join(root, '.tmp', `redis-${name}`),
    stop: () => execFileSync(script, ['stop', name], { stdio: 'ignore' }),
  };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

module.exports = { url, unique, connect, freePort, startRedis, sleep, root };
