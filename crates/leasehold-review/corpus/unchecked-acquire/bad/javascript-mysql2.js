// Reproduces: MySQL GET_LOCK(name, timeout) executed but its result (1 granted, 0 timed out,
// NULL error) never fetched: after the 5 s wait times out the billing run starts anyway, next to
// the instance that holds the named lock.
const mysql = require('mysql2/promise');

async function runBilling(config, bill) {
  const conn = await mysql.createConnection(config);
  try {
    await conn.query('SELECT GET_LOCK(?, 5)', ['billing-run']); // expect: unchecked-acquire
    try {
      await bill();
    } finally {
      await conn.query('SELECT RELEASE_LOCK(?)', ['billing-run']);
    }
  } finally {
    await conn.end();
  }
}

module.exports = { runBilling };
