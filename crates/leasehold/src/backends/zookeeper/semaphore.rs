//! Semaphores on the node layout of Curator's `InterProcessSemaphoreV2`, so that leasehold's
//! permits and a Java service's leases on the same path never exceed N holders together:
//!
//! - the semaphore SEM is the node `[/CHROOT]/leasehold/SEM`, with the children `locks` (an
//!   `InterProcessMutex` that every acquirer holds while it takes a lease) and `leases` (one
//!   protected ephemeral sequential child `_c_<UUID>-lease-<SEQ>` per lease);
//! - a lease may be taken while `leases` has fewer than N children, `locks` held.
//!
//! Curator's leases are anonymous; leasehold's slot model (`docs/design.md` §9) needs each
//! permit to be a slot `SEM#i` with its own fence. The slot and the permit count live in the
//! lease node's data (`OWNER`, `slot I of N`, holder info; Curator puts the client's address
//! there and ignores it): a slot is taken while no leasehold lease names it, fewer than N leases
//! exist (Curator's count), and no live leasehold lease names another N, all checked with
//! `locks` held. The fence is the lease node's czxid: the next holder of slot i can only take
//! it (under `locks`) after the last one's node is gone, and that node was created under an
//! earlier hold of `locks`, so each slot's fences strictly increase. Curator's own leases
//! take up a permit without a slot, and carry no N to check against.
//!
//! leasehold does not hold `locks` while it waits (Curator's acquirers do): it watches the
//! `leases` children and takes `locks` only when a slot looks free.

use std::sync::Arc;
use std::time::{Duration, Instant};

use zookeeper_client::Client;

use super::node::{CreateGuard, create_node};
use super::session::Session;
use super::{ZookeeperStore, owner_of, rw, uuid, zk_err};
use crate::backends::session::Waited;
use crate::store::{AcquireRequest, Attempt, SlotOf};
use crate::{Error, FenceToken, Holder, HolderInfo, Key, OwnerToken, Result};

/// How long a one-shot attempt waits for `locks` (held for a few round trips by a leasehold
/// acquirer; as long as its wait by a Curator one).
const TRY_LOCK: Duration = Duration::from_secs(2);

/// `(locks, leases)` of the semaphore `sem`.
fn paths(store: &ZookeeperStore, sem: &Key) -> Result<(String, String)> {
    let base = store.lock_path(sem)?;
    Ok((format!("{base}/locks"), format!("{base}/leases")))
}

/// The semaphore a slot key `SEM#i` names, and `i`; `None` for any other key.
fn slot_of(key: &Key) -> Option<(Key, u32)> {
    let (sem, i) = key.as_str().rsplit_once('#')?;
    if i.is_empty() || !i.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((Key::new(sem).ok()?, i.parse().ok()?))
}

/// The `leases` node a slot key's grant would live under, for a release by owner alone.
pub(super) fn leases_of_slot(store: &ZookeeperStore, key: &Key) -> Result<Option<String>> {
    match slot_of(key) {
        Some((sem, _)) => Ok(paths(store, &sem).ok().map(|(_, leases)| leases)),
        None => Ok(None),
    }
}

/// What a leasehold lease node says of itself.
#[derive(Debug)]
struct Ours {
    owner: OwnerToken,
    slot: u32,
    permits: u32,
    info: Option<HolderInfo>,
}

/// A child of `leases`: its czxid and, if it is leasehold's, what it says.
#[derive(Debug)]
struct Lease {
    czxid: i64,
    ours: Option<Ours>,
}

fn lease_data(owner: &OwnerToken, slot: &SlotOf<'_>, info: Option<&HolderInfo>) -> String {
    let head = format!("{owner}\nslot {} of {}", slot.index, slot.permits);
    match info {
        Some(i) => format!("{head}\n{}", i.encode()),
        None => head,
    }
}

fn parse_lease(name: &str, data: &[u8]) -> Option<Ours> {
    let owner = owner_of(name)?;
    let mut lines = std::str::from_utf8(data).ok()?.splitn(3, '\n');
    (lines.next()? == owner.to_string()).then_some(())?;
    let (slot, permits) = lines.next()?.strip_prefix("slot ")?.split_once(" of ")?;
    let info = lines.next().and_then(HolderInfo::decode);
    Some(Ours { owner, slot: slot.parse().ok()?, permits: permits.parse().ok()?, info })
}

