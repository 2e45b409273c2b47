//! Forgetting the lease table's idle rows past the horizon (`crate::horizon`): a task each
//! lease-table store runs, deleting in bounded batches the rows of keys nobody held, read or
//! waited on as writer within the horizon.
//!
//! A row is the key's fence counter. Deleting it is safe once the horizon has passed since
//! the key's last expiry (hence since its last grant): the next grant inserts the row again
//! with the server's clock in µs, which is then past every fence the row issued while
//! [`crate::horizon::HORIZON_ASSUMPTION`] holds. A row whose grant, readers or writer intent
//! is live, or was within the horizon, is never touched: the condition is read under the
//! row's lock (`FOR UPDATE SKIP LOCKED`, so a grant in flight keeps its row).
//!
//! Deleted rows' bytes stay allocated; after rounds that deleted rows, at most once per
//! horizon, the task compacts both tables (`compact.rs`: `VACUUM`, and `REINDEX INDEX
//! CONCURRENTLY` of an index much larger than its live rows need). Where the store's role
//! may not (not the tables' owner), it says so once in the log and carries on pruning.

use std::time::Duration;

use super::{Config, PgConn, server_bounds};

/// Rows deleted per statement: the work one statement does is bounded.
pub(super) const BATCH: i64 = 1000;

/// The statements, for the table `t` (quoted) and its readers' table `r`.
pub(super) struct PruneStatements {
    /// `$1` horizon in µs → the number of lease rows deleted (at most [`BATCH`]).
    pub leases: String,
    /// `$1` horizon in µs → the number of readers' rows deleted (at most [`BATCH`]).
    pub readers: String,
    /// The two tables, quoted and qualified, for the compaction.
    pub tables: [String; 2],
}

impl PruneStatements {
    pub(super) fn new(t: &str, r: &str) -> PruneStatements {
        let idle = "now() - $1::bigint * interval '1 microsecond'";
        PruneStatements {
            leases: format!(
                "WITH d AS (DELETE FROM {t} WHERE key IN (
                   SELECT key FROM {t} l
                   WHERE GREATEST(l.expires_at, l.shared_until, l.intent_until) < {idle}
                   LIMIT {BATCH} FOR UPDATE SKIP LOCKED) RETURNING 1)
                 SELECT count(*) FROM d"
            ),
            readers: format!(
                "WITH d AS (DELETE FROM {r} WHERE (key, owner) IN (
                   SELECT key, owner FROM {r} WHERE expires_at < {idle}
                   LIMIT {BATCH} FOR UPDATE SKIP LOCKED) RETURNING 1)
                 SELECT count(*) FROM d"
            ),
            tables: [t.to_owned(), r.to_owned()],
        }
    }
}

/// One round: every batch until one deletes fewer than [`BATCH`] rows. Returns the rows
/// deleted.
pub(super) async fn round(
    cfg: &Config,
    connect: Duration,
    sql: &PruneStatements,
    horizon: Duration,
) -> crate::Result<u64> {
    let pg = PgConn::open(cfg, connect, &server_bounds(connect, true), None).await?;
    let h = crate::horizon::micros(horizon);
    let mut total = 0u64;
    for stmt in [&sql.leases, &sql.readers] {
        loop {
            let n: i64 = pg
                .bounded("pruning", connect, async { pg.client.query_one(stmt, &[&h]).await })
                .await?
                .get(0);
            total += n as u64;
            if n < BATCH {
                break;
            }
        }
    }
    Ok(total)
}

/// How long one compaction statement may run on the server: the horizon, between 1 and
/// 10 minutes (a `REINDEX CONCURRENTLY` of a large index takes a while, and waits for older
/// transactions; nothing waits for it).
pub(super) fn compaction_bound(horizon: Duration) -> Duration {
    horizon.clamp(Duration::from_secs(60), Duration::from_secs(600))
}

/// Compacts both tables on a connection of its own. Returns what was done to each, or
/// `Err` if the connection failed; the first refusal for want of permission is logged by
/// the caller.
async fn compact(
    cfg: &Config,
    connect: Duration,
    sql: &PruneStatements,
    horizon: Duration,
) -> crate::Result<Vec<super::compact::Compaction>> {
    let pg = PgConn::open(cfg, connect, &server_bounds(connect, true), None).await?;
    let bound = compaction_bound(horizon);
    let mut out = Vec::new();
    for t in &sql.tables {
        // The client's own limit a little past the server's, which answers first.
        let c = pg.bounded(
            "compacting",
            bound.mul_f64(1.3),
            super::compact::table(&pg.client, t, bound),
        );
        out.push(c.await?);
    }
    Ok(out)
}

/// The pruning task of one store, ended when the store is dropped.
pub(super) struct Pruner(tokio::task::JoinHandle<()>);

impl Pruner {
    /// Starts the task: a round at once, then every [`crate::horizon::prune_period`], errors ignored until the next (a store that
    /// cannot be reached now is tried again then; nothing here is needed for safety). Once
    /// earlier rounds deleted rows and a horizon has passed since the last compaction (or the
    /// start), the tables are compacted, before the round.
    pub(super) fn start(
        cfg: Config,
        connect: Duration,
        sql: PruneStatements,
        horizon: Duration,
    ) -> Pruner {
        Pruner(tokio::spawn(async move {
            let mut deleted = 0u64;
            let mut last = tokio::time::Instant::now();
            let mut warned = false;
            // The first round at once: a process that lives less than a period (a `run` of a
            // short job) still forgets what earlier processes left past the horizon.
            let mut first = true;
            loop {
                if !first {
                    tokio::time::sleep(crate::horizon::prune_period(horizon)).await;
                }
                first = false;
                // Compacted before this round deletes, so that the rows of earlier rounds
                // (a period ago at least) are dead to every transaction but those that have
                // run longer: a vacuum can only remove those.
                if deleted > 0 && last.elapsed() >= horizon {
                    last = tokio::time::Instant::now();
                    match compact(&cfg, connect, &sql, horizon).await {
                        Ok(done) => {
                            deleted = 0;
                            for d in done {
                                tracing::debug!("postgres lease table compaction: {d:?}");
                                if let (Some(super::compact::Skipped::NotPermitted(why)), false) =
                                    (&d.skipped, warned)
                                {
                                    warned = true;
                                    tracing::warn!(
                                        "postgres lease table compaction not permitted: {why}"
                                    );
                                }
                            }
                        }
                        Err(e) => tracing::debug!("postgres lease table compaction failed: {e}"),
                    }
                }
                deleted += round(&cfg, connect, &sql, horizon).await.unwrap_or(0);
            }
        }))
    }
}

impl Drop for Pruner {
    fn drop(&mut self) {
        self.0.abort();
    }
}
