// Fixed: extend compares the stored token with ours before PEXPIRE, in one Lua script, so an
// expired holder cannot take over or prolong someone else's lease.
import { randomUUID } from 'node:crypto';
import type { RedisClientType } from 'redis';

const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
const EXTEND =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

export class Lease {
  readonly token = randomUUID();

  constructor(private readonly client: RedisClientType, readonly key: string, readonly ttlMs: number) {}

  async acquire(): Promise<boolean> {
    return (await this.client.set(this.key, this.token, { NX: true, PX: this.ttlMs })) === 'OK';
  }

  async extend(): Promise<boolean> {
    const reply = await this.client.eval(EXTEND, { keys: [this.key], arguments: [this.token, String(this.ttlMs)] });
    return reply === 1;
  }

  async release(): Promise<void> {
    await this.client.eval(RELEASE, { keys: [this.key], arguments: [this.token] });
  }
}

export async function drainQueue(client: RedisClientType, next: () => Promise<boolean>): Promise<void> {
  const lease = new Lease(client, 'lock:queue-drainer', 10_000);
  if (!(await lease.acquire())) return;
  try {
    while ((await next()) && (await lease.extend())) {
      // keep draining while the lease is held
    }
  } finally {
    await lease.release();
  }
}
