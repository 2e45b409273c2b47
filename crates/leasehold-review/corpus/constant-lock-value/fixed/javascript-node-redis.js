// Fixed: a random token per acquire is stored and compared on release.
import { randomUUID } from 'node:crypto';
import { createClient } from 'redis';

const client = createClient();
await client.connect();

const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

export async function refreshExchangeRates(fetchRates) {
  const key = 'lock:exchange-rates';
  const token = randomUUID();
  const reply = await client.set(key, token, { NX: true, PX: 20000 });
  if (reply !== 'OK') {
    return false;
  }
  try {
    await fetchRates();
  } finally {
    await client.eval(RELEASE, { keys: [key], arguments: [token] });
  }
  return true;
}

export async function cacheRates(rates) {
  // A cache write with a TTL and no NX: not a lock.
  await client.set('rates:latest', JSON.stringify(rates), { EX: 300 });
}
