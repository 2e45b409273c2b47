// Reproduces: the lock released through a generic helper that DELs any key: the lock function
// passes the lock key to RedisHelper.remove, so after a lease expiry the release deletes the
// next holder's lock (the finding is at the call with the lock key; the helper also serves caches).
import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';

export class RedisHelper {
  static client = new Redis(process.env.REDIS_URL ?? 'redis://localhost:6379');

  static async remove(key: string): Promise<number> {
    return RedisHelper.client.del(key);
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
    await RedisHelper.remove(lockKey); // expect: release-without-owner-check
  }
}

export async function invalidateProfile(userId: string): Promise<void> {
  // Same helper on a cache key: not a lock.
  await RedisHelper.remove(`profile:${userId}`);
}
