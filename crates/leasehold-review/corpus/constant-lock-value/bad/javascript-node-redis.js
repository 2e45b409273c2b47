// Reproduces: the literal 'locked' as the lock value: any process can "own" the lock, so the
// compare-and-delete release is no better than a bare DEL and a holder whose lease ran out
// removes the next holder's lock.
import { createClient } from 'redis';

const client = createClient();
await client.connect();

const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
const LOCKED = 'locked';

export async function refreshExchangeRates(fetchRates) {
  const key = 'lock:exchange-rates';
  const reply = await client.set(key, LOCKED, { NX: true, PX: 20000 }); // expect: constant-lock-value
  if (reply !== 'OK') {
    return false;
  }
  try {
    await fetchRates();
  } finally {
    await client.eval(RELEASE, { keys: [key], arguments: [LOCKED] });
  }
  return true;
}

export async function cacheRates(rates) {
  // A cache write with a TTL and no NX: not a lock.
  await client.set('rates:latest', JSON.stringify(rates), { EX: 300 });
}
