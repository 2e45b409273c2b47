//! Semaphores on etcd (etcd has no semaphore recipe): slot `i` of the semaphore `SEM` is the
//! plain lock `PREFIX/SEM#i` (the library's slot key `SEM#i`, in the mutex's layout), so its
//! grant key is `PREFIX/SEM#i/write/OWNER`, bound to the session's etcd lease, and renew,
//! release, holders, `etcdctl lock PREFIX/SEM#i` and [`crate::fence::etcd`] treat a permit as
//! the mutex grant of its slot. The value adds a line `slot I of N` after the owner token.
//!
//! Taking slot `i`: read every slot of the semaphore at revision `R` (the names `SEM#` and a
//! digit: `[PREFIX/SEM#0, PREFIX/SEM#:)`); refuse when a live slot names another N; wait while
//! anything is under `PREFIX/SEM#i/`; else ONE transaction puts the grant key if no key in
//! the whole slot range changed after `R` (`Compare` on mod revision with `range_end`, etcd
//! ≥ 3.3) and nothing is under `PREFIX/SEM#i/` (create revision 0 over that prefix). So the
//! permit-count check and the grant are one atomic step; a failed comparison reads again.
//! The fence is the grant key's create revision, as the mutex's: strictly increasing per
//! slot. A waiter watches the last key under its slot's prefix for its deletion.

use std::sync::Arc;
use std::time::Instant;

use super::queue::{PutGuard, header_rev, wait_deleted};
use super::rpc::{Compare, CompareResult, KeyValue, RangeRequest, RequestOp, TxnRequest};
use super::session::Session;
use super::{EtcdStore, etcd_err, retry, rw};
use crate::backends::session::Waited;
use crate::store::{AcquireRequest, Attempt, SlotOf};
use crate::{Error, HolderInfo, Mode, OwnerToken, Result};

/// Failed comparisons (another slot changed in between) a one-shot attempt reads again
/// after, before it answers busy.
const TRY_ROUNDS: u32 = 8;

/// The value of a slot's grant key: the owner token, `slot I of N`, the holder's info.
fn slot_value(owner: &OwnerToken, slot: &SlotOf<'_>, info: Option<&HolderInfo>) -> String {
    let head = format!("{owner}\nslot {} of {}", slot.index, slot.permits);
    match info {
        Some(i) => format!("{head}\n{}", i.encode()),
        None => head,
    }
}

/// `(slot, permits)` from a grant key's value, if it is a slot's.
fn parse_slot(v: &[u8]) -> Option<(u32, u32)> {
    let v = std::str::from_utf8(v).ok()?;
    let line = v.split('\n').nth(1)?.strip_prefix("slot ")?;
    let (i, n) = line.split_once(" of ")?;
    Some((i.parse().ok()?, n.parse().ok()?))
}

/// `[from, to)`: every lock whose name is the semaphore's name, `#` and a digit.
fn slots_range(base: &str) -> (Vec<u8>, Vec<u8>) {
    (format!("{base}#0").into_bytes(), format!("{base}#:").into_bytes())
}

