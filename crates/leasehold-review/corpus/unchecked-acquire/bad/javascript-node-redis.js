// Reproduces: node-redis SET NX PX awaited but its reply (OK or null) never examined: the await
// succeeds whether or not the key was set, so every caller proceeds as if it held the lock.
import { randomUUID } from 'node:crypto';
import { createClient } from 'redis';

const client = createClient();
await client.connect();

const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

export async function rotateApiKeys(projectId, rotate) {
  const key = `lock:rotate-keys:${projectId}`;
  const token = randomUUID();
  await client.set(key, token, { NX: true, PX: 30000 }); // expect: unchecked-acquire
  try {
    await rotate(projectId);
  } finally {
    await client.eval(RELEASE, { keys: [key], arguments: [token] });
  }
}
