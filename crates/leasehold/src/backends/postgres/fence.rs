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
//!
// The links name their items by path: these docs are shown at `leasehold::fence::postgres`.
//! [`Fencing`]: crate::Fencing
//! [`commit`]: crate::fence::postgres::commit

pub use tokio_postgres;
use tokio_postgres::GenericClient;
use tokio_postgres::Transaction;
use tokio_postgres::error::SqlState;

use crate::fence::Fencing;
use crate::fence::claim::{Installed, stale};
use crate::{Error, Result};

/// The fence table: one row per protected resource.
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS leasehold_fence (
    resource text PRIMARY KEY,
    lock_key text NOT NULL,
    fence    bigint NOT NULL,
    owner    text NOT NULL
)";

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
pub async fn claim<C: GenericClient + Sync>(
    c: &C,
    resource: &str,
    fencing: &Fencing,
) -> Result<()> {
    crate::fence::claim::require_token(resource, fencing)?;
    let n = bounded(c, fencing, async {
        c.execute(
            "INSERT INTO leasehold_fence AS f (resource, lock_key, fence, owner)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (resource) DO UPDATE SET fence = excluded.fence, owner = excluded.owner
             WHERE f.lock_key = excluded.lock_key
               AND (excluded.fence > f.fence
                    OR (excluded.fence = f.fence AND excluded.owner = f.owner))",
            &[&resource, &fencing.key().as_str(), &token(fencing), &fencing.owner().to_string()],
        )
        .await
        .map_err(|e| err("claim", e))
    })
    .await?;
    if n == 1 { Ok(()) } else { Err(stale(resource, fencing, installed(c, resource, "").await?)) }
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
    crate::fence::claim::verify(resource, fencing, found)
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
