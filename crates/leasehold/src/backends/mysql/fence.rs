//! MySQL / MariaDB fence table: `claim` and `check` inside the caller's transaction.
//!
//! ```no_run
//! # async fn demo(fencing: leasehold::fence::Fencing) -> leasehold::Result<()> {
//! use leasehold::fence::mysql::{self as fence, mysql_async};
//! use mysql_async::prelude::Queryable;
//! let mut db = mysql_async::Conn::from_url("mysql://app@db/app").await.unwrap();
//! fence::install(&mut db).await?;
//! let mut tx = db.start_transaction(Default::default()).await.unwrap();
//! fence::claim(&mut tx, "invoices/2026-11", &fencing).await?;   // before the first effect
//! fence::check(&mut tx, "invoices/2026-11", &fencing).await?;   // with every effect
//! tx.query_drop("UPDATE invoices SET sent = 1 WHERE month = '2026-11'").await.unwrap();
//! fence::commit(tx, &fencing).await?;                          // refused once the lease's time is up
//! # Ok(()) }
//! ```
//!
//! `claim` reads the fence row `FOR UPDATE` and `check` reads it `LOCK IN SHARE MODE`, so a
//! check and its effect commit before any successor's claim can land. InnoDB only.
//!
//! **Bounded by the lease.** With a [`Fencing`] from [`crate::Lease::fencing`], `claim` and
//! `check` refuse at once ([`Error::Lost`]) once the lease's local deadline has passed, and
//! otherwise bound the connection by the time left `T`, in the whole seconds the server
//! counts in (`T` rounded up, at least 1 s): `wait_timeout` (the server closes a connection
//! idle that long, which rolls its transaction back and frees its row locks, so a holder
//! frozen inside the transaction stops blocking a successor's `claim`) and
//! `innodb_lock_wait_timeout`. They also record the deadline on the server's clock
//! (`@leasehold_deadline`, `UTC_TIMESTAMP(6)` + `T`). [`commit`] sends the last check and the
//! `COMMIT` in one request, so the server itself refuses to commit once its clock has passed
//! the deadline ([`Error::Lost`], rolled back), and then puts the connection's timeouts back.
//! These are session variables: end a bounded transaction with [`commit`] or [`rollback`],
//! which restore them; a connection whose bounded transaction ended otherwise keeps the
//! short `wait_timeout` (the server closes it once idle that long) until the next `commit` or
//! `rollback` here. What remains is in `docs/fencing.md`.
//!
// The links name their items by path: these docs are shown at `leasehold::fence::mysql`.
//! [`Fencing`]: crate::Fencing
//! [`commit`]: crate::fence::mysql::commit
//! [`rollback`]: crate::fence::mysql::rollback

pub use mysql_async;
use mysql_async::Transaction;
use mysql_async::prelude::Queryable;

use crate::fence::Fencing;
use crate::fence::claim::{Installed, may_claim, stale};
use crate::{Error, Result};

/// The fence table: one row per protected resource.
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS leasehold_fence (
    resource VARBINARY(512) NOT NULL PRIMARY KEY,
    lock_key VARBINARY(512) NOT NULL,
    fence    BIGINT UNSIGNED NOT NULL,
    owner    VARBINARY(64) NOT NULL
) ENGINE = InnoDB";

/// MySQL's "Table '…' doesn't exist".
const NO_SUCH_TABLE: u16 = 1146;

fn err(what: &str, e: mysql_async::Error) -> Error {
    let message = match &e {
        mysql_async::Error::Server(s)
            if s.code == NO_SUCH_TABLE && s.message.contains("leasehold_fence") =>
        {
            format!(
                "fence {what}: the fence table leasehold_fence does not exist in this \
                 connection's database ({e}); create it once, before the first claim, with \
                 leasehold::fence::mysql::install(&mut conn) (or run \
                 leasehold::fence::mysql::SCHEMA)"
            )
        }
        _ => format!("fence {what}: {e}"),
    };
    Error::Backend { backend: "mysql", message, source: Some(e.into()) }
}

/// Creates the fence table if it is missing.
pub async fn install<Q: Queryable>(q: &mut Q) -> Result<()> {
    q.query_drop(SCHEMA).await.map_err(|e| err("install", e))
}

async fn installed<Q: Queryable>(
    q: &mut Q,
    resource: &str,
    lock: &str,
) -> Result<Option<Installed>> {
    let row: Option<(Vec<u8>, u64, Vec<u8>)> = q
        .exec_first(
            format!("SELECT lock_key, fence, owner FROM leasehold_fence WHERE resource = ? {lock}"),
            (resource.as_bytes(),),
        )
        .await
        .map_err(|e| err("read", e))?;
    Ok(row.map(|(k, t, o)| Installed {
        key: String::from_utf8_lossy(&k).into_owned(),
        token: t,
        owner: String::from_utf8_lossy(&o).into_owned(),
    }))
}

