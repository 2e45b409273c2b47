// Fixed: the constructor draws a random UUID per mutex instance; host and pid stay only as a
// readable prefix.
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import Redis from 'ioredis';

const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

export class DistributedMutex {
  private readonly value: string;

  constructor(private readonly redis: Redis, private readonly key: string, private readonly ttlMs = 8_000) {
    this.value = `${os.hostname()}:${process.pid}:${randomUUID()}`;
  }

  async tryLock(): Promise<boolean> {
    const reply = await this.redis.set(this.key, this.value, 'PX', this.ttlMs, 'NX');
    return reply === 'OK';
  }

  async unlock(): Promise<void> {
    await this.redis.eval(RELEASE, 1, this.key, this.value);
  }
}

export async function reserveSeat(redis: Redis, seatId: string, reserve: () => Promise<void>): Promise<boolean> {
  const mutex = new DistributedMutex(redis, `lock:seat:${seatId}`);
  if (!(await mutex.tryLock())) {
    return false;
  }
  try {
    await reserve();
  } finally {
    await mutex.unlock();
  }
  return true;
}
