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
//! otherwise set a server-side backstop for the rest of the transaction (`SET LOCAL`
//! `statement_timeout`, `lock_timeout`, `idle_in_transaction_session_timeout`): the lease's
//! window `W = ttl·(1 − drift) − margin`, the most time left a confirmed renewal gives it
//! (for a fixed deadline, [`Fencing::with_deadline`], the time left). A healthy lease's
//! deadline keeps moving and nothing can tell the server mid-statement, so the backstop does
//! not follow it: it ends a holder frozen inside the transaction (its row locks freed) about
//! when its lease can expire, and it ends a healthy holder's transaction only if one
//! statement, or the idle time between two, lasts longer than `W`. The checks also record
//! the deadline on the server's clock (`leasehold.deadline`, with the local deadline's mark
//! beside it). [`commit`] makes the last check on the server's own clock, against that
//! deadline moved by exactly as much as the renewals confirmed since moved the local one: it
//! refuses ([`Error::Lost`], rolled back) once it has passed, else bounds the idle time until
//! the `COMMIT` by what is left, so no effect commits after the deadline. A transaction the
//! database ended at its backstop is reported as [`Error::Lost`] by `check`, `commit` and,
//! for the caller's own statements, [`effect_error`]. What remains is in `docs/fencing.md`;
//! a `Fencing` without a deadline (`Fencing::new`, `from_env`, a session lock) is not bounded.
//!
//! For a table of your own, one statement suffices: `UPDATE t SET …, fence = $tok WHERE id =
//! $id AND fence <= $tok`. It cannot tell two holders with the same token apart, so it relies
//! on fences that never go back: [`crate::FenceRepeat::Never`], or
//! [`crate::FenceRepeat::ClockBacked`] while its clock assumption holds (every store here).
//!
// The links name their items by path: these docs are shown at `leasehold::fence::postgres`.
//! [`Fencing`]: crate::Fencing
//! [`commit`]: crate::fence::postgres::commit
//! [`effect_error`]: crate::fence::postgres::effect_error
//! [`Fencing::with_deadline`]: crate::Fencing::with_deadline

pub use super::compact::{Compaction, Skipped};
pub use tokio_postgres;
use tokio_postgres::GenericClient;
use tokio_postgres::Transaction;
use tokio_postgres::error::SqlState;

use crate::fence::Fencing;
use crate::fence::claim::{Installed, stale};
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
) -> std::result::Result<Option<Installed>, tokio_postgres::Error> {
    let row = c
        .query_opt(
            &format!(
                "SELECT lock_key, fence, owner FROM leasehold_fence WHERE resource = $1 {lock}"
            ),
            &[&resource],
        )
        .await?;
    Ok(row.map(|r| Installed {
        key: r.get(0),
        token: crate::FenceToken::from_i64(r.get(1)).get(),
        owner: r.get(2),
    }))
}

/// What a check sends to bound its transaction (see the module docs).
struct Bounds {
    /// The backstop, as `statement_timeout` and friends take it (`"1234ms"`).
    backstop: String,
    /// The time left, in seconds: the deadline recorded on the server's clock.
    left: f64,
    /// [`Fencing::deadline_mark`], recorded beside it.
    mark: String,
}

/// The transaction's bounds (see the module docs): `Ok(None)` for a fencing without a
/// deadline; `Err(Lost)` once it has passed.
fn bound(fencing: &Fencing) -> Result<Option<Bounds>> {
    let (Some(left), Some(backstop)) = (fencing.time_left(), fencing.backstop()) else {
        return Ok(None);
    };
    let ms = |d: std::time::Duration| {
        i64::try_from(d.as_millis()).unwrap_or(i64::MAX).min(i64::from(i32::MAX))
    };
    if ms(left) < 1 {
        return Err(fencing.time_is_up());
    }
    Ok(Some(Bounds {
        backstop: format!("{}ms", ms(backstop)),
        left: left.as_secs_f64(),
        mark: fencing.deadline_mark().unwrap_or_default().to_string(),
    }))
}