/// Bounds the connection by the time left (see the module docs); nothing without a deadline,
/// [`Error::Lost`] once it has passed.
async fn bound<Q: Queryable>(q: &mut Q, fencing: &Fencing) -> Result<()> {
    let Some(left) = fencing.time_left() else { return Ok(()) };
    if left < std::time::Duration::from_millis(1) {
        return Err(fencing.time_is_up());
    }
    let secs = left.as_micros().div_ceil(1_000_000).clamp(1, 31_536_000);
    let us = left.as_micros().min(u128::from(u64::MAX));
    // The first bound of a connection keeps what it replaces, for `commit`/`rollback`.
    q.query_drop(format!(
        "SET @leasehold_wait_timeout = IFNULL(@leasehold_wait_timeout, @@SESSION.wait_timeout),
             @leasehold_lock_wait = IFNULL(@leasehold_lock_wait, @@SESSION.innodb_lock_wait_timeout),
             SESSION wait_timeout = {secs}, SESSION innodb_lock_wait_timeout = {secs},
             @leasehold_deadline = UTC_TIMESTAMP(6) + INTERVAL {us} MICROSECOND"
    ))
    .await
    .map_err(|e| err("bound", e))
}

/// Puts back the timeouts the first bound replaced, and forgets the deadline.
const RESTORE: &str = "SET SESSION wait_timeout =
        CAST(IFNULL(@leasehold_wait_timeout, @@SESSION.wait_timeout) AS UNSIGNED),
    SESSION innodb_lock_wait_timeout =
        CAST(IFNULL(@leasehold_lock_wait, @@SESSION.innodb_lock_wait_timeout) AS UNSIGNED),
    @leasehold_wait_timeout = NULL, @leasehold_lock_wait = NULL, @leasehold_deadline = NULL";

/// MySQL's "Subquery returns more than 1 row": what the last check raises once the server's
/// clock has passed the deadline.
const PAST_DEADLINE: u16 = 1242;

/// Commits a transaction that `claim` or `check` guarded with `fencing`. The server compares
/// its clock with the recorded deadline and commits in the same request; past it nothing is
/// committed: rolled back, [`Error::Lost`]. Then the connection's timeouts are put back. A
/// fencing without a deadline commits (and restores) all the same.
pub async fn commit(mut tx: Transaction<'_>, fencing: &Fencing) -> Result<()> {
    let left = fencing.time_left();
    if left.is_some_and(|l| l < std::time::Duration::from_millis(1)) {
        return rollback_with(tx, fencing.time_is_up()).await;
    }
    // Deadline recorded by no check of this transaction: take this process's time left.
    let us = left.map_or(0, |l| l.as_micros().min(u128::from(u64::MAX)));
    let check = match left {
        None => "DO 0".to_owned(),
        Some(_) => format!(
            "SET @leasehold_deadline = IFNULL(@leasehold_deadline,
                 UTC_TIMESTAMP(6) + INTERVAL {us} MICROSECOND);
             SELECT IF(UTC_TIMESTAMP(6) < @leasehold_deadline, 1, (SELECT 1 UNION ALL SELECT 2))"
        ),
    };
    match tx.query_drop(format!("{check}; COMMIT; {RESTORE}")).await {
        // Committed by the batch; this only settles the driver's transaction state.
        Ok(()) => tx.commit().await.map_err(|e| err("commit", e)),
        Err(mysql_async::Error::Server(e)) if e.code == PAST_DEADLINE => {
            rollback_with(tx, fencing.time_is_up()).await
        }
        Err(e) => {
            let _ = tx.rollback().await;
            Err(err("commit", e))
        }
    }
}

/// Rolls back a transaction `claim` or `check` guarded, and puts the connection's timeouts
/// back.
pub async fn rollback(mut tx: Transaction<'_>) -> Result<()> {
    tx.query_drop(format!("ROLLBACK; {RESTORE}")).await.map_err(|e| err("rollback", e))?;
    tx.rollback().await.map_err(|e| err("rollback", e))
}

async fn rollback_with(tx: Transaction<'_>, e: Error) -> Result<()> {
    let _ = rollback(tx).await;
    Err(e)
}

/// Installs `fencing` on `resource`: succeeds iff its fence is greater than the installed one,
/// or equal with the same owner, and the resource is unclaimed or guarded by the same key.
/// Otherwise [`Error::StaleFence`]; [`Error::Lost`] once the lease's time is up (the
/// connection is bounded by it: see the module docs). Call inside the caller's transaction.
pub async fn claim<Q: Queryable>(q: &mut Q, resource: &str, fencing: &Fencing) -> Result<()> {
    crate::fence::claim::require_token(resource, fencing)?;
    bound(q, fencing).await?;
    let current = installed(q, resource, "FOR UPDATE").await?;
    if !may_claim(current.as_ref(), fencing) {
        return Err(stale(resource, fencing, current));
    }
    q.exec_drop(
        "INSERT INTO leasehold_fence (resource, lock_key, fence, owner) VALUES (?, ?, ?, ?)
         ON DUPLICATE KEY UPDATE fence = VALUES(fence), owner = VALUES(owner)",
        (
            resource.as_bytes(),
            fencing.key().as_str().as_bytes(),
            fencing.token().get(),
            fencing.owner().to_string(),
        ),
    )
    .await
    .map_err(|e| err("claim", e))
}

/// Succeeds iff `fencing` is exactly what `resource` has installed, and keeps it so until the
/// transaction ends (`LOCK IN SHARE MODE`); otherwise [`Error::StaleFence`]; [`Error::Lost`]
/// once the lease's time is up (the connection is bounded by it: see the module docs).
pub async fn check<Q: Queryable>(q: &mut Q, resource: &str, fencing: &Fencing) -> Result<()> {
    bound(q, fencing).await?;
    crate::fence::claim::verify(
        resource,
        fencing,
        installed(q, resource, "LOCK IN SHARE MODE").await?,
    )
}
