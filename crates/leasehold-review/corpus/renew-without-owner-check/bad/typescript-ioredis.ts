// Reproduces: a Lua extend script kept in a const that PEXPIREs KEYS[1] without comparing the
// stored value with the caller's token: atomic, but it extends whoever holds the lock now.
import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';

const EXTEND_SCRIPT = "return redis.call('pexpire', KEYS[1], ARGV[1])"; // expect: renew-without-owner-check
const RELEASE_SCRIPT =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

export class ShardOwner {
  private readonly owner = randomUUID();
  private readonly key: string;

  constructor(private readonly redis: Redis, shard: number, private readonly ttlMs = 20_000) {
    this.key = `lock:shard:${shard}`;
  }

  async claim(): Promise<boolean> {
    return (await this.redis.set(this.key, this.owner, 'PX', this.ttlMs, 'NX')) === 'OK';
  }

  async renew(): Promise<boolean> {
    return (await this.redis.eval(EXTEND_SCRIPT, 1, this.key, this.ttlMs)) === 1;
  }

  async relinquish(): Promise<void> {
    await this.redis.eval(RELEASE_SCRIPT, 1, this.key, this.owner);
  }
}
