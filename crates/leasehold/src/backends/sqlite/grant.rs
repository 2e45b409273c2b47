//! A grant attempt on `sqlite://`, inside the caller's open write transaction: the key's
//! fence counter (`leasehold_fences`), the mutex's grant with its readers' and intents'
//! checks and its semaphore slot, and a reader's grant (the tables are `shared.rs`'s).

use std::time::Duration;

use rusqlite::{OptionalExtension, Transaction, params};

use super::{SqlExt, remaining, shared};
use crate::{Key, Result};

/// The fence of a grant, in the granting transaction: `?1` key, `?2` the clock in µs →
/// `max(counter + 1, clock)` ([`crate::token::next_fence`]; pinned to it by the testkit).
pub(super) const GRANT_FENCE: &str = "INSERT INTO leasehold_fences (key, fence) VALUES (?1, ?2)
             ON CONFLICT (key) DO UPDATE SET fence = max(fence + 1, ?2) RETURNING fence";

/// One grant attempt inside an open write transaction: `Ok(fence)` or `Err(time left)`.
#[allow(clippy::too_many_arguments)]
pub(super) fn grant_in(
    tx: &Transaction<'_>,
    key: &Key,
    owner: &str,
    ttl: i64,
    boot: &str,
    now: i64,
    info: Option<&str>,
    ask: &shared::Ask,
) -> Result<std::result::Result<i64, Duration>> {
    if let Some(slot) = &ask.slot {
        shared::check_permits(tx, slot, boot, now)?;
    }
    let cur: Option<(String, i64)> = tx
        .query_row(
            "SELECT boot_id, expires_ns FROM leasehold_leases WHERE key = ?1",
            [key.as_str()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .sql()?;
    let exclusive_left =
        cur.filter(|(b, exp)| b == boot && *exp > now).map(|(_, e)| remaining(e, now));
    if ask.mode == crate::Mode::Shared {
        return grant_shared_in(tx, key, owner, ttl, boot, now, info, exclusive_left);
    }
    let readers = shared::readers_left(tx, key, boot, now)?;
    if let Some(left) = exclusive_left.or(readers) {
        // Only readers can overtake a waiting writer: behind another writer, no intent.
        if ask.intent && readers.is_some() {
            let hold = left + Duration::from_nanos(u64::try_from(ttl).unwrap_or(0));
            shared::note_intent(tx, key, owner, boot, now, hold)?;
        }
        return Ok(Err(left));
    }
    let f: i64 = tx
        .query_row(GRANT_FENCE, params![key.as_str(), crate::token::wall_clock_us() as i64], |r| {
            r.get(0)
        })
        .sql()?;
    tx.execute(
        "INSERT INTO leasehold_leases (key, owner, fence, boot_id, expires_ns, info)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, fence = excluded.fence,
             boot_id = excluded.boot_id, expires_ns = excluded.expires_ns, info = excluded.info",
        params![key.as_str(), owner, f, boot, now.saturating_add(ttl), info],
    )
    .sql()?;
    if ask.intent {
        shared::clear_intent(tx, key, owner)?;
    }
    if let Some(slot) = &ask.slot {
        shared::record_slot(tx, key, owner, slot)?;
    }
    Ok(Ok(f))
}

/// A reader's grant attempt: refused while an exclusive grant lives or another writer's
/// intent does; else a fence from the key's counter and a reader row.
#[allow(clippy::too_many_arguments)]
pub(super) fn grant_shared_in(
    tx: &Transaction<'_>,
    key: &Key,
    owner: &str,
    ttl: i64,
    boot: &str,
    now: i64,
    info: Option<&str>,
    exclusive_left: Option<Duration>,
) -> Result<std::result::Result<i64, Duration>> {
    if let Some(left) = exclusive_left {
        return Ok(Err(left));
    }
    if let Some(left) = shared::intents_left(tx, key, owner, boot, now)? {
        return Ok(Err(left));
    }
    let f: i64 = tx
        .query_row(GRANT_FENCE, params![key.as_str(), crate::token::wall_clock_us() as i64], |r| {
            r.get(0)
        })
        .sql()?;
    tx.execute(
        "INSERT OR REPLACE INTO leasehold_readers (key, owner, fence, boot_id, expires_ns, info)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![key.as_str(), owner, f, boot, now.saturating_add(ttl), info],
    )
    .sql()?;
    Ok(Ok(f))
}
