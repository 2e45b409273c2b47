// Fixed: one client is checked out with pool.connect() and both statements run on it; the client
// goes back to the pool only after the unlock, in finally.
const { Pool } = require('pg');

const pool = new Pool({ connectionString: process.env.DATABASE_URL });

async function withAdvisoryLock(lockId, fn) {
  const client = await pool.connect();
  try {
    const { rows } = await client.query('SELECT pg_try_advisory_lock($1) AS locked', [lockId]);
    if (!rows[0].locked) {
      return false;
    }
    try {
      await fn();
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [lockId]);
    }
    return true;
  } finally {
    client.release();
  }
}

module.exports = { withAdvisoryLock };
