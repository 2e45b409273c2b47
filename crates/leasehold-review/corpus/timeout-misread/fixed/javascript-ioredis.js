// Fixed: an acquire error is not a refusal: it is rethrown with the key so the caller retries
// or fails loudly, and the token-checked release clears a SET that may have landed.
const { randomUUID } = require('crypto');
const Redis = require('ioredis');

const redis = new Redis({ commandTimeout: 500 });
const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

async function acquire(key, token, ttlMs) {
  try {
    return (await redis.set(key, token, 'PX', ttlMs, 'NX')) === 'OK';
  } catch (err) {
    await redis.eval(RELEASE, 1, key, token);
    throw new Error(`acquire of ${key} failed: ${err.message}`, { cause: err });
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
