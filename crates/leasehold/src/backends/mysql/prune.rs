//! Forgetting per-key rows past the horizon (`crate::horizon`, `docs/design.md` §4.6): the
//! task the lease-table and `GET_LOCK` stores run every quarter of the horizon, and the
//! bounded batch it (and the fence resource's `prune`) deletes with.
//!
//! A batch is one `READ COMMITTED` transaction: `SELECT` the keys of at most [`BATCH`] idle
//! rows `FOR UPDATE SKIP LOCKED` (a grant in flight holds its row's lock, so its row is
//! skipped, never waited for), then delete exactly those rows (and their companions in the
//! tables beside), and commit. On a server without `SKIP LOCKED` (MySQL before 8.0, MariaDB
//! before 10.6) the `SELECT` is `FOR UPDATE` alone: it waits for a grant in flight, bounded
//! by the lock wait timeout, and that grant then finds its row gone and inserts it anew.
//!
//! Why deleting a key's counter is safe: the rows are chosen by having been idle (no grant,
//! reader or writer intent live) for longer than the horizon, so the next grant inserts the
//! row with the server's clock in µs, above every fence the row issued while
//! [`crate::horizon::HORIZON_ASSUMPTION`] holds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, IsolationLevel, Opts, TxOpts, Value};

use super::{bounded_verb, my_err, new_conn};
use crate::Result;

/// Rows deleted per batch: the work one transaction does is bounded.
pub(super) const BATCH: usize = 1000;

/// MySQL's and MariaDB's parse error: what a server without `SKIP LOCKED` answers.
const PARSE_ERROR: u16 = 1064;

/// One kind of row to forget.
pub(super) struct Sweep {
    /// What is forgotten, for errors.
    pub what: &'static str,
    /// `SELECT` of the key columns of at most [`BATCH`] idle rows, ending in `FOR UPDATE`
    /// (the batch appends `SKIP LOCKED` where the server has it).
    pub select: String,
    /// The select's parameters.
    pub params: Vec<Value>,
    /// Deletes run for the selected keys, each ending in `WHERE <key columns> IN` (the
    /// batch appends the list).
    pub deletes: Vec<String>,
    /// For `GET_LOCK` fence rows: the rows are taken only while their key's lock is free
    /// under every prefix granting through the table, checked where `select` says `{free}`
    /// (after its own parameters).
    pub free_under: Option<FreeUnder>,
}

/// The prefixes whose lock names a `GET_LOCK` fence row must find free to be pruned: those
/// registered in `prefixes` (read in the batch's transaction) and this store's own.
pub(super) struct FreeUnder {
    /// The table of the prefixes registered by the stores granting through the fence table.
    pub prefixes: String,
    /// This store's prefix.
    pub own: Vec<u8>,
    /// The lock name of prefix `?` and the row's key, as the server computes it (three
    /// parameters, each the prefix).
    pub name: String,
}

impl FreeUnder {
    /// The checks replacing `{free}` and their parameters, for the prefixes registered now.
    async fn checks(&self, tx: &mut mysql_async::Transaction<'_>) -> Result<(String, Vec<Value>)> {
        let sql = format!("SELECT prefix FROM {}", self.prefixes);
        let mut all: Vec<Vec<u8>> =
            tx.exec(sql, ()).await.map_err(|e| my_err("reading the lock prefixes", e))?;
        all.push(self.own.clone());
        all.sort();
        all.dedup();
        let check = format!(" AND COALESCE(IS_FREE_LOCK({}), 0) = 1", self.name).repeat(all.len());
        let params = all.into_iter().flat_map(|p| vec![Value::Bytes(p); 3]).collect();
        Ok((check, params))
    }
}

/// Whether this server takes `SKIP LOCKED` (learned from its first answer).
#[derive(Debug)]
pub(super) struct SkipLocked(AtomicBool);

impl Default for SkipLocked {
    fn default() -> Self {
        SkipLocked(AtomicBool::new(true))
    }
}

fn read_committed() -> TxOpts {
    let mut opts = TxOpts::default();
    opts.with_isolation_level(IsolationLevel::ReadCommitted);
    opts
}

