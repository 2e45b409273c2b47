// Fixed: the keep-alive extends with a compare-then-PEXPIRE script and aborts the task through an
// AbortController when the script reports the lock belongs to someone else.
const { randomUUID } = require('crypto');
const Redis = require('ioredis');

const redis = new Redis();
const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
const EXTEND =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

function keepAlive(key, token, ttlMs, controller) {
  const timer = setInterval(async () => {
    try {
      if ((await redis.eval(EXTEND, 1, key, token, ttlMs)) !== 1) {
        controller.abort(new Error(`lost ${key}`));
      }
    } catch (err) {
      controller.abort(err);
    }
  }, ttlMs / 3);
  return timer;
}

async function runLeaderTask(task, ttlMs = 15000) {
  const key = 'lock:leader:scheduler';
  const token = randomUUID();
  if ((await redis.set(key, token, 'PX', ttlMs, 'NX')) !== 'OK') {
    return false;
  }
  const controller = new AbortController();
  const timer = keepAlive(key, token, ttlMs, controller);
  try {
    await task(controller.signal);
  } finally {
    clearInterval(timer);
    await redis.eval(RELEASE, 1, key, token);
  }
  return true;
}

module.exports = { runLeaderTask };