/// The children of `leases` (none when it does not exist) and what each says.
async fn read_leases(client: &Client, leases: &str) -> Result<(Vec<String>, Vec<Lease>)> {
    let names = match client.list_children(leases).await {
        Ok(c) => c,
        Err(zookeeper_client::Error::NoNode) => return Ok((Vec::new(), Vec::new())),
        Err(e) => return Err(zk_err("list children", e)),
    };
    let mut out = Vec::with_capacity(names.len());
    for n in &names {
        match client.get_data(&format!("{leases}/{n}")).await {
            Ok((data, stat)) => out.push(Lease { czxid: stat.czxid, ours: parse_lease(n, &data) }),
            Err(zookeeper_client::Error::NoNode) => {}
            Err(e) => return Err(zk_err("get", e)),
        }
    }
    Ok((names, out))
}

/// Whether `slot` may be taken beside `leases`; refused when a live lease names another N.
fn free(leases: &[Lease], slot: &SlotOf<'_>) -> Result<bool> {
    let ours = || leases.iter().filter_map(|l| l.ours.as_ref());
    if let Some(o) = ours().find(|o| o.permits != slot.permits) {
        return Err(Error::invalid(format!(
            "semaphore {:?} is held with {} permits; this request named {}",
            slot.semaphore.as_str(),
            o.permits,
            slot.permits
        )));
    }
    Ok(leases.len() < slot.permits as usize && !ours().any(|o| o.slot == slot.index))
}

/// Holds the semaphore's `locks` mutex (Curator's `InterProcessMutex` layout) until `until`;
/// `None` when it stayed taken. Dropping the guard releases it (in the background).
async fn lock(
    store: &ZookeeperStore,
    client: &Client,
    locks: &str,
    until: Instant,
) -> Result<Option<CreateGuard>> {
    let uuid = uuid(&OwnerToken::generate()?);
    let task = tokio::spawn(create_node(
        client.clone(),
        locks.to_owned(),
        uuid.clone(),
        "lock-",
        String::new(),
    ));
    let armed = Some((client.clone(), store.core.undoing.clone(), locks.to_owned(), uuid));
    let mut guard = CreateGuard { task: Some(task), armed, path: None };
    let (path, _) = guard.outcome().await?;
    let me = path.rsplit('/').next().unwrap_or_default().to_owned();
    loop {
        let queue = ZookeeperStore::queue(client, locks).await?;
        let Some(pos) = queue.iter().position(|c| c.name == me) else {
            guard.disarm();
            return Err(Error::unavailable(format!("our zookeeper node {path} vanished"), None));
        };
        let Some(pred) = rw::blocker(&queue, pos) else { return Ok(Some(guard)) };
        if Instant::now() >= until {
            guard.undo_now().await?;
            return Ok(None);
        }
        let pred = format!("{locks}/{}", pred.name);
        match client.check_and_watch_stat(&pred).await {
            Ok((Some(_), w)) => {
                let _ = tokio::time::timeout_at(until.into(), w.changed()).await;
            }
            Ok((None, _)) => {}
            Err(e) => return Err(zk_err("watch", e)),
        }
    }
}

/// With `locks` held: looks again, and creates our lease if the slot is still free.
async fn take(
    store: &ZookeeperStore,
    req: &AcquireRequest<'_>,
    slot: &SlotOf<'_>,
    client: &Client,
    leases: &str,
    session: Arc<Session>,
) -> Result<Option<Waited>> {
    if !free(&read_leases(client, leases).await?.1, slot)? {
        return Ok(None);
    }
    let uuid = uuid(req.owner);
    let sent = Instant::now();
    let data = lease_data(req.owner, slot, req.info);
    let task =
        tokio::spawn(create_node(client.clone(), leases.to_owned(), uuid.clone(), "lease-", data));
    let armed = Some((client.clone(), store.core.undoing.clone(), leases.to_owned(), uuid));
    let mut guard = CreateGuard { task: Some(task), armed, path: None };
    let (path, czxid) = guard.outcome().await?;
    guard.disarm();
    Ok(Some(store.grant(req, path, czxid, session, sent)))
}