/// Sets the transaction's bounds (one statement, sent ahead of the check it guards).
const BOUND: &str = "SELECT set_config('statement_timeout', $1, true),
        set_config('lock_timeout', $1, true),
        set_config('idle_in_transaction_session_timeout', $1, true),
        set_config('leasehold.deadline', (clock_timestamp() + make_interval(secs => $2))::text, true),
        set_config('leasehold.mark', $3, true)";

/// Whether `e` is the database ending a bounded transaction: its session closed (the idle
/// backstop, 25P03, arrives as a closed connection), or a statement cancelled by the
/// statement backstop or a lock wait cut short by it.
fn ended(e: &tokio_postgres::Error) -> bool {
    e.is_closed()
        || [
            SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT,
            SqlState::QUERY_CANCELED,
            SqlState::LOCK_NOT_AVAILABLE,
            SqlState::ADMIN_SHUTDOWN,
        ]
        .iter()
        .any(|c| e.code() == Some(c))
}

/// `e` from a statement of a transaction guarded by `fencing`, as the holder should hear it.
fn guarded_err(what: &str, fencing: &Fencing, e: tokio_postgres::Error) -> Error {
    if fencing.time_left().is_some() && ended(&e) {
        fencing.ended_by_bound(&format!("fence {what}: {}", crate::backends::postgres::pg_text(&e)))
    } else {
        err(what, e)
    }
}

/// The error to report for one of the caller's own statements in a transaction checked with
/// `fencing` that failed: [`Error::Lost`] when the database ended the transaction at its
/// bound (the session closed, the statement cancelled by the backstop, a lock wait cut short
/// by it) and `fencing` carries a deadline, since the caller must then retry in a new
/// transaction if the lease is still held; [`Error::Backend`] with the driver's error
/// otherwise. Nothing of such a transaction was committed.
pub fn effect_error(fencing: &Fencing, e: tokio_postgres::Error) -> Error {
    guarded_err("effect", fencing, e)
}

