// Fixed: the helper gains a releaseIfOwner that compares the owner value in Lua; the plain
// remove stays for cache keys only.
import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';

const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

export class RedisHelper {
  static client = new Redis(process.env.REDIS_URL ?? 'redis://localhost:6379');

  static async remove(key: string): Promise<number> {
    return RedisHelper.client.del(key);
  }

  static async releaseIfOwner(key: string, owner: string): Promise<boolean> {
    return (await RedisHelper.client.eval(RELEASE, 1, key, owner)) === 1;
  }
}

export async function withTenantLock<T>(tenant: string, fn: () => Promise<T>): Promise<T | null> {
  const lockKey = `lock:tenant:${tenant}`;
  const owner = randomUUID();
  const ok = await RedisHelper.client.set(lockKey, owner, 'PX', 10_000, 'NX');
  if (ok !== 'OK') {
    return null;
  }
  try {
    return await fn();
  } finally {
    await RedisHelper.releaseIfOwner(lockKey, owner);
  }
}

export async function invalidateProfile(userId: string): Promise<void> {
  // Same helper on a cache key: not a lock.
  await RedisHelper.remove(`profile:${userId}`);
}