/// One acquisition of slot `slot.index`: once (`until` = None), or watching `leases` until
/// `until`.
pub(super) async fn attempt(
    store: &ZookeeperStore,
    req: &AcquireRequest<'_>,
    slot: &SlotOf<'_>,
    session: Arc<Session>,
    until: Option<Instant>,
) -> Result<Waited> {
    let client = session.client()?;
    let (locks, leases) = paths(store, slot.semaphore)?;
    let busy = Ok(Waited::Done(Attempt::Busy { holder_expires_in: None }));
    loop {
        let (names, seen) = read_leases(&client, &leases).await?;
        if free(&seen, slot)? {
            let lock_until = until.unwrap_or_else(|| Instant::now() + TRY_LOCK);
            if let Some(held) = lock(store, &client, &locks, lock_until).await? {
                let took = take(store, req, slot, &client, &leases, session.clone()).await;
                drop(held); // releases `locks` (in the background, retried)
                if let Some(granted) = took? {
                    return Ok(granted);
                }
            }
        }
        let Some(until) = until else { return busy };
        if Instant::now() >= until {
            return busy;
        }
        match client.list_and_watch_children(&leases).await {
            Ok((now, w)) => {
                if now.len() == names.len() && now.iter().all(|n| names.contains(n)) {
                    tokio::select! {
                        _ = tokio::time::timeout_at(until.into(), w.changed()) => {}
                        // No lease of ours yet: a new session waits on.
                        why = session.signals.end("zookeeper") => {
                            return Ok(Waited::SessionLost(why));
                        }
                    }
                }
            }
            // No lease yet (or the container was cleaned up): look again shortly.
            Err(zookeeper_client::Error::NoNode) => {
                let next = until.min(Instant::now() + Duration::from_millis(50));
                tokio::time::sleep_until(next.into()).await;
            }
            Err(e) => return Err(zk_err("watch children", e)),
        }
    }
}

/// The permits held under `key`, taken as a semaphore's name (every slot) or a slot key's
/// (that slot); and whether a lease that is not leasehold's (Curator's) was seen.
pub(super) async fn holders(
    client: &Client,
    store: &ZookeeperStore,
    key: &Key,
) -> Result<(Vec<Holder>, bool)> {
    let (sem, only) = match slot_of(key) {
        Some((sem, i)) => (sem, Some(i)),
        None => (key.clone(), None),
    };
    let Ok((_, leases)) = paths(store, &sem) else { return Ok((Vec::new(), false)) };
    let mut out = Vec::new();
    let mut foreign = false;
    for l in read_leases(client, &leases).await?.1 {
        match l.ours {
            Some(o) if only.is_none_or(|i| i == o.slot) => {
                let k = Key::new(crate::mode::slot_key(sem.as_str(), o.slot))?;
                let fence = Some(FenceToken::from_i64(l.czxid));
                out.push(Holder::new(k, o.owner, fence, None).with_info(o.info));
            }
            Some(_) => {}
            None => foreign |= only.is_none(),
        }
    }
    Ok((out, foreign))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_data_round_trips_and_slot_keys_parse() {
        let owner = OwnerToken::generate().unwrap();
        let sem = Key::new("jobs").unwrap();
        let slot = SlotOf { semaphore: &sem, index: 2, permits: 3 };
        let name = format!("_c_{}-lease-0000000004", uuid(&owner));
        let o = parse_lease(&name, lease_data(&owner, &slot, None).as_bytes()).unwrap();
        assert_eq!((o.owner, o.slot, o.permits), (owner, 2, 3));
        assert!(parse_lease(&name, b"10.0.0.7").is_none(), "Curator's data is not ours");
        let other = OwnerToken::generate().unwrap();
        assert!(parse_lease(&name, lease_data(&other, &slot, None).as_bytes()).is_none());
        let (s, i) = slot_of(&Key::new("a#b#12").unwrap()).unwrap();
        assert_eq!((s.as_str(), i), ("a#b", 12));
        assert!(slot_of(&Key::new("a#").unwrap()).is_none());
        assert!(slot_of(&Key::new("a#x1").unwrap()).is_none());
        let held = |slot, permits| Lease {
            czxid: 1,
            ours: Some(Ours { owner, slot, permits, info: None }),
        };
        assert!(!free(&[held(2, 3)], &slot).unwrap(), "slot 2 is taken");
        let one = SlotOf { index: 1, ..slot };
        assert!(free(&[held(2, 3)], &one).unwrap());
        let full = [held(0, 3), Lease { czxid: 2, ours: None }, held(2, 3)];
        assert!(!free(&full, &one).unwrap(), "three leases of three, one of them Curator's");
        let e = free(&[held(0, 4)], &one).unwrap_err();
        assert!(e.to_string().contains('4'), "{e}");
    }
}
