// Fixed: NX and PX in the same SET call, so a crashed worker's lock expires by itself; the
// reply is compared with 'OK' and the release runs the compare-and-delete script.
import { randomUUID } from 'node:crypto';
import { createClient } from 'redis';

const client = createClient({ url: process.env.REDIS_URL });
await client.connect();

const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

export async function runImport(tenantId, importFn) {
  const key = `lock:import:${tenantId}`;
  const token = randomUUID();
  const reply = await client.set(key, token, { NX: true, PX: 120000 });
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