/// The slot whose lock is `name`, when `name` is exactly `BASE#<digits>`.
fn slot_index(base: &str, name: &str) -> Option<u32> {
    let digits = name.strip_prefix(base)?.strip_prefix('#')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Refuses when a live slot of the semaphore (a grant key directly under `BASE#i/`) was
/// granted for another number of permits than `slot.permits`.
fn check_permits(base: &str, slot: &SlotOf<'_>, kvs: &[KeyValue]) -> Result<()> {
    for kv in kvs {
        let Some((name, _)) = std::str::from_utf8(&kv.key).ok().and_then(rw::split) else {
            continue;
        };
        if slot_index(base, name).is_none() {
            continue; // a lock nested under a slot's name, not a slot
        }
        if let Some((_, n)) = parse_slot(&kv.value)
            && n != slot.permits
        {
            return Err(Error::invalid(format!(
                "semaphore {:?} is held with {n} permits; this request named {}",
                slot.semaphore.as_str(),
                slot.permits
            )));
        }
    }
    Ok(())
}

/// One acquisition of slot `slot.index`: once (`until` = None; a few reads again when other
/// slots change meanwhile), or watching the slot until `until`.
pub(super) async fn attempt(
    store: &EtcdStore,
    req: &AcquireRequest<'_>,
    slot: &SlotOf<'_>,
    session: Arc<Session>,
    until: Option<Instant>,
) -> Result<Waited> {
    let name = store.lock_name(req.key);
    let pfx = format!("{name}/");
    let base = store.lock_name(slot.semaphore);
    let (from, to) = slots_range(&base);
    let lock_key = rw::grant_key(&store.cfg.prefix, req.key, req.owner, Mode::Exclusive);
    let value = slot_value(req.owner, slot, req.info);
    let busy = || Ok(Waited::Done(Attempt::Busy { holder_expires_in: None }));
    let mut conflicts = 0;
    loop {
        let look = RangeRequest { key: from.clone(), range_end: to.clone(), ..Default::default() };
        let read = retry(|| store.client.range(look.clone())).await;
        let read = read.map_err(|e| etcd_err("get", e))?;
        let seen = header_rev(read.header.as_ref())?;
        check_permits(&base, slot, &read.kvs)?;
        let here = read.kvs.iter().filter(|kv| kv.key.starts_with(pfx.as_bytes()));
        if let Some(last) = here.max_by_key(|kv| kv.create_revision) {
            let Some(until) = until else { return busy() };
            if Instant::now() >= until {
                return busy();
            }
            tokio::select! {
                gone = wait_deleted(&store.client, &last.key, seen, until) => {
                    if !gone? {
                        return busy();
                    }
                }
                // Nothing of ours is on the slot yet: a new session waits on.
                why = session.signals.end("etcd") => return Ok(Waited::SessionLost(why)),
            }
            continue;
        }
        let txn = TxnRequest {
            compare: vec![
                Compare::mod_revision(from.clone(), CompareResult::Less, seen + 1)
                    .with_range_end(to.clone()),
                Compare::create_revision(pfx.as_str(), CompareResult::Equal, 0).with_prefix(),
            ],
            success: vec![RequestOp::put(lock_key.as_str(), value.as_str(), session.id)],
            failure: vec![],
        };
        let sent = Instant::now();
        let mut guard = PutGuard::spawn(store, txn, &name, &lock_key, req.owner);
        let resp = match guard.outcome().await? {
            Ok(resp) => resp,
            Err(why) => return Ok(Waited::SessionLost(why)),
        };
        guard.disarm(); // granted (or on an ended session, going with it), or nothing was put
        if resp.succeeded {
            let rev = header_rev(resp.header.as_ref())?;
            return Ok(store.grant(req, lock_key, rev, session, sent));
        }
        conflicts += 1;
        match until {
            None if conflicts >= TRY_ROUNDS => return busy(),
            Some(u) if Instant::now() >= u => return busy(),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Key;
    use crate::backends::etcd::{lock_value, parse_value};

    fn kv(key: &str, value: String) -> KeyValue {
        KeyValue { key: key.into(), value: value.into_bytes(), ..Default::default() }
    }

    #[test]
    fn slot_values_and_names_parse() {
        let owner = OwnerToken::generate().unwrap();
        let sem = Key::new("jobs").unwrap();
        let slot = SlotOf { semaphore: &sem, index: 2, permits: 3 };
        let info = HolderInfo::this_process();
        let v = slot_value(&owner, &slot, Some(&info));
        assert_eq!(parse_slot(v.as_bytes()), Some((2, 3)));
        let (o, i) = parse_value(v.as_bytes()).unwrap();
        assert_eq!((o, i), (owner, Some(info)), "the slot line is skipped for the holder");
        assert_eq!(parse_slot(lock_value(&owner, None).as_bytes()), None, "a mutex's value");
        let (from, to) = slots_range("lh/jobs");
        let inside = |k: &str| k.as_bytes() >= from.as_slice() && k.as_bytes() < to.as_slice();
        assert!(inside("lh/jobs#0/write/x") && inside("lh/jobs#255/write/x"));
        assert!(!inside("lh/jobs#x/write/x") && !inside("lh/jobs/write/x"));
        assert_eq!(slot_index("lh/jobs", "lh/jobs#12"), Some(12));
        assert_eq!(slot_index("lh/jobs", "lh/jobs#1#0"), None, "a semaphore named jobs#1");
        assert_eq!(slot_index("lh/jobs", "lh/jobs#"), None);
    }

    #[test]
    fn another_permit_count_is_refused_naming_it() {
        let owner = OwnerToken::generate().unwrap();
        let sem = Key::new("jobs").unwrap();
        let held = SlotOf { semaphore: &sem, index: 0, permits: 4 };
        let asked = SlotOf { semaphore: &sem, index: 1, permits: 3 };
        let slot0 = kv(&format!("lh/jobs#0/write/{owner}"), slot_value(&owner, &held, None));
        let e = check_permits("lh/jobs", &asked, std::slice::from_ref(&slot0)).unwrap_err();
        assert!(e.to_string().contains("4 permits"), "{e}");
        assert!(check_permits("lh/jobs", &held, &[slot0]).is_ok(), "the same N");
        // A semaphore nested under a slot's name, and a plain lock on a slot: no N to check.
        let nested = SlotOf { semaphore: &sem, index: 0, permits: 9 };
        let other = kv(&format!("lh/jobs#1#0/write/{owner}"), slot_value(&owner, &nested, None));
        let plain = kv(&format!("lh/jobs#2/write/{owner}"), lock_value(&owner, None));
        assert!(check_permits("lh/jobs", &asked, &[other, plain]).is_ok());
    }
}
