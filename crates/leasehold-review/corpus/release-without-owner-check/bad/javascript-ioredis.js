// Reproduces: release by a bare DEL in `finally` after the lease may have expired: worker A's
// key expires while it works, B acquires, and A's DEL removes B's lock, so a third worker gets in
// alongside B (the unsafe release redis.io's "Distributed locks with Redis" page warns about).
const crypto = require('crypto');
const Redis = require('ioredis');

const redis = new Redis();

async function withLock(key, ttlMs, fn) {
  const token = crypto.randomUUID();
  const reply = await redis.set(key, token, 'PX', ttlMs, 'NX');
  if (reply !== 'OK') {
    return undefined;
  }
  try {
    return await fn();
  } finally {
    await redis.del(key); // expect: release-without-owner-check
  }
}

async function clearCart(userId) {
  // Deleting a cart entry, not a lock key.
  await redis.del(`cart:${userId}`);
}

module.exports = { withLock, clearCart };
