// Reproduces: any error from the acquire (command timeout, connection reset) mapped to "someone
// else has the lock": if the SET reached Redis, this process holds a lock it never releases and
// the job is blocked for the whole TTL.
const { randomUUID } = require('crypto');
const Redis = require('ioredis');

const redis = new Redis({ commandTimeout: 500 });
const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

async function acquire(key, token, ttlMs) {
  try {
    return (await redis.set(key, token, 'PX', ttlMs, 'NX')) === 'OK';
  } catch (err) { // expect: timeout-misread
    return false;
  }
}

async function generateInvoicePdf(invoiceId, render) {
  const key = `lock:invoice-pdf:${invoiceId}`;
  const token = randomUUID();
  if (!(await acquire(key, token, 120000))) {
    return 'busy';
  }
  try {
    await render(invoiceId);
  } finally {
    await redis.eval(RELEASE, 1, key, token);
  }
  return 'done';
}

module.exports = { generateInvoicePdf };
