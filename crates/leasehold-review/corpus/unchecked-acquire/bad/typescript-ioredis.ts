// Reproduces: a lock helper that correctly returns whether SET NX succeeded, but whose caller
// awaits it and discards the boolean: a refused acquire still runs the job (the finding is on the
// caller's line, where the result is dropped).
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

export async function runJob(lock: JobLock, name: string, fn: () => Promise<void>): Promise<void> {
  const key = `lock:job:${name}`;
  const token = randomUUID();
  await lock.tryAcquire(key, token, 30_000); // expect: unchecked-acquire
  try {
    await fn();
  } finally {
    await lock.release(key, token);
  }
}
