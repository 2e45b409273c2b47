// Reproduces: node-postgres pool.query for a session advisory lock: every pool.query checks out
// a client, runs one statement and returns it, so pg_advisory_unlock lands on another backend and
// the lock leaks on an idle pooled connection until it is closed.
const { Pool } = require('pg');

const pool = new Pool({ connectionString: process.env.DATABASE_URL });

async function withAdvisoryLock(lockId, fn) {
  const { rows } = await pool.query('SELECT pg_try_advisory_lock($1) AS locked', [lockId]); // expect: session-lock-on-pool
  if (!rows[0].locked) {
    return false;
  }
  try {
    await fn();
  } finally {
    await pool.query('SELECT pg_advisory_unlock($1)', [lockId]); // expect: session-lock-on-pool
  }
  return true;
}

module.exports = { withAdvisoryLock };
