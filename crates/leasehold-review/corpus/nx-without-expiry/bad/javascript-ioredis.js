// Reproduces: SETNX then a separate PEXPIRE, the pre-2.6.12 recipe the redis.io SETNX page
// discourages: if the process dies (deploy, OOM kill) after SETNX and before PEXPIRE, the lock
// key lives forever and the cron job never runs again.
const crypto = require('crypto');
const Redis = require('ioredis');

const redis = new Redis(process.env.REDIS_URL);

const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

async function withCronLock(job, fn, ttlMs = 60000) {
  const key = `lock:cron:${job}`;
  const token = crypto.randomUUID();
  const won = await redis.setnx(key, token); // expect: nx-without-expiry
  if (won !== 1) {
    return false;
  }
  await redis.pexpire(key, ttlMs);
  try {
    await fn();
  } finally {
    await redis.eval(RELEASE, 1, key, token);
  }
  return true;
}

module.exports = { withCronLock };
