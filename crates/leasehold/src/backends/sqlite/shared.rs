//! Readers, writer intents and semaphore slots on `sqlite://` (`docs/design.md` §9), each a
//! statement inside the same write transaction as the grant it guards.
//!
//! - `leasehold_readers(key, owner, fence, boot_id, expires_ns, info)`: one row per reader;
//!   live as a lease row is. A reader's fence comes from the key's counter in
//!   `leasehold_fences`, the mutex's, so every writer's fence exceeds every earlier reader's.
//! - `leasehold_intents(key, owner, boot_id, expires_ns)`: a writer refused while it waits
//!   (not a one-shot attempt) records its intent, expiring at the blockers' expiry plus its
//!   own ttl and refreshed by each of its attempts; while another owner's intent lives, new
//!   readers are refused. The grant, a release by that owner, or the end of its wait removes it.
//! - `leasehold_slots(key, semaphore, owner, permits)`: the permit count a slot was granted
//!   for; a request naming another count is refused while such a grant lives.

use std::time::Duration;

use rusqlite::{OptionalExtension, Transaction, params};

use super::{SqlExt, remaining};
use crate::{Error, Key, Mode, Result};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS leasehold_readers (
    key        TEXT NOT NULL,
    owner      TEXT NOT NULL,
    fence      INTEGER NOT NULL,
    boot_id    TEXT NOT NULL,
    expires_ns INTEGER NOT NULL,
    info       TEXT,
    PRIMARY KEY (key, owner)
);
CREATE TABLE IF NOT EXISTS leasehold_intents (
    key        TEXT NOT NULL,
    owner      TEXT NOT NULL,
    boot_id    TEXT NOT NULL,
    expires_ns INTEGER NOT NULL,
    PRIMARY KEY (key, owner)
);
CREATE TABLE IF NOT EXISTS leasehold_slots (
    key       TEXT PRIMARY KEY NOT NULL,
    semaphore TEXT NOT NULL,
    owner     TEXT NOT NULL,
    permits   INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS leasehold_slots_semaphore ON leasehold_slots (semaphore);";

/// What a grant attempt asks beyond the mutex.
#[derive(Debug, Clone, Default)]
pub(super) struct Ask {
    pub mode: Mode,
    /// The semaphore's key and permit count, for a slot.
    pub slot: Option<(String, u32)>,
    /// Whether a refused writer records its intent (it waits).
    pub intent: bool,
}

impl Ask {
    pub fn of(req: &crate::store::AcquireRequest<'_>, intent: bool) -> Ask {
        Ask {
            mode: req.mode,
            slot: req.slot.map(|s| (s.semaphore.as_str().to_owned(), s.permits)),
            intent: intent && req.mode == Mode::Exclusive && req.slot.is_none(),
        }
    }
}

/// The latest expiry among `key`'s live readers, as time left; `None` without readers.
pub(super) fn readers_left(
    tx: &Transaction<'_>,
    key: &Key,
    boot: &str,
    now: i64,
) -> Result<Option<Duration>> {
    let exp: Option<i64> = tx
        .query_row(
            "SELECT max(expires_ns) FROM leasehold_readers
             WHERE key = ?1 AND boot_id = ?2 AND expires_ns > ?3",
            params![key.as_str(), boot, now],
            |r| r.get(0),
        )
        .sql()?;
    Ok(exp.map(|e| remaining(e, now)))
}

/// The latest expiry among live intents of writers other than `owner`.
pub(super) fn intents_left(
    tx: &Transaction<'_>,
    key: &Key,
    owner: &str,
    boot: &str,
    now: i64,
) -> Result<Option<Duration>> {
    let exp: Option<i64> = tx
        .query_row(
            "SELECT max(expires_ns) FROM leasehold_intents
             WHERE key = ?1 AND owner <> ?2 AND boot_id = ?3 AND expires_ns > ?4",
            params![key.as_str(), owner, boot, now],
            |r| r.get(0),
        )
        .sql()?;
    Ok(exp.map(|e| remaining(e, now)))
}

/// Records (or refreshes) a waiting writer's intent, for `hold` from now.
pub(super) fn note_intent(
    tx: &Transaction<'_>,
    key: &Key,
    owner: &str,
    boot: &str,
    now: i64,
    hold: Duration,
) -> Result<()> {
    tx.execute(
        "INSERT OR REPLACE INTO leasehold_intents (key, owner, boot_id, expires_ns)
         VALUES (?1, ?2, ?3, ?4)",
        params![key.as_str(), owner, boot, now.saturating_add(super::ns(hold))],
    )
    .sql()?;
    Ok(())
}

/// Removes `owner`'s intent on `key`; whether there was one.
pub(super) fn clear_intent(tx: &Transaction<'_>, key: &Key, owner: &str) -> Result<bool> {
    let n = tx
        .execute(
            "DELETE FROM leasehold_intents WHERE key = ?1 AND owner = ?2",
            params![key.as_str(), owner],
        )
        .sql()?;
    Ok(n > 0)
}

/// Refuses a slot request whose permit count differs from a live slot's of the semaphore.
pub(super) fn check_permits(
    tx: &Transaction<'_>,
    (semaphore, permits): &(String, u32),
    boot: &str,
    now: i64,
) -> Result<()> {
    let other: Option<i64> = tx
        .query_row(
            "SELECT s.permits FROM leasehold_slots s
             JOIN leasehold_leases l ON l.key = s.key AND l.owner = s.owner
             WHERE s.semaphore = ?1 AND s.permits <> ?2 AND l.boot_id = ?3 AND l.expires_ns > ?4
             LIMIT 1",
            params![semaphore, permits, boot, now],
            |r| r.get(0),
        )
        .optional()
        .sql()?;
    match other {
        Some(n) => Err(Error::invalid(format!(
            "semaphore {semaphore:?} is held with {n} permits; this request named {permits}"
        ))),
        None => Ok(()),
    }
}

/// Records which semaphore, and for how many permits, slot `key` was granted.
pub(super) fn record_slot(
    tx: &Transaction<'_>,
    key: &Key,
    owner: &str,
    (semaphore, permits): &(String, u32),
) -> Result<()> {
    tx.execute(
        "INSERT OR REPLACE INTO leasehold_slots (key, semaphore, owner, permits)
         VALUES (?1, ?2, ?3, ?4)",
        params![key.as_str(), semaphore, owner, permits],
    )
    .sql()?;
    Ok(())
}

/// Whether a waiter in `mode` would find `key` free now (for the queue's cheap looks): no
/// live exclusive grant and, for a writer, no live reader; for a reader, no other intent.
pub(super) fn free_for(
    c: &rusqlite::Connection,
    key: &Key,
    mode: Mode,
    owner: &str,
    boot: &str,
    now: i64,
) -> Result<bool> {
    let sql = match mode {
        Mode::Shared => {
            "SELECT NOT EXISTS (SELECT 1 FROM leasehold_intents
               WHERE key = ?1 AND owner <> ?2 AND boot_id = ?3 AND expires_ns > ?4)"
        }
        _ => {
            "SELECT NOT EXISTS (SELECT 1 FROM leasehold_readers
               WHERE key = ?1 AND ?2 = ?2 AND boot_id = ?3 AND expires_ns > ?4)"
        }
    };
    c.query_row(sql, params![key.as_str(), owner, boot, now], |r| r.get(0)).sql()
}

