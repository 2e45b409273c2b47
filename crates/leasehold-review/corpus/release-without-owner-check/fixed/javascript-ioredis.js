// Fixed: release through a compare-and-delete Lua command; forceRelease is the deliberate
// operator escape hatch for a stuck lock and is named as such.
const crypto = require('crypto');
const Redis = require('ioredis');

const redis = new Redis();

redis.defineCommand('releaseLock', {
  numberOfKeys: 1,
  lua: "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
});

async function withLock(key, ttlMs, fn) {
  const token = crypto.randomUUID();
  const reply = await redis.set(key, token, 'PX', ttlMs, 'NX');
  if (reply !== 'OK') {
    return undefined;
  }
  try {
    return await fn();
  } finally {
    await redis.releaseLock(key, token);
  }
}

async function forceRelease(key) {
  await redis.del(key);
}

async function clearCart(userId) {
  // Deleting a cart entry, not a lock key.
  await redis.del(`cart:${userId}`);
}

module.exports = { withLock, forceRelease, clearCart };
