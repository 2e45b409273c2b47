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
//! otherwise bound the connection by a backstop, in the whole seconds the server counts in
//! (rounded up, at least 1 s): the lease's window `W = ttl·(1 − drift) − margin`, the most
//! time left a confirmed renewal gives it (for a fixed deadline, the time left).
//! `wait_timeout` (the server closes a connection idle that long, which rolls its
//! transaction back and frees its row locks, so a holder frozen inside the transaction stops
//! blocking a successor's `claim` about when its lease can expire) and
//! `innodb_lock_wait_timeout` are set to it, so a healthy holder's transaction is ended only
//! if it sits idle longer than `W`. They also record the deadline on the server's clock
//! (`@leasehold_deadline`, `UTC_TIMESTAMP(6)` + the time left, with the local deadline's mark
//! in `@leasehold_mark`). [`commit`] sends the last check and the `COMMIT` in one request, so
//! the server itself refuses to commit once its clock has passed that deadline, moved by
//! exactly as much as renewals confirmed since moved the local one ([`Error::Lost`], rolled
//! back), and then puts the connection's timeouts back. A connection the server closed at
//! the backstop is reported as [`Error::Lost`] by `check`, `commit` and, for the caller's own
//! statements, [`effect_error`].
//! These are session variables: end a bounded transaction with [`commit`] or [`rollback`],
//! which restore them; a connection whose bounded transaction ended otherwise keeps the
//! short `wait_timeout` (the server closes it once idle that long) until the next `commit` or
//! `rollback` here. What remains is in `docs/fencing.md`.
//!
// The links name their items by path: these docs are shown at `leasehold::fence::mysql`.
//! [`Fencing`]: crate::Fencing
//! [`commit`]: crate::fence::mysql::commit
//! [`rollback`]: crate::fence::mysql::rollback
//! [`effect_error`]: crate::fence::mysql::effect_error

pub use mysql_async;
use mysql_async::Transaction;
use mysql_async::prelude::Queryable;

use crate::fence::Fencing;
use crate::fence::claim::{Installed, may_claim, stale};
use crate::{Error, Result};

/// The fence table: one row per protected resource claimed within twice the horizon, and
/// the index [`prune`] finds the older ones by.
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS leasehold_fence (
    resource VARBINARY(512) NOT NULL PRIMARY KEY,
    lock_key VARBINARY(512) NOT NULL,
    fence    BIGINT UNSIGNED NOT NULL,
    owner    VARBINARY(64) NOT NULL,
    KEY leasehold_fence_by_fence (fence)
) ENGINE = InnoDB";

/// MySQL's "Duplicate key name": the index is there already.
const DUP_KEY_NAME: u16 = 1061;

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

/// Creates the fence table if it is missing, and the index [`prune`] uses on a table made
/// by a version without it.
pub async fn install<Q: Queryable>(q: &mut Q) -> Result<()> {
    q.query_drop(SCHEMA).await.map_err(|e| err("install", e))?;
    match q.query_drop("ALTER TABLE leasehold_fence ADD KEY leasehold_fence_by_fence (fence)").await
    {
        Err(mysql_async::Error::Server(e)) if e.code == DUP_KEY_NAME => Ok(()),
        r => r.map_err(|e| err("install", e)),
    }
}

async fn installed<Q: Queryable>(
    q: &mut Q,
    resource: &str,
    lock: &str,
) -> std::result::Result<Option<Installed>, mysql_async::Error> {
    let row: Option<(Vec<u8>, u64, Vec<u8>)> = q
        .exec_first(
            format!("SELECT lock_key, fence, owner FROM leasehold_fence WHERE resource = ? {lock}"),
            (resource.as_bytes(),),
        )
        .await?;
    Ok(row.map(|(k, t, o)| Installed {
        key: String::from_utf8_lossy(&k).into_owned(),
        token: t,
        owner: String::from_utf8_lossy(&o).into_owned(),
    }))
}