/// Extends `owner`'s reader grant of `key`; whether it was live.
pub(super) fn renew_reader(
    tx: &Transaction<'_>,
    key: &Key,
    owner: &str,
    expires: i64,
    boot: &str,
    now: i64,
) -> Result<bool> {
    let n = tx
        .prepare_cached(
            "UPDATE leasehold_readers SET expires_ns = ?3
             WHERE key = ?1 AND owner = ?2 AND boot_id = ?4 AND expires_ns > ?5",
        )
        .sql()?
        .execute(params![key.as_str(), owner, expires, boot, now])
        .sql()?;
    Ok(n == 1)
}

/// Deletes `owner`'s reader grant of `key`: `(boot_id, expires_ns)` of the row deleted.
pub(super) fn release_reader(
    tx: &Transaction<'_>,
    key: &Key,
    owner: &str,
) -> Result<Option<(String, i64)>> {
    tx.query_row(
        "DELETE FROM leasehold_readers WHERE key = ?1 AND owner = ?2
         RETURNING boot_id, expires_ns",
        params![key.as_str(), owner],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
    .sql()
}

/// A holder row: key, owner, fence, expires_ns, info, mode.
pub(super) type Row = (String, String, i64, i64, Option<String>, Mode);

/// The live readers (of `key`, or of every key).
pub(super) fn readers(
    c: &rusqlite::Connection,
    key: Option<&Key>,
    boot: &str,
    now: i64,
) -> Result<Vec<Row>> {
    let mut st = c
        .prepare_cached(
            "SELECT key, owner, fence, expires_ns, info FROM leasehold_readers
             WHERE boot_id = ?1 AND expires_ns > ?2 AND (?3 IS NULL OR key = ?3)
             ORDER BY key, fence",
        )
        .sql()?;
    st.query_map(params![boot, now, key.map(Key::as_str)], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, Mode::Shared))
    })
    .sql()?
    .collect::<rusqlite::Result<Vec<_>>>()
    .sql()
}
