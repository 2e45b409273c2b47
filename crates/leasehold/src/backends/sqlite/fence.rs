//! SQLite fence table: `claim` and `check` inside the caller's transaction.
//!
//! ```
//! # fn main() -> leasehold::Result<()> {
//! use leasehold::fence::{Fencing, sqlite};
//! use leasehold::fence::sqlite::rusqlite::{Connection, TransactionBehavior};
//! # use leasehold::{FenceToken, Key, OwnerToken};
//! let mut db = Connection::open_in_memory().unwrap();
//! sqlite::install(&db)?;
//! db.execute_batch("CREATE TABLE balance (id TEXT PRIMARY KEY, amount INTEGER)").unwrap();
//! # let fencing = Fencing::new(Key::new("acct:7")?, FenceToken::new(3), OwnerToken::generate()?);
//! // `fencing` comes from `lease.fencing()` or `Fencing::from_env()`.
//! let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
//! sqlite::claim(&tx, "balance/acct:7", &fencing)?;      // once, before the first effect
//! sqlite::check(&tx, "balance/acct:7", &fencing)?;      // with every effect, same transaction
//! tx.execute("INSERT OR REPLACE INTO balance VALUES ('acct:7', 100)", []).unwrap();
//! sqlite::commit(tx, &fencing)?;                        // refused once the lease's time is up
//! # Ok(()) }
//! ```
//!
//! **Bounded by the lease, as far as an embedded file can be.** With a [`Fencing`] from
//! [`crate::Lease::fencing`], `claim`, `check` and [`commit`] refuse ([`crate::Error::Lost`];
//! `commit` rolls back) once the lease's local deadline has passed, so a holder that resumes
//! after a freeze inside its transaction does not commit. There is no server to end the
//! transaction of a process frozen while it holds the write lock: other writers of the file,
//! a successor's `claim` among them, wait (up to their `busy_timeout`) until it resumes and
//! rolls back, or dies. A freeze after `commit`'s check and before SQLite writes the commit
//! is not caught. `docs/fencing.md` has what remains.
//!
//! Use `BEGIN IMMEDIATE` transactions (as above) so the check and the effect hold the write
//! lock together. For a table of your own, the one-statement pattern
//! `UPDATE t SET …, fence = ?tok WHERE id = ?id AND fence <= ?tok` also works, with stores
//! whose fences never go back ([`crate::FenceRepeat::Never`], or
//! [`crate::FenceRepeat::ClockBacked`] while its clock assumption holds): it cannot tell two
//! holders with the same token apart, and needs none to exist.
//!
// The links name their items by path: these docs are shown at `leasehold::fence::sqlite`.
//! [`Fencing`]: crate::Fencing
//! [`commit`]: crate::fence::sqlite::commit

pub use rusqlite;
use rusqlite::{Connection, OptionalExtension, Transaction, params};

use crate::Result;
use crate::backends::sqlite::SqlExt;
use crate::fence::Fencing;
use crate::fence::claim::{Installed, stale};

/// The fence table: one row per protected resource claimed within twice the horizon, and
/// the index [`prune`] finds the older ones by.
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS leasehold_fence (
    resource TEXT PRIMARY KEY NOT NULL,
    lock_key TEXT NOT NULL,
    fence    INTEGER NOT NULL,
    owner    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS leasehold_fence_by_fence ON leasehold_fence (fence)";

/// This machine's clock in µs since 1970: the resource's clock (the file is on this machine).
fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// Creates the fence table if it is missing.
pub fn install(conn: &Connection) -> Result<()> {
    conn.execute_batch(SCHEMA).sql()
}

fn installed(conn: &Connection, resource: &str) -> Result<Option<Installed>> {
    conn.query_row(
        "SELECT lock_key, fence, owner FROM leasehold_fence WHERE resource = ?1",
        [resource],
        |r| {
            Ok(Installed {
                key: r.get(0)?,
                token: crate::FenceToken::from_i64(r.get(1)?).get(),
                owner: r.get(2)?,
            })
        },
    )
    .optional()
    .sql()
}

fn token(f: &Fencing) -> i64 {
    f.token().as_i64()
}

/// [`crate::Error::Lost`] once the lease `fencing` came from is out of time.
fn in_time(fencing: &Fencing) -> Result<()> {
    match fencing.time_left() {
        Some(left) if left.is_zero() => Err(fencing.time_is_up()),
        _ => Ok(()),
    }
}

/// Installs `fencing` on `resource`: succeeds iff its fence is greater than the installed one,
/// or equal with the same owner, and the resource is unclaimed or guarded by the same key.
/// Otherwise [`crate::Error::StaleFence`]; [`crate::Error::Lost`] once the lease's time is
/// up. Call inside the caller's transaction.
///
/// With the default horizon ([`crate::horizon::DEFAULT_HORIZON`]): see [`claim_within`].
pub fn claim(conn: &Connection, resource: &str, fencing: &Fencing) -> Result<()> {
    claim_within(conn, resource, fencing, crate::horizon::DEFAULT_HORIZON)
}

/// [`claim`] on a resource whose table keeps a claim for twice `horizon`: a clock-backed
/// fence issued more than `horizon` ago (by this machine's clock) is refused with
/// [`StaleReason::PastHorizon`](crate::StaleReason::PastHorizon), whatever is installed, so a
/// holder frozen past the horizon stays refused after [`prune`] forgot its resource's row.
/// Fences without an age (below [`crate::horizon::CLOCK_FENCE_MIN`]) are never refused as old.
pub fn claim_within(
    conn: &Connection,
    resource: &str,
    fencing: &Fencing,
    horizon: std::time::Duration,
) -> Result<()> {
    crate::fence::claim::require_token(resource, fencing)?;
    in_time(fencing)?;
    let h = crate::horizon::micros(horizon) as u64;
    if crate::fence::rule::past_horizon(fencing.token().get(), now_us(), h) {
        return Err(crate::fence::claim::past_horizon(resource, fencing));
    }
    let n = conn
        .execute(
            "INSERT INTO leasehold_fence (resource, lock_key, fence, owner) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (resource) DO UPDATE SET fence = excluded.fence, owner = excluded.owner
             WHERE leasehold_fence.lock_key = excluded.lock_key
               AND (excluded.fence > leasehold_fence.fence
                    OR (excluded.fence = leasehold_fence.fence
                        AND excluded.owner = leasehold_fence.owner))",
            params![resource, fencing.key().as_str(), token(fencing), fencing.owner().to_string()],
        )
        .sql()?;
    if n == 1 { Ok(()) } else { Err(stale(resource, fencing, installed(conn, resource)?)) }
}

/// Deletes the claims older than twice `horizon` (clock-backed fences only), 1,000 rows per
/// statement, until none is left; returns how many. Call it from maintenance (e.g. every
/// quarter of the horizon), outside a transaction of the caller's. Safe at any time: a fence
/// a deleted row would have refused is smaller than the row's, so older than the horizon, and
/// [`claim_within`] refuses it.
pub fn prune(conn: &Connection, horizon: std::time::Duration) -> Result<u64> {
    let h = crate::horizon::micros(horizon);
    let before = i64::try_from(now_us()).unwrap_or(i64::MAX).saturating_sub(h.saturating_mul(2));
    let mut total = 0u64;
    loop {
        let n = conn
            .execute(
                "DELETE FROM leasehold_fence WHERE rowid IN (
                   SELECT rowid FROM leasehold_fence
                   WHERE fence >= ?1 AND fence < ?2 ORDER BY fence LIMIT 1000)",
                params![crate::horizon::CLOCK_FENCE_MIN as i64, before],
            )
            .sql()?;
        total += n as u64;
        if n < 1000 {
            return Ok(total);
        }
    }
}

