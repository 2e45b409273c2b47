// Reproduces: a migration runner that guards itself with a session advisory lock issued through
// pool.query: the blocking pg_advisory_lock is held by whichever pooled client ran it, and the
// unlock goes to another client, so the next deploy's migrator waits forever.
import { Pool } from 'pg';

const MIGRATION_LOCK = 72_707_369;

export class Migrator {
  constructor(private readonly pool: Pool) {}

  private async lock(): Promise<void> {
    await this.pool.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]); // expect: session-lock-on-pool
  }

  private async unlock(): Promise<void> {
    await this.pool.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]); // expect: session-lock-on-pool
  }

  async migrate(steps: Array<() => Promise<void>>): Promise<void> {
    await this.lock();
    try {
      for (const step of steps) {
        await step();
      }
    } finally {
      await this.unlock();
    }
  }
}