/// One batch of `s`: returns the rows selected and deleted (at most [`BATCH`]).
pub(super) async fn batch(c: &mut Conn, s: &Sweep, skip: &SkipLocked) -> Result<usize> {
    loop {
        let skipping = skip.0.load(Ordering::Relaxed);
        let sql = if skipping { format!("{} SKIP LOCKED", s.select) } else { s.select.clone() };
        let mut tx = c.start_transaction(read_committed()).await.map_err(|e| my_err("BEGIN", e))?;
        let (sql, params) = match &s.free_under {
            None => (sql, s.params.clone()),
            Some(f) => {
                let (check, mut extra) = f.checks(&mut tx).await?;
                let mut params = s.params.clone();
                params.append(&mut extra);
                (sql.replace("{free}", &check), params)
            }
        };
        let rows: Vec<mysql_async::Row> = match tx.exec(&sql, params).await {
            Err(mysql_async::Error::Server(e)) if skipping && e.code == PARSE_ERROR => {
                drop(tx);
                skip.0.store(false, Ordering::Relaxed);
                continue;
            }
            r => r.map_err(|e| my_err(s.what, e))?,
        };
        if rows.is_empty() {
            tx.commit().await.map_err(|e| my_err("COMMIT", e))?;
            return Ok(0);
        }
        let keys: Vec<Vec<Value>> = rows.into_iter().map(mysql_async::Row::unwrap).collect();
        let width = keys[0].len();
        let one =
            if width == 1 { "?".to_owned() } else { format!("({})", vec!["?"; width].join(",")) };
        let list = format!("({})", vec![one; keys.len()].join(","));
        let params: Vec<Value> = keys.iter().flatten().cloned().collect();
        for d in &s.deletes {
            tx.exec_drop(format!("{d} {list}"), params.clone())
                .await
                .map_err(|e| my_err(s.what, e))?;
        }
        tx.commit().await.map_err(|e| my_err("COMMIT", e))?;
        return Ok(keys.len());
    }
}

/// The cutoff of "idle past the horizon" on the server's clock, as SQL.
pub(super) fn cutoff(horizon: Duration) -> String {
    format!("UTC_TIMESTAMP(6) - INTERVAL {} MICROSECOND", crate::horizon::micros(horizon))
}

/// A `SELECT` verb bounded in the server by `op` (lock waits, and the statement on MariaDB).
pub(super) fn select(op: Duration) -> String {
    bounded_verb("SELECT", op, false)
}

/// One round on a connection of its own: every batch of every sweep until one deletes fewer
/// than [`BATCH`] rows, each batch bounded by `op` plus the connect limit. Returns the rows
/// deleted.
pub(super) async fn round(
    opts: &Opts,
    connect: Duration,
    op: Duration,
    sweeps: &[Sweep],
    skip: &SkipLocked,
) -> Result<u64> {
    let mut c = new_conn(opts, connect).await?;
    let mut total = 0u64;
    let mut out = Ok(());
    'sweeps: for s in sweeps {
        loop {
            let b = crate::limits::within(
                op + connect,
                || format!("mysql {}", s.what),
                batch(&mut c, s, skip),
            );
            match b.await {
                Ok(n) => {
                    total += n as u64;
                    if n < BATCH {
                        break;
                    }
                }
                Err(e) => {
                    out = Err(e);
                    break 'sweeps;
                }
            }
        }
    }
    let _ = c.disconnect().await;
    out.map(|()| total)
}

/// The pruning task of one store, ended when the store is dropped.
#[derive(Debug)]
pub(super) struct Pruner(tokio::task::AbortHandle);

impl Pruner {
    /// Starts the task: a round at once, then every [`crate::horizon::prune_period`], errors ignored until the next (a server
    /// that cannot be reached now is tried again then; nothing here is needed for safety).
    pub(super) fn start(
        opts: Opts,
        connect: Duration,
        horizon: Duration,
        sweeps: Vec<Sweep>,
    ) -> Pruner {
        let skip = SkipLocked::default();
        Pruner(
            tokio::spawn(async move {
                // The first round at once: a process that lives less than a period (a `run`
                // of a short job) still forgets what earlier processes left past the horizon.
                loop {
                    let r = round(&opts, connect, crate::DEFAULT_OP_TIMEOUT, &sweeps, &skip).await;
                    if let Err(e) = r {
                        tracing::debug!("mysql pruning round failed: {e}");
                    }
                    tokio::time::sleep(crate::horizon::prune_period(horizon)).await;
                }
            })
            .abort_handle(),
        )
    }
}

impl Drop for Pruner {
    fn drop(&mut self) {
        self.0.abort();
    }
}
