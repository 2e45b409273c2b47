//! PostgreSQL fence table: `claim` and `check` inside the caller's transaction.
//!
//! ```no_run
//! # async fn demo(fencing: leasehold::fence::Fencing) -> leasehold::Result<()> {
//! use leasehold::fence::postgres::{self as fence, tokio_postgres};
//! let (mut db, conn) = tokio_postgres::connect("postgres://app@db/app", tokio_postgres::NoTls)
//!     .await.unwrap();
//! tokio::spawn(conn);
//! fence::install(&db).await?;
//! let tx = db.transaction().await.unwrap();
//! fence::claim(&tx, "invoices/2026-11", &fencing).await?;   // once, before the first effect
//! fence::check(&tx, "invoices/2026-11", &fencing).await?;   // with every effect, same transaction
//! tx.execute("UPDATE invoices SET sent = true WHERE month = '2026-11'", &[]).await.unwrap();
//! fence::commit(tx, &fencing).await?;                       // refused once the lease's time is up
//! # Ok(()) }
//! ```
//!
//! `check` reads the fence row `FOR SHARE`, so a successor's `claim` waits until the checked
//! transaction ends: the check and the effect commit together or not at all.
//!
//! **Bounded by the lease.** With a [`Fencing`] from [`crate::Lease::fencing`], `claim` and
//! `check` refuse at once ([`Error::Lost`]) once the lease's local deadline has passed, and
//! otherwise bound the rest of the transaction by the time left `T`:
//! `statement_timeout`, `lock_timeout` and `idle_in_transaction_session_timeout` are set to
//! `T` for the transaction (`SET LOCAL`), so a holder frozen inside it has its session ended
//! by the server, its row locks freed, near its deadline instead of blocking a successor's
//! `claim` for as long as the freeze lasts. [`commit`] makes the last check on the server's
//! own clock: it refuses ([`Error::Lost`], rolled back) once the deadline (recorded on the
//! server by `claim`/`check` as `leasehold.deadline`) has passed, else bounds the idle time
//! until the `COMMIT` by what is left, so no effect commits after the deadline. What remains
//! is in `docs/fencing.md`: the idle timer restarts with each statement the caller runs after
//! its last `check`, so a successor may wait that much past the deadline, and a `Fencing`
//! without a deadline (`Fencing::new`, `from_env`, a session lock) is not bounded.
//!
//! For a table of your own, one statement suffices: `UPDATE t SET …, fence = $tok WHERE id =
//! $id AND fence <= $tok`. It cannot tell two holders with the same token apart, so it relies
//! on fences that never go back: [`crate::FenceRepeat::Never`], or
//! [`crate::FenceRepeat::ClockBacked`] while its clock assumption holds (every store here).

pub use tokio_postgres;
use tokio_postgres::GenericClient;
use tokio_postgres::Transaction;
use tokio_postgres::error::SqlState;

use crate::fence::{Fencing, Installed, stale};
use crate::{Error, Result};

/// The fence table: one row per protected resource claimed within twice the horizon, and
/// the index [`prune`] finds the older ones by.
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS leasehold_fence (
    resource text PRIMARY KEY,
    lock_key text NOT NULL,
    fence    bigint NOT NULL,
    owner    text NOT NULL
);
CREATE INDEX IF NOT EXISTS leasehold_fence_by_fence ON leasehold_fence (fence)";

/// Rows [`prune`] deletes per statement.
const PRUNE_BATCH: i64 = 1000;

/// `$1` the horizon in µs, `$2` at most this many → rows deleted: claims of clock-backed
/// fences older than twice the horizon ([`crate::fence::rule::may_forget`]).
const PRUNE: &str = "WITH d AS (DELETE FROM leasehold_fence WHERE resource IN (
       SELECT resource FROM leasehold_fence
       WHERE fence >= 1000000000000000
         AND fence < (extract(epoch FROM clock_timestamp()) * 1000000)::bigint - 2 * $1::bigint
       ORDER BY fence LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING 1)
     SELECT count(*) FROM d";

fn err(what: &str, e: tokio_postgres::Error) -> Error {
    let text = crate::backends::postgres::pg_text(&e);
    let message =
        if e.code() == Some(&SqlState::UNDEFINED_TABLE) && text.contains("leasehold_fence") {
            format!(
                "fence {what}: the fence table leasehold_fence does not exist in this connection's \
             search_path ({text}); create it once, before the first claim, with \
             leasehold::fence::postgres::install(&client) (or run \
             leasehold::fence::postgres::SCHEMA)"
            )
        } else {
            format!("fence {what}: {text}")
        };
    Error::Backend { backend: "postgres", message, source: Some(e.into()) }
}

