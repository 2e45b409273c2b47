// Reproduces: a lease "extend" written as SET key value XX PX ttl: XX only checks that the key
// exists, not that it is ours, so after our lease lapses this overwrites the new holder's value
// with ours and extends it: two workers now both believe they hold the lease.
import { randomUUID } from 'node:crypto';
import type { RedisClientType } from 'redis';

const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

export class Lease {
  readonly token = randomUUID();

  constructor(private readonly client: RedisClientType, readonly key: string, readonly ttlMs: number) {}

  async acquire(): Promise<boolean> {
    return (await this.client.set(this.key, this.token, { NX: true, PX: this.ttlMs })) === 'OK';
  }

  async extend(): Promise<boolean> {
    const reply = await this.client.set(this.key, this.token, { XX: true, PX: this.ttlMs }); // expect: renew-without-owner-check
    return reply === 'OK';
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
