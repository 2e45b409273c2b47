// Fixed: the catch logs and rethrows, so no payout runs without the lock.
import { randomUUID } from 'node:crypto';
import { createClient } from 'redis';

const client = createClient();
client.on('error', (err) => console.error('redis', err));
await client.connect();

const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

export async function runPayouts(pay) {
  const key = 'lock:payouts';
  const token = randomUUID();
  try {
    const reply = await client.set(key, token, { NX: true, PX: 60000 });
    if (reply !== 'OK') {
      return;
    }
  } catch (err) {
    console.error('lock store unavailable, payouts not run', err);
    throw err;
  }
  try {
    await pay();
  } finally {
    await client.eval(RELEASE, { keys: [key], arguments: [token] });
  }
}
