// Reproduces: a setInterval "keep-alive" that refreshes the lock TTL with a bare PEXPIRE: after a
// GC pause or network stall lets the lease lapse and another process acquire, the interval keeps
// prolonging the other process's lock and this process never learns it lost the lock.
const { randomUUID } = require('crypto');
const Redis = require('ioredis');

const redis = new Redis();
const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

function keepAlive(key, ttlMs) {
  return setInterval(async () => {
    await redis.pexpire(key, ttlMs); // expect: renew-without-owner-check
  }, ttlMs / 3);
}

async function runLeaderTask(task, ttlMs = 15000) {
  const key = 'lock:leader:scheduler';
  const token = randomUUID();
  if ((await redis.set(key, token, 'PX', ttlMs, 'NX')) !== 'OK') {
    return false;
  }
  const timer = keepAlive(key, ttlMs);
  try {
    await task();
  } finally {
    clearInterval(timer);
    await redis.eval(RELEASE, 1, key, token);
  }
  return true;
}

module.exports = { runLeaderTask };
