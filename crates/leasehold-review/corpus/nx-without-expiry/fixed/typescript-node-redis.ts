// Fixed: one SET with NX and PX, so the key can never exist without a TTL; the token is random
// per lock object and the release compares it in Lua.
import { randomUUID } from 'node:crypto';
import type { RedisClientType } from 'redis';

const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

export class SyncLock {
  private readonly token = randomUUID();

  constructor(
    private readonly client: RedisClientType,
    private readonly key: string,
    private readonly ttlMs = 30_000,
  ) {}

  async tryAcquire(): Promise<boolean> {
    const reply = await this.client.set(this.key, this.token, { NX: true, PX: this.ttlMs });
    return reply === 'OK';
  }

  async release(): Promise<void> {
    await this.client.eval(RELEASE, { keys: [this.key], arguments: [this.token] });
  }
}

export async function syncCatalog(client: RedisClientType, sync: () => Promise<void>): Promise<void> {
  const lock = new SyncLock(client, 'lock:catalog-sync');
  if (!(await lock.tryAcquire())) {
    return;
  }
  try {
    await sync();
  } finally {
    await lock.release();
  }
}