/// Bounds the connection by the lease's backstop (see the module docs); nothing without a
/// deadline, [`Error::Lost`] once it has passed.
async fn bound<Q: Queryable>(q: &mut Q, fencing: &Fencing) -> Result<()> {
    let (Some(left), Some(backstop)) = (fencing.time_left(), fencing.backstop()) else {
        return Ok(());
    };
    if left < std::time::Duration::from_millis(1) {
        return Err(fencing.time_is_up());
    }
    let secs = backstop.as_micros().div_ceil(1_000_000).clamp(1, 31_536_000);
    let us = left.as_micros().min(u128::from(u64::MAX));
    let mark = fencing.deadline_mark().unwrap_or_default();
    // The first bound of a connection keeps what it replaces, for `commit`/`rollback`.
    q.query_drop(format!(
        "SET @leasehold_wait_timeout = IFNULL(@leasehold_wait_timeout, @@SESSION.wait_timeout),
             @leasehold_lock_wait = IFNULL(@leasehold_lock_wait, @@SESSION.innodb_lock_wait_timeout),
             SESSION wait_timeout = {secs}, SESSION innodb_lock_wait_timeout = {secs},
             @leasehold_deadline = UTC_TIMESTAMP(6) + INTERVAL {us} MICROSECOND,
             @leasehold_mark = {mark}"
    ))
    .await
    .map_err(|e| guarded_err("bound", fencing, e))
}

/// MySQL 8's "disconnected by the server because of inactivity", the lock wait timeout, and
/// the lost-connection client codes.
const ENDED: [u16; 4] = [4031, 1205, 2006, 2013];

/// Whether `e` is the server ending a bounded connection: closed (its idle backstop, seen as
/// a closed or reset connection on the next request) or a lock wait cut short by it.
fn ended(e: &mysql_async::Error) -> bool {
    match e {
        mysql_async::Error::Io(_) => true,
        mysql_async::Error::Driver(mysql_async::DriverError::ConnectionClosed) => true,
        mysql_async::Error::Server(s) => ENDED.contains(&s.code),
        _ => false,
    }
}

/// `e` from a statement of a transaction guarded by `fencing`, as the holder should hear it.
fn guarded_err(what: &str, fencing: &Fencing, e: mysql_async::Error) -> Error {
    if fencing.time_left().is_some() && ended(&e) {
        fencing.ended_by_bound(&format!("fence {what}: {e}"))
    } else {
        err(what, e)
    }
}

/// The error to report for one of the caller's own statements in a transaction checked with
/// `fencing` that failed: [`Error::Lost`] when the server ended the connection at its bound
/// (closed after idling past the backstop, or a lock wait cut short by it) and `fencing`
/// carries a deadline, since the caller must then retry in a new transaction, on a new
/// connection, if the lease is still held; [`Error::Backend`] with the driver's error
/// otherwise. Nothing of such a transaction was committed.
pub fn effect_error(fencing: &Fencing, e: mysql_async::Error) -> Error {
    guarded_err("effect", fencing, e)
}

