// Fixed: the migrator checks out one PoolClient, takes and releases the session lock on it, and
// releases the client in finally.
import { Pool, PoolClient } from 'pg';

const MIGRATION_LOCK = 72_707_369;

export class Migrator {
  constructor(private readonly pool: Pool) {}

  async migrate(steps: Array<(client: PoolClient) => Promise<void>>): Promise<void> {
    const client = await this.pool.connect();
    try {
      await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
      try {
        for (const step of steps) {
          await step(client);
        }
      } finally {
        await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
      }
    } finally {
      client.release();
    }
  }
}
