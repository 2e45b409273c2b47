//! The fence table beside `GET_LOCK` session locks (`mode=session`, `fence=table`):
//! `TABLE_fences(lock_key, fence)`, one counter per key bumped while its lock is held, and
//! `TABLE_fence_prefixes(prefix)`, the lock prefixes of the stores granting through it.
//!
//! The counter row is the key's, the lock is `prefix || key`: stores with different
//! `prefix=` options share a key's row while holding different locks. So a row is forgotten
//! (the pruning task, `forget`) only while the key's lock is free under *every* prefix
//! granting through the table: each store registers its prefix when it opens, before its
//! first grant, and each forgetting statement reads the registered prefixes and checks
//! `IS_FREE_LOCK` of each one's lock name (and of its own store's). A store that registers
//! after that read grants only after it, and its grant bumps the row (recent, so not taken)
//! or waits for the row lock and inserts the row anew from the clock, above the forgotten
//! fence. Stores of a version before the registry do not register: their prefixes are
//! checked only by themselves.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Value};

use super::prune::{BATCH, FreeUnder, Sweep, select};
use super::{CLOCK_US, LOCK_NAME, bounded_verb, my_err};
use crate::{Key, Result};

/// The table of the lock prefixes of the stores granting through the fence table beside
/// lease table `table`.
pub(super) fn prefixes_table(table: &str) -> String {
    format!("`{table}_fence_prefixes`")
}

/// Creates the fence table `t` and the prefixes' table beside lease table `table` if
/// needed, and registers `prefix` (before this store's first grant).
pub(super) async fn create(c: &mut Conn, t: &str, table: &str, prefix: &str) -> Result<()> {
    c.query_drop(format!(
        "CREATE TABLE IF NOT EXISTS {t} (
            lock_key VARBINARY(512) NOT NULL PRIMARY KEY,
            fence    BIGINT UNSIGNED NOT NULL
        ) ENGINE = InnoDB"
    ))
    .await
    .map_err(|e| my_err("creating the fence table", e))?;
    let prefixes = prefixes_table(table);
    c.query_drop(format!(
        "CREATE TABLE IF NOT EXISTS {prefixes} (
            prefix VARBINARY(512) NOT NULL PRIMARY KEY
        ) ENGINE = InnoDB"
    ))
    .await
    .map_err(|e| my_err("creating the lock prefixes' table", e))?;
    c.exec_drop(format!("INSERT IGNORE INTO {prefixes} (prefix) VALUES (?)"), (prefix.as_bytes(),))
        .await
        .map_err(|e| my_err("registering the lock prefix", e))
}

/// The fence bump, its lock waits bounded by `op` in the server.
pub(super) fn bump_sql(table: &str, op: Duration) -> String {
    let insert = bounded_verb("INSERT", op, false);
    format!(
        "{insert} INTO {table} (lock_key, fence) VALUES (?, LAST_INSERT_ID({CLOCK_US}))
         ON DUPLICATE KEY UPDATE fence = LAST_INSERT_ID(GREATEST(fence + 1, {CLOCK_US}))"
    )
}

/// What the pruning task forgets of the fence table `t`: the counters of keys whose last
/// fence is older than the horizon and whose lock is free under every registered prefix and
/// `prefix` (the module docs).
pub(super) fn sweep(t: &str, table: &str, prefix: &str, horizon: Duration, op: Duration) -> Sweep {
    let h = crate::horizon::micros(horizon);
    let select = select(op);
    let name = "CONCAT(?, CONVERT(lock_key USING utf8mb4))";
    Sweep {
        what: "pruning the fence table",
        select: format!(
            "{select} lock_key FROM {t} WHERE fence < {CLOCK_US} - {h}{{free}}
             LIMIT {BATCH} FOR UPDATE"
        ),
        params: vec![],
        deletes: vec![format!("DELETE FROM {t} WHERE lock_key IN")],
        free_under: Some(FreeUnder {
            prefixes: prefixes_table(table),
            own: prefix.as_bytes().to_vec(),
            name: format!(
                "IF(CHAR_LENGTH({name}) <= 64, {name}, CONCAT('leasehold:', SHA1({name})))"
            ),
        }),
    }
}

/// Deletes `key`'s row of the fence table `t` if its lock is free under every prefix
/// registered in `prefixes` and under `prefix`.
pub(super) async fn forget(
    c: &mut Conn,
    t: &str,
    prefixes: &str,
    prefix: &str,
    key: &Key,
) -> Result<()> {
    let sql = format!("SELECT prefix FROM {prefixes}");
    let mut all: Vec<Vec<u8>> =
        c.exec(sql, ()).await.map_err(|e| my_err("reading the lock prefixes", e))?;
    all.push(prefix.as_bytes().to_vec());
    all.sort();
    all.dedup();
    let mut params: Vec<Value> = vec![key.as_str().as_bytes().into()];
    for p in &all {
        let name = format!("{}{}", String::from_utf8_lossy(p), key.as_str());
        params.extend([name.as_str().into(), name.as_str().into(), name.as_str().into()]);
    }
    let free = format!(" AND COALESCE(IS_FREE_LOCK({LOCK_NAME}), 0) = 1").repeat(all.len());
    c.exec_drop(format!("DELETE FROM {t} WHERE lock_key = ?{free}"), params)
        .await
        .map_err(|e| my_err("forget", e))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use mysql_async::Conn;
    use mysql_async::prelude::Queryable;

    use crate::backends::mysql::session::MysqlSessionStore;
    use crate::{Key, Locker, OwnerToken, Store};

    /// The machine's server, as the testkit's MySQL tests use it.
    fn server() -> String {
        std::env::var("LEASEHOLD_TEST_MYSQL")
            .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".into())
    }

    async fn store(url: &str) -> std::sync::Arc<MysqlSessionStore> {
        let (opts, o) = super::super::parse_url(url).unwrap();
        let s = MysqlSessionStore::open(opts, &o, crate::backends::Limits::default());
        std::sync::Arc::new(s.await.unwrap())
    }

    /// `forget` through a store with another prefix keeps the row of a key held under the
    /// first prefix (before, it checked only its own lock name), and forgets it once free.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn forget_keeps_a_key_held_under_another_prefix() {
        let db = format!("lh_test_{}", &OwnerToken::generate().unwrap().to_string()[..12]);
        let mut admin = Conn::from_url(server()).await.unwrap();
        admin.query_drop(format!("CREATE DATABASE {db}")).await.unwrap();
        let url = format!("{}/{db}", server());
        let a = Locker::from_arc(store(&format!("{url}?mode=session&prefix=pa:")).await);
        let b = store(&format!("{url}?mode=session&prefix=pb:")).await;
        let held = a.acquire("k", Duration::from_secs(30)).await.unwrap();
        let rows =
            format!("SELECT COUNT(*) FROM {db}.leasehold_leases_fences WHERE lock_key = 'k'");
        let key = Key::new("k").unwrap();
        b.forget(&key).await.unwrap();
        let n: Option<i64> = admin.query_first(&rows).await.unwrap();
        assert_eq!(n, Some(1), "forget under pb: deleted the row of a key held as pa:k");
        assert!(held.release().await.unwrap().is_clean());
        b.forget(&key).await.unwrap();
        let n: Option<i64> = admin.query_first(&rows).await.unwrap();
        assert_eq!(n, Some(0), "a free key is forgotten");
        admin.query_drop(format!("DROP DATABASE {db}")).await.unwrap();
    }
}
