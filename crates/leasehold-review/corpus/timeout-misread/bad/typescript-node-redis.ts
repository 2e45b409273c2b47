// Reproduces: a timeout on the acquire read as a grant ("the SET probably went through"): when
// the SET never reached Redis, or lost to another holder, this worker runs the exclusive task
// without the lock.
import { randomUUID } from 'node:crypto';
import type { RedisClientType } from 'redis';

const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

export async function acquireLease(client: RedisClientType, key: string, token: string): Promise<boolean> {
  try {
    return (await client.set(key, token, { NX: true, PX: 30_000 })) === 'OK';
  } catch (err) { // expect: timeout-misread
    // a timeout usually means Redis is slow, not that the SET failed
    return true;
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