/// Succeeds iff `fencing` is exactly what `resource` has installed; otherwise
/// [`crate::Error::StaleFence`]; [`crate::Error::Lost`] once the lease's time is up. Call in
/// the same transaction as the effect it guards.
pub fn check(conn: &Connection, resource: &str, fencing: &Fencing) -> Result<()> {
    in_time(fencing)?;
    crate::fence::claim::verify(resource, fencing, installed(conn, resource)?)
}

/// Commits a transaction guarded with `fencing`, unless the lease's local deadline has passed:
/// then it is rolled back and the answer is [`crate::Error::Lost`]. A fencing without a
/// deadline commits as `tx.commit()` does.
pub fn commit(tx: Transaction<'_>, fencing: &Fencing) -> Result<()> {
    if let Err(e) = in_time(fencing) {
        let _ = tx.rollback();
        return Err(e);
    }
    tx.commit().sql()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Error, FenceToken, Key, OwnerToken};

    fn f(key: &str, t: u64, o: OwnerToken) -> Fencing {
        Fencing::new(Key::new(key).unwrap(), FenceToken::new(t), o)
    }

    #[test]
    fn claim_rules() {
        let db = Connection::open_in_memory().unwrap();
        install(&db).unwrap();
        let (a, b) = (OwnerToken::generate().unwrap(), OwnerToken::generate().unwrap());
        let stale = |r: Result<()>| matches!(r, Err(Error::StaleFence { .. }));
        assert!(stale(check(&db, "r", &f("k", 1, a))), "nothing installed yet");
        claim(&db, "r", &f("k", 5, a)).unwrap();
        check(&db, "r", &f("k", 5, a)).unwrap();
        claim(&db, "r", &f("k", 5, a)).unwrap(); // idempotent re-claim
        assert!(stale(claim(&db, "r", &f("k", 5, b))), "same token, other owner");
        assert!(stale(claim(&db, "r", &f("k", 4, b))), "older token");
        assert!(stale(claim(&db, "r", &f("other", 9, b))), "token of another key");
        assert!(stale(claim(&db, "r", &f("k", 0, b))), "a grant without fence");
        claim(&db, "r", &f("k", 6, b)).unwrap();
        assert!(stale(check(&db, "r", &f("k", 5, a))), "superseded holder");
        check(&db, "r", &f("k", 6, b)).unwrap();
    }

    /// A claim older than the horizon is refused (PastHorizon) and, at twice the horizon,
    /// forgotten by `prune`; the older fences it refused stay refused.
    #[test]
    fn horizon() {
        let db = Connection::open_in_memory().unwrap();
        install(&db).unwrap();
        let (a, b) = (OwnerToken::generate().unwrap(), OwnerToken::generate().unwrap());
        let h = std::time::Duration::from_secs(10);
        let now = now_us();
        let old = f("k", now - 25_000_000, a);
        let past = |r: Result<()>| {
            matches!(r, Err(Error::StaleFence { reason: crate::StaleReason::PastHorizon, .. }))
        };
        assert!(past(claim_within(&db, "r", &old, h)), "older than the horizon");
        claim_within(&db, "r", &f("k", now - 5_000_000, a), h).unwrap();
        claim_within(&db, "q", &f("k", 42, b), h).unwrap();
        assert_eq!(prune(&db, h).unwrap(), 0, "5 s old is not twice the horizon old");
        assert_eq!(prune(&db, std::time::Duration::from_secs(2)).unwrap(), 1);
        assert!(installed(&db, "r").unwrap().is_none(), "forgotten");
        assert!(installed(&db, "q").unwrap().is_some(), "a revision's claim is kept");
        let stale = f("k", now - 6_000_000, b);
        assert!(past(claim_within(&db, "r", &stale, std::time::Duration::from_secs(2))));
    }
}
