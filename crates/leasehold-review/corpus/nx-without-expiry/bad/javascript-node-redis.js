// Reproduces: a node-redis SET with NX but no PX/EX option: a worker that crashes while holding
// the lock leaves the key behind forever (no TTL), so the import stays "in progress" until an
// operator deletes the key.
import { randomUUID } from 'node:crypto';
import { createClient } from 'redis';

const client = createClient({ url: process.env.REDIS_URL });
await client.connect();

const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

export async function runImport(tenantId, importFn) {
  const key = `lock:import:${tenantId}`;
  const token = randomUUID();
  const reply = await client.set(key, token, { NX: true }); // expect: nx-without-expiry
  if (reply !== 'OK') {
    return { skipped: true };
  }
  try {
    return await importFn();
  } finally {
    await client.eval(RELEASE, { keys: [key], arguments: [token] });
  }
}

export async function rememberLastImport(tenantId, at) {
  // A cache entry with a TTL: not a lock.
  await client.set(`import:last:${tenantId}`, String(at), { EX: 3600 });
}
