// Reproduces: a WATCH used as if it made GET-compare-then-DEL atomic, but with no MULTI/EXEC the
// WATCH does nothing: the lease can expire and another worker acquire between GET and DEL, and
// this DEL deletes the new holder's lock.
import { randomUUID } from 'node:crypto';
import { createClient } from 'redis';

const client = createClient();
await client.connect();

export async function acquire(key, ttlMs) {
  const token = randomUUID();
  const reply = await client.set(key, token, { NX: true, PX: ttlMs });
  return reply === 'OK' ? token : null;
}

export async function release(key, token) {
  return client.executeIsolated(async (isolated) => {
    await isolated.watch(key);
    const current = await isolated.get(key);
    if (current !== token) {
      await isolated.unwatch();
      return false;
    }
    await isolated.del(key); // expect: release-without-owner-check
    return true;
  });
}
