// Reproduces: process.pid as the lock value: every concurrent request handled by the same Node
// process writes the same value, so one request's owner-checked release or extend succeeds on a
// lock that another request in the same process acquired after a lease expiry.
const Redis = require('ioredis');

const redis = new Redis();
const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

async function withOrderLock(orderId, fn) {
  const key = `lock:order:${orderId}`;
  const owner = String(process.pid);
  const reply = await redis.set(key, owner, 'EX', 15, 'NX'); // expect: constant-lock-value
  if (reply !== 'OK') {
    throw new Error(`order ${orderId} is being modified`);
  }
  try {
    return await fn();
  } finally {
    await redis.eval(RELEASE, 1, key, owner);
  }
}

module.exports = { withOrderLock };
