// Reproduces: MySQL GET_LOCK / RELEASE_LOCK through a mysql2 pool: named locks belong to the
// session, so RELEASE_LOCK on another pooled connection returns 0 and the lock stays held by a
// connection idling in the pool.
const mysql = require('mysql2/promise');

const pool = mysql.createPool({ uri: process.env.MYSQL_URL, connectionLimit: 10 });

async function withNamedLock(name, fn) {
  const [rows] = await pool.query('SELECT GET_LOCK(?, 10) AS got', [name]); // expect: session-lock-on-pool
  if (rows[0].got !== 1) {
    return false;
  }
  try {
    await fn();
  } finally {
    await pool.query('SELECT RELEASE_LOCK(?)', [name]); // expect: session-lock-on-pool
  }
  return true;
}

module.exports = { withNamedLock };
