// Fixed: WATCH followed by MULTI/EXEC, so the DEL is discarded if the key changed after the GET
// (optimistic check-and-set, as documented for Redis transactions).
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
    const result = await isolated.multi().del(key).exec();
    return result !== null;
  });
}
