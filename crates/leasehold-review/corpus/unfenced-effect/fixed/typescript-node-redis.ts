// Fixed: a fence from INCR is written with the row and checked in the WHERE clause, so a stale
// holder's UPDATE matches no row and the reservation is reported as lost.
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { RedisClientType } from 'redis';

const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

export async function reserveStock(redis: RedisClientType, db: Pool, sku: string, qty: number): Promise<boolean> {
  const key = `lock:stock:${sku}`;
  const owner = randomUUID();
  const reply = await redis.set(key, owner, { NX: true, PX: 5_000 });
  if (reply !== 'OK') {
    return false;
  }
  try {
    const fence = await redis.incr(`fence:stock:${sku}`);
    const { rows } = await db.query('SELECT on_hand FROM stock WHERE sku = $1', [sku]);
    const onHand: number = rows[0].on_hand;
    if (onHand < qty) {
      return false;
    }
    const res = await db.query(
      'UPDATE stock SET on_hand = $1, fence = $3 WHERE sku = $2 AND fence < $3',
      [onHand - qty, sku, fence],
    );
    return res.rowCount === 1;
  } finally {
    await redis.eval(RELEASE, { keys: [key], arguments: [owner] });
  }
}
