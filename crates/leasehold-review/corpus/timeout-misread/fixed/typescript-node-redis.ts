// Fixed: an acquire error is propagated to the caller as "outcome unknown": the task does not
// run, and the caller does not treat the lock as free (a landed SET expires with its PX).
import { randomUUID } from 'node:crypto';
import type { RedisClientType } from 'redis';

const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

export class LeaseUnknownError extends Error {}

export async function acquireLease(client: RedisClientType, key: string, token: string): Promise<boolean> {
  try {
    return (await client.set(key, token, { NX: true, PX: 30_000 })) === 'OK';
  } catch (err) {
    throw new LeaseUnknownError(`acquire of ${key} has an unknown outcome`, { cause: err });
  }
}

export async function rebalance(client: RedisClientType, run: () => Promise<void>): Promise<void> {
  const key = 'lock:rebalance';
  const token = randomUUID();
  if (!(await acquireLease(client, key, token))) {
    return;
  }
  try {
    await run();
  } finally {
    await client.eval(RELEASE, { keys: [key], arguments: [token] });
  }
}