/// Whether `e` is PostgreSQL's "current transaction is aborted" (25P02): the echo of an
/// earlier statement's failure, never the error to report.
fn aborted(e: &Error) -> bool {
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<tokio_postgres::Error>())
        .is_some_and(|pg| pg.code() == Some(&SqlState::IN_FAILED_SQL_TRANSACTION))
}

fn token(f: &Fencing) -> i64 {
    f.token().as_i64()
}

/// Creates the fence table (in the first schema of `search_path`) if it is missing.
pub async fn install<C: GenericClient + Sync>(c: &C) -> Result<()> {
    c.batch_execute(SCHEMA).await.map_err(|e| err("install", e))
}

async fn installed<C: GenericClient + Sync>(
    c: &C,
    resource: &str,
    lock: &str,
) -> Result<Option<Installed>> {
    let row = c
        .query_opt(
            &format!(
                "SELECT lock_key, fence, owner FROM leasehold_fence WHERE resource = $1 {lock}"
            ),
            &[&resource],
        )
        .await
        .map_err(|e| err("read", e))?;
    Ok(row.map(|r| Installed {
        key: r.get(0),
        token: crate::FenceToken::from_i64(r.get(1)).get(),
        owner: r.get(2),
    }))
}

/// The transaction's bound from the time left (see the module docs): `Ok(None)` for a
/// fencing without a deadline, the statement otherwise; `Err(Lost)` once it has passed.
fn bound(fencing: &Fencing) -> Result<Option<(String, f64)>> {
    let Some(left) = fencing.time_left() else { return Ok(None) };
    let ms = i64::try_from(left.as_millis()).unwrap_or(i64::MAX).min(i64::from(i32::MAX));
    if ms < 1 {
        return Err(fencing.time_is_up());
    }
    Ok(Some((format!("{ms}ms"), ms as f64 / 1000.0)))
}

/// Sets the transaction's bounds (one statement, sent ahead of the check it guards).
const BOUND: &str = "SELECT set_config('statement_timeout', $1, true),
        set_config('lock_timeout', $1, true),
        set_config('idle_in_transaction_session_timeout', $1, true),
        set_config('leasehold.deadline', (clock_timestamp() + make_interval(secs => $2))::text, true)";

/// Runs `then` after the bound statement, pipelined: one round trip.
async fn bounded<C, T, F>(c: &C, fencing: &Fencing, then: F) -> Result<T>
where
    C: GenericClient + Sync,
    F: std::future::Future<Output = Result<T>>,
{
    match bound(fencing)? {
        None => then.await,
        Some((ms, secs)) => {
            let set =
                async { c.query_one(BOUND, &[&ms, &secs]).await.map_err(|e| err("bound", e)) };
            // Both are in flight: when both fail, the statement's own error (a missing
            // table, say) is the one that says what is wrong, not the other's 25P02.
            match tokio::join!(set, then) {
                (Ok(_), out) => out,
                (Err(set), Ok(_)) => Err(set),
                (Err(set), Err(out)) if aborted(&out) => Err(set),
                (Err(_), Err(out)) => Err(out),
            }
        }
    }
}

/// Installs `fencing` on `resource`: succeeds iff its fence is greater than the installed one,
/// or equal with the same owner, and the resource is unclaimed or guarded by the same key.
/// Otherwise [`Error::StaleFence`]; [`Error::Lost`] once the lease's time is up (the
/// transaction is bounded by it: see the module docs). Call inside the caller's transaction.
///
/// With the default horizon ([`crate::horizon::DEFAULT_HORIZON`]): see [`claim_within`].
pub async fn claim<C: GenericClient + Sync>(
    c: &C,
    resource: &str,
    fencing: &Fencing,
) -> Result<()> {
    claim_within(c, resource, fencing, crate::horizon::DEFAULT_HORIZON).await
}

