// Reproduces: setNX followed by a separate pExpire inside a lock class: the expiry is a second
// round trip, so a process killed between the two (or a pExpire that fails) leaves a lock key
// with no TTL that blocks every later sync.
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
    const won = await this.client.setNX(this.key, this.token); // expect: nx-without-expiry
    if (!won) {
      return false;
    }
    await this.client.pExpire(this.key, this.ttlMs);
    return true;
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
