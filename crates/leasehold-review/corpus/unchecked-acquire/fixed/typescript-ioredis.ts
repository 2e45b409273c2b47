// Fixed: the caller branches on the boolean the helper returns.
import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';

const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

export class JobLock {
  constructor(private readonly redis: Redis) {}

  async tryAcquire(key: string, token: string, ttlMs: number): Promise<boolean> {
    const reply = await this.redis.set(key, token, 'PX', ttlMs, 'NX');
    return reply === 'OK';
  }

  async release(key: string, token: string): Promise<void> {
    await this.redis.eval(RELEASE, 1, key, token);
  }
}

export async function runJob(lock: JobLock, name: string, fn: () => Promise<void>): Promise<boolean> {
  const key = `lock:job:${name}`;
  const token = randomUUID();
  if (!(await lock.tryAcquire(key, token, 30_000))) {
    return false;
  }
  try {
    await fn();
  } finally {
    await lock.release(key, token);
  }
  return true;
}