/// [`claim`] on a resource whose table keeps a claim for twice `horizon`: a clock-backed
/// fence issued more than `horizon` ago (by the database's clock) is refused with
/// [`StaleReason::PastHorizon`](crate::StaleReason::PastHorizon), whatever is installed, so a
/// holder frozen past the horizon stays refused after [`prune`] forgot its resource's row.
/// Fences without an age (etcd revisions, ZooKeeper zxids: below
/// [`crate::horizon::CLOCK_FENCE_MIN`]) are never refused as old, and their rows are kept.
/// Use one horizon for a table; a holder must claim within the horizon of its grant.
pub async fn claim_within<C: GenericClient + Sync>(
    c: &C,
    resource: &str,
    fencing: &Fencing,
    horizon: std::time::Duration,
) -> Result<()> {
    crate::fence::require_token(resource, fencing)?;
    let h = crate::horizon::micros(horizon);
    let (key, tok, owner) = (fencing.key().as_str(), token(fencing), fencing.owner().to_string());
    let row = bounded(c, fencing, async {
        c.query_one(
            "WITH p AS (SELECT $3::bigint >= 1000000000000000
                        AND $3::bigint + $5::bigint
                            < (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS past),
                  i AS (INSERT INTO leasehold_fence AS f (resource, lock_key, fence, owner)
                        SELECT $1, $2, $3, $4 FROM p WHERE NOT p.past
                        ON CONFLICT (resource) DO UPDATE
                          SET fence = excluded.fence, owner = excluded.owner
                        WHERE f.lock_key = excluded.lock_key
                          AND (excluded.fence > f.fence
                               OR (excluded.fence = f.fence AND excluded.owner = f.owner))
                        RETURNING 1)
             SELECT (SELECT past FROM p), EXISTS (SELECT 1 FROM i)",
            &[&resource, &key, &tok, &owner, &h],
        )
        .await
        .map_err(|e| err("claim", e))
    })
    .await?;
    let (past, done): (bool, bool) = (row.get(0), row.get(1));
    if past {
        return Err(crate::fence::past_horizon(resource, fencing));
    }
    if done { Ok(()) } else { Err(stale(resource, fencing, installed(c, resource, "").await?)) }
}

/// Deletes the claims older than twice `horizon` (clock-backed fences only), in statements of
/// at most 1,000 rows each (each its own transaction: run it outside the caller's), until
/// none is left; returns how many. Call it from a maintenance task, e.g. every quarter of the
/// horizon: the table then holds the resources claimed within about twice the horizon. Safe
/// at any time: a fence a deleted row would have refused is smaller than the row's, so older
/// than the horizon, and [`claim_within`] refuses it. (Claims do not prune as they go: the
/// deleted rows would stay locked until the caller's commit, and two such transactions
/// claiming each other's old resources would deadlock.)
pub async fn prune<C: GenericClient + Sync>(c: &C, horizon: std::time::Duration) -> Result<u64> {
    let h = crate::horizon::micros(horizon);
    let mut total = 0;
    loop {
        let row = c.query_one(PRUNE, &[&h, &PRUNE_BATCH]).await.map_err(|e| err("prune", e))?;
        let n: i64 = row.get(0);
        total += n as u64;
        if n < PRUNE_BATCH {
            return Ok(total);
        }
    }
}

/// Succeeds iff `fencing` is exactly what `resource` has installed, and keeps it so until the
/// transaction ends (row lock `FOR SHARE`); otherwise [`Error::StaleFence`]; [`Error::Lost`]
/// once the lease's time is up (the transaction is bounded by it: see the module docs).
pub async fn check<C: GenericClient + Sync>(
    c: &C,
    resource: &str,
    fencing: &Fencing,
) -> Result<()> {
    let found = bounded(c, fencing, installed(c, resource, "FOR SHARE")).await?;
    crate::fence::verify(resource, fencing, found)
}

/// The last check, on the server's clock, right before the commit: no row (so no commit)
/// once the deadline has passed; else the idle time until the `COMMIT` is bounded by what is
/// left. `$1`: the time left in seconds as this process sees it, used when no `claim` or
/// `check` of this transaction recorded the deadline on the server.
const LAST_CHECK: &str =
    "SELECT set_config('idle_in_transaction_session_timeout', left_ms || 'ms', true)
    FROM (SELECT floor(extract(epoch FROM
            coalesce(nullif(current_setting('leasehold.deadline', true), '')::timestamptz,
                     clock_timestamp() + make_interval(secs => $1))
            - clock_timestamp()) * 1000)::bigint AS left_ms) t
    WHERE left_ms >= 1";

/// Commits a transaction that `claim` or `check` guarded with `fencing`: refused, and rolled
/// back, with [`Error::Lost`] once the lease's local deadline has passed, as this process
/// sees it or as the server's clock measures it from the deadline the checks recorded (see
/// the module docs). A fencing without a deadline commits as `tx.commit()` does.
pub async fn commit(tx: Transaction<'_>, fencing: &Fencing) -> Result<()> {
    let bound = match bound(fencing) {
        Ok(b) => b,
        Err(e) => {
            let _ = tx.rollback().await;
            return Err(e);
        }
    };
    if let Some((_, secs)) = bound {
        match tx.query_opt(LAST_CHECK, &[&secs]).await {
            Ok(Some(_)) => {}
            Ok(None) => {
                let _ = tx.rollback().await;
                return Err(fencing.time_is_up());
            }
            Err(e) => {
                let _ = tx.rollback().await;
                return Err(err("commit", e));
            }
        }
    }
    tx.commit().await.map_err(|e| err("commit", e))
}
