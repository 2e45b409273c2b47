// Fixed: the holder takes a fence from INCR after acquiring and sends it with the PUT; the
// fulfilment service rejects any write whose fence is lower than the last one it accepted.
const { randomUUID } = require('crypto');
const Redis = require('ioredis');

const redis = new Redis();
const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

async function updateShippingAddress(orderId, address) {
  const key = `lock:order-address:${orderId}`;
  const owner = randomUUID();
  if ((await redis.set(key, owner, 'PX', 10000, 'NX')) !== 'OK') {
    throw new Error('order is being edited');
  }
  try {
    const fence = await redis.incr(`fence:order-address:${orderId}`);
    const res = await fetch(`https://fulfilment.internal/orders/${orderId}/address`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', 'x-fencing-token': String(fence) },
      body: JSON.stringify({ ...address, fence }),
    });
    if (!res.ok) throw new Error(`fulfilment replied ${res.status}`);
  } finally {
    await redis.eval(RELEASE, 1, key, owner);
  }
}

module.exports = { updateShippingAddress };