/// Runs `then` after the bound statement, pipelined: one round trip.
async fn bounded<C, T, F>(c: &C, fencing: &Fencing, then: F) -> Result<T>
where
    C: GenericClient + Sync,
    F: std::future::Future<Output = Result<T>>,
{
    match bound(fencing)? {
        None => then.await,
        Some(b) => {
            let set = async {
                c.query_one(BOUND, &[&b.backstop, &b.left, &b.mark])
                    .await
                    .map_err(|e| guarded_err("bound", fencing, e))
            };
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
    crate::fence::claim::require_token(resource, fencing)?;
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
        .map_err(|e| guarded_err("claim", fencing, e))
    })
    .await?;
    let (past, done): (bool, bool) = (row.get(0), row.get(1));
    if past {
        return Err(crate::fence::claim::past_horizon(resource, fencing));
    }
    if done {
        Ok(())
    } else {
        let found =
            installed(c, resource, "").await.map_err(|e| guarded_err("read", fencing, e))?;
        Err(stale(resource, fencing, found))
    }
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

/// Gives back the bytes of the rows [`prune`] deleted: `VACUUM leasehold_fence` (the emptied
/// tail of the table returns to the system) and `REINDEX INDEX CONCURRENTLY` of each of its
/// indexes that is more than twice what its live rows need (a `DELETE` and a plain vacuum
/// leave an index's pages allocated for good). Call it on a connection outside any
/// transaction, after a `prune` that deleted many rows (say, more than the table keeps
/// live), at most once per horizon; each statement is bounded by `bound` on the server
/// (`statement_timeout` and `lock_timeout`, set for the call and restored after).
///
/// Safe at any time: no row changes, and claims and checks never wait for it (`VACUUM` and
/// `REINDEX CONCURRENTLY` hold `SHARE UPDATE EXCLUSIVE`; the vacuum takes the brief lock that
/// truncating needs only when it is free, and yields it to a waiting session). One session
/// compacts the table at a time: another gets [`Skipped::Busy`]. The role must own the table
/// (or be a member of its owner, a superuser, or hold `MAINTAIN` on PostgreSQL 17);
/// otherwise nothing is done and [`Compaction::skipped`] is [`Skipped::NotPermitted`], which
/// says so: the table then stays as large as its peak, its free pages reused by new claims.
/// It needs PostgreSQL 12 or later (`VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON)`, `REINDEX
/// CONCURRENTLY`): an older server answers an error, and nothing changes. An
/// error (timeout, lost connection) changes nothing a claim sees; a rebuild cut short leaves
/// an invalid `…_ccnew` index, which the next call drops. Returns the table's total size
/// before and after.
pub async fn compact(c: &tokio_postgres::Client, bound: std::time::Duration) -> Result<Compaction> {
    super::compact::table(c, "leasehold_fence", bound).await.map_err(|e| err("compact", e))
}

/// Succeeds iff `fencing` is exactly what `resource` has installed, and keeps it so until the
/// transaction ends (row lock `FOR SHARE`); otherwise [`Error::StaleFence`]; [`Error::Lost`]
/// once the lease's time is up (the transaction is bounded by it: see the module docs).
pub async fn check<C: GenericClient + Sync>(
    c: &C,
    resource: &str,
    fencing: &Fencing,
) -> Result<()> {
    let read = async {
        installed(c, resource, "FOR SHARE").await.map_err(|e| guarded_err("read", fencing, e))
    };
    let found = bounded(c, fencing, read).await?;
    crate::fence::claim::verify(resource, fencing, found)
}

/// The last check, on the server's clock, right before the commit: no row (so no commit)
/// once the deadline has passed; else the idle time until the `COMMIT` is bounded by what is
/// left. The deadline is the one the last `claim`/`check` recorded, moved by `$2 − mark`
/// (how far confirmed renewals moved the local deadline since; `$2` is NULL for a fixed
/// deadline, which nothing moves). `$1`: the time left in seconds as this process sees it,
/// used when no `claim` or `check` of this transaction recorded a deadline on the server.
const LAST_CHECK: &str =
    "SELECT set_config('idle_in_transaction_session_timeout', left_ms || 'ms', true)
    FROM (SELECT floor(extract(epoch FROM
            coalesce(nullif(current_setting('leasehold.deadline', true), '')::timestamptz
                       + make_interval(secs => greatest(0, ($2::float8
                           - nullif(current_setting('leasehold.mark', true), '')::float8)
                           / 1e6)),
                     clock_timestamp() + make_interval(secs => $1))
            - clock_timestamp()) * 1000)::bigint AS left_ms) t
    WHERE left_ms >= 1";

/// Commits a transaction that `claim` or `check` guarded with `fencing`: refused, and rolled
/// back, with [`Error::Lost`] once the lease's local deadline has passed, as this process
/// sees it or as the server's clock measures it from the deadline the checks recorded, moved
/// by the renewals confirmed since (see the module docs). A transaction the database already
/// ended at its bound is [`Error::Lost`] too. A fencing without a deadline commits as
/// `tx.commit()` does.
pub async fn commit(tx: Transaction<'_>, fencing: &Fencing) -> Result<()> {
    let bound = match bound(fencing) {
        Ok(b) => b,
        Err(e) => {
            let _ = tx.rollback().await;
            return Err(e);
        }
    };
    if let Some(b) = bound {
        let moved = fencing.renews().then(|| fencing.deadline_mark().unwrap_or_default() as f64);
        match tx.query_opt(LAST_CHECK, &[&b.left, &moved]).await {
            Ok(Some(_)) => {}
            Ok(None) => {
                let _ = tx.rollback().await;
                return Err(fencing.time_is_up());
            }
            Err(e) => {
                let _ = tx.rollback().await;
                return Err(guarded_err("commit", fencing, e));
            }
        }
    }
    tx.commit().await.map_err(|e| guarded_err("commit", fencing, e))
}
