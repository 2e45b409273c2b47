// Fixed: GET_LOCK's value is read and only 1 counts as granted; lock and release share one
// dedicated connection.
const mysql = require('mysql2/promise');

async function runBilling(config, bill) {
  const conn = await mysql.createConnection(config);
  try {
    const [rows] = await conn.query('SELECT GET_LOCK(?, 5) AS got', ['billing-run']);
    if (rows[0].got !== 1) {
      return false;
    }
    try {
      await bill();
    } finally {
      await conn.query('SELECT RELEASE_LOCK(?)', ['billing-run']);
    }
    return true;
  } finally {
    await conn.end();
  }
}

module.exports = { runBilling };
