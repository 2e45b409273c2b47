// Reproduces: a Redis lease guarding an inventory UPDATE in Postgres with no fence: a holder
// that stalls past its TTL writes the stock level it computed before the pause, undoing the
// newer holder's decrement (the unfenced write Kleppmann's locking article describes).
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { RedisClientType } from 'redis';

const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

export async function reserveStock(redis: RedisClientType, db: Pool, sku: string, qty: number): Promise<boolean> {
  const key = `lock:stock:${sku}`;
  const owner = randomUUID();
  const reply = await redis.set(key, owner, { NX: true, PX: 5_000 }); // expect: unfenced-effect
  if (reply !== 'OK') {
    return false;
  }
  try {
    const { rows } = await db.query('SELECT on_hand FROM stock WHERE sku = $1', [sku]);
    const onHand: number = rows[0].on_hand;
    if (onHand < qty) {
      return false;
    }
    await db.query('UPDATE stock SET on_hand = $1 WHERE sku = $2', [onHand - qty, sku]);
    return true;
  } finally {
    await redis.eval(RELEASE, { keys: [key], arguments: [owner] });
  }
}
