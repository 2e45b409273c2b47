// Fixed: pool.getConnection() pins one connection for GET_LOCK, the work and RELEASE_LOCK.
const mysql = require('mysql2/promise');

const pool = mysql.createPool({ uri: process.env.MYSQL_URL, connectionLimit: 10 });

async function withNamedLock(name, fn) {
  const conn = await pool.getConnection();
  try {
    const [rows] = await conn.query('SELECT GET_LOCK(?, 10) AS got', [name]);
    if (rows[0].got !== 1) {
      return false;
    }
    try {
      await fn();
    } finally {
      await conn.query('SELECT RELEASE_LOCK(?)', [name]);
    }
    return true;
  } finally {
    conn.release();
  }
}

module.exports = { withNamedLock };