/// Puts back the timeouts the first bound replaced, and forgets the deadline.
const RESTORE: &str = "SET SESSION wait_timeout =
        CAST(IFNULL(@leasehold_wait_timeout, @@SESSION.wait_timeout) AS UNSIGNED),
    SESSION innodb_lock_wait_timeout =
        CAST(IFNULL(@leasehold_lock_wait, @@SESSION.innodb_lock_wait_timeout) AS UNSIGNED),
    @leasehold_wait_timeout = NULL, @leasehold_lock_wait = NULL, @leasehold_deadline = NULL,
    @leasehold_mark = NULL";

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
    // How far renewals confirmed since the last check moved the local deadline; a fixed
    // deadline does not move.
    let moved = match fencing.deadline_mark() {
        Some(m) if fencing.renews() => format!("GREATEST(0, {m} - IFNULL(@leasehold_mark, {m}))"),
        _ => "0".to_owned(),
    };
    let check = match left {
        None => "DO 0".to_owned(),
        Some(_) => format!(
            "SET @leasehold_deadline = IFNULL(@leasehold_deadline + INTERVAL {moved} MICROSECOND,
                 UTC_TIMESTAMP(6) + INTERVAL {us} MICROSECOND);
             SELECT IF(UTC_TIMESTAMP(6) < @leasehold_deadline, 1, (SELECT 1 UNION ALL SELECT 2))"
        ),
    };
    match tx.query_drop(format!("{check}; COMMIT; {RESTORE}")).await {
        // Committed by the batch; this only settles the driver's transaction state.
        Ok(()) => tx.commit().await.map_err(|e| guarded_err("commit", fencing, e)),
        Err(mysql_async::Error::Server(e)) if e.code == PAST_DEADLINE => {
            rollback_with(tx, fencing.time_is_up()).await
        }
        Err(e) => {
            let _ = tx.rollback().await;
            Err(guarded_err("commit", fencing, e))
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
///
/// With the default horizon ([`crate::horizon::DEFAULT_HORIZON`]): see [`claim_within`].
pub async fn claim<Q: Queryable>(q: &mut Q, resource: &str, fencing: &Fencing) -> Result<()> {
    claim_within(q, resource, fencing, crate::horizon::DEFAULT_HORIZON).await
}

/// [`claim`] on a resource whose table keeps a claim for twice `horizon`: a clock-backed
/// fence issued more than `horizon` ago (by the database's clock, `UTC_TIMESTAMP(6)`) is
/// refused with [`StaleReason::PastHorizon`](crate::StaleReason::PastHorizon), whatever is
/// installed, so a holder frozen past the horizon stays refused after [`prune`] forgot its
/// resource's row. Fences without an age (etcd revisions, ZooKeeper zxids: below
/// [`crate::horizon::CLOCK_FENCE_MIN`]) are never refused as old, and their rows are kept.
/// Use one horizon for a table; a holder must claim within the horizon of its grant.
pub async fn claim_within<Q: Queryable>(
    q: &mut Q,
    resource: &str,
    fencing: &Fencing,
    horizon: std::time::Duration,
) -> Result<()> {
    crate::fence::claim::require_token(resource, fencing)?;
    bound(q, fencing).await?;
    let token = fencing.token().get();
    if token >= crate::horizon::CLOCK_FENCE_MIN {
        let now: Option<i64> = q
            .query_first(format!("SELECT {}", super::CLOCK_US))
            .await
            .map_err(|e| guarded_err("read the clock", fencing, e))?;
        let now = u64::try_from(now.unwrap_or(0)).unwrap_or(0);
        let h = crate::horizon::micros(horizon) as u64;
        if crate::fence::rule::past_horizon(token, now, h) {
            return Err(crate::fence::claim::past_horizon(resource, fencing));
        }
    }
    let current =
        installed(q, resource, "FOR UPDATE").await.map_err(|e| guarded_err("read", fencing, e))?;
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
    .map_err(|e| guarded_err("claim", fencing, e))
}

/// Deletes the claims older than twice `horizon` (clock-backed fences only, by the database's
/// clock), at most 1,000 rows per transaction (each its own: run it on a connection with no
/// transaction of the caller's open), until none is left; returns how many. Rows a claim in
/// flight has locked are skipped (`SKIP LOCKED`, MySQL 8 and MariaDB 10.6 on; an older
/// server waits for them, bounded by its lock wait timeout). Call it from a maintenance task,
/// e.g. every quarter of the horizon: the table then holds the resources claimed within about
/// twice the horizon. Safe at any time: a fence a deleted row would have refused is smaller
/// than the row's, so older than the horizon, and [`claim_within`] refuses it. (Claims do not
/// prune as they go: the deleted rows would stay locked until the caller's commit, and two
/// such transactions claiming each other's old resources would deadlock.)
pub async fn prune(conn: &mut mysql_async::Conn, horizon: std::time::Duration) -> Result<u64> {
    use super::prune::{BATCH, SkipLocked, Sweep, batch};
    let h = crate::horizon::micros(horizon);
    let sweep = Sweep {
        what: "pruning the fence table",
        select: format!(
            "SELECT resource FROM leasehold_fence
             WHERE fence >= {min} AND fence < {clock} - 2 * {h}
             ORDER BY fence LIMIT {BATCH} FOR UPDATE",
            min = crate::horizon::CLOCK_FENCE_MIN,
            clock = super::CLOCK_US
        ),
        params: vec![],
        deletes: vec!["DELETE FROM leasehold_fence WHERE resource IN".into()],
        free_under: None,
    };
    let skip = SkipLocked::default();
    let mut total = 0u64;
    loop {
        let n = batch(conn, &sweep, &skip).await?;
        total += n as u64;
        if n < BATCH {
            return Ok(total);
        }
    }
}

/// Succeeds iff `fencing` is exactly what `resource` has installed, and keeps it so until the
/// transaction ends (`LOCK IN SHARE MODE`); otherwise [`Error::StaleFence`]; [`Error::Lost`]
/// once the lease's time is up (the connection is bounded by it: see the module docs).
pub async fn check<Q: Queryable>(q: &mut Q, resource: &str, fencing: &Fencing) -> Result<()> {
    bound(q, fencing).await?;
    let found = installed(q, resource, "LOCK IN SHARE MODE")
        .await
        .map_err(|e| guarded_err("read", fencing, e))?;
    crate::fence::claim::verify(resource, fencing, found)
}
