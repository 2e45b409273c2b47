// Fixed: a random owner per acquire (pid kept only as a debugging prefix).
const { randomUUID } = require('crypto');
const Redis = require('ioredis');

const redis = new Redis();
const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

async function withOrderLock(orderId, fn) {
  const key = `lock:order:${orderId}`;
  const owner = `${process.pid}:${randomUUID()}`;
  const reply = await redis.set(key, owner, 'EX', 15, 'NX');
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
