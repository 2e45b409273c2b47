// Fixed: a lock-store failure aborts the sync (logged and rethrown); only an 'OK' reply lets it run.
import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import pino from 'pino';

const logger = pino();
const redis = new Redis();
const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

export async function syncWarehouse(id: string, sync: (id: string) => Promise<void>): Promise<void> {
  const key = `lock:warehouse-sync:${id}`;
  const token = randomUUID();
  let held = false;
  try {
    held = (await redis.set(key, token, 'PX', 45_000, 'NX')) === 'OK';
  } catch (err) {
    logger.error({ err }, 'lock unavailable; sync not run');
    throw err;
  }
  if (!held) {
    return;
  }
  try {
    await sync(id);
  } finally {
    await redis.eval(RELEASE, 1, key, token);
  }
}
