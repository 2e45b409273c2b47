// Reproduces: "degrade gracefully" when the lock store fails: the catch marks the lock as held
// and the sync carries on, so during a Redis outage several pods run the same sync together.
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
  } catch (err) { // expect: fail-open
    logger.warn({ err }, 'lock unavailable; proceeding');
    held = true;
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
