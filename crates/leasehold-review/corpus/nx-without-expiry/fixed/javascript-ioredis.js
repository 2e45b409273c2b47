// Fixed: SET key token PX ttl NX is one atomic command, so the key always carries an expiry;
// the token is random per acquire and the release compares it in Lua.
const crypto = require('crypto');
const Redis = require('ioredis');

const redis = new Redis(process.env.REDIS_URL);

const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

async function withCronLock(job, fn, ttlMs = 60000) {
  const key = `lock:cron:${job}`;
  const token = crypto.randomUUID();
  const reply = await redis.set(key, token, 'PX', ttlMs, 'NX');
  if (reply !== 'OK') {
    return false;
  }
  try {
    await fn();
  } finally {
    await redis.eval(RELEASE, 1, key, token);
  }
  return true;
}

module.exports = { withCronLock };
