// Fixed: the reply is compared with 'OK' (null means someone else holds the lock).
import { randomUUID } from 'node:crypto';
import { createClient } from 'redis';

const client = createClient();
await client.connect();

const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

export async function rotateApiKeys(projectId, rotate) {
  const key = `lock:rotate-keys:${projectId}`;
  const token = randomUUID();
  const reply = await client.set(key, token, { NX: true, PX: 30000 });
  if (reply !== 'OK') {
    return false;
  }
  try {
    await rotate(projectId);
  } finally {
    await client.eval(RELEASE, { keys: [key], arguments: [token] });
  }
  return true;
}
