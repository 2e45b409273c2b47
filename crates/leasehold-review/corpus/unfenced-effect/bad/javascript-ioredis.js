// Reproduces: a Redis lease around an HTTP PUT to another service with nothing that lets the
// service reject a stale holder: a holder delayed past its TTL overwrites the newer holder's
// shipping address with its stale one.
const { randomUUID } = require('crypto');
const Redis = require('ioredis');

const redis = new Redis();
const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

async function updateShippingAddress(orderId, address) {
  const key = `lock:order-address:${orderId}`;
  const owner = randomUUID();
  if ((await redis.set(key, owner, 'PX', 10000, 'NX')) !== 'OK') { // expect: unfenced-effect
    throw new Error('order is being edited');
  }
  try {
    const res = await fetch(`https://fulfilment.internal/orders/${orderId}/address`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(address),
    });
    if (!res.ok) throw new Error(`fulfilment replied ${res.status}`);
  } finally {
    await redis.eval(RELEASE, 1, key, owner);
  }
}

module.exports = { updateShippingAddress };
