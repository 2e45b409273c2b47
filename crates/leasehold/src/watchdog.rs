//! Auto-renew: one task per locker renews every registered lease at ttl/3, batching all
//! leases that are due (or within ttl/6 of due) into one `renew_many` round trip.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::held::Shared;
use crate::store::RenewItem;
use crate::{LostReason, Store};

/// Leases due for renewal, with their registry ids.
type Batch = Vec<(u64, Arc<Shared>)>;

#[derive(Debug)]
struct Entry {
    lease: Weak<Shared>,
    next_due: Instant,
    interval: Duration,
}

#[derive(Debug, Default)]
struct Registry {
    entries: HashMap<u64, Entry>,
    next_id: u64,
    task_running: bool,
    /// When the task, idle, will look again; `None` while it is busy renewing (it rescans
    /// right after). A new lease due no earlier than this need not wake it: with 100,000
    /// leases a wake (a full scan) per registration would make acquiring them quadratic.
    sleeping_until: Option<Instant>,
}

#[derive(Debug)]
pub(crate) struct Watchdog {
    store: Arc<dyn Store>,
    registry: Mutex<Registry>,
    wake: Arc<Notify>,
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.wake.notify_one();
    }
}

impl Watchdog {
    pub fn new(store: Arc<dyn Store>) -> Arc<Self> {
        Arc::new(Watchdog { store, registry: Mutex::default(), wake: Arc::new(Notify::new()) })
    }

    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        // A panic while holding this lock cannot leave the map inconsistent; keep going.
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How often a lease of `ttl` is renewed: ttl/3, so two renewals may fail before the
    /// local deadline.
    pub fn interval(ttl: Duration) -> Duration {
        (ttl / 3).max(Duration::from_millis(1))
    }

    /// Starts renewing `lease`, whose grant was requested at `sent`. Must run inside a tokio
    /// runtime.
    pub fn register(self: &Arc<Self>, lease: &Arc<Shared>, sent: Instant) -> u64 {
        let interval = Self::interval(lease.ttl);
        let spawn;
        let wake;
        let id;
        {
            let mut r = self.registry();
            id = r.next_id;
            r.next_id += 1;
            r.entries.insert(
                id,
                Entry { lease: Arc::downgrade(lease), next_due: sent + interval, interval },
            );
            spawn = !r.task_running;
            r.task_running = true;
            let early = sent + interval - interval / 2;
            wake = r.sleeping_until.is_some_and(|t| early < t);
        }
        if spawn {
            tokio::spawn(run(Arc::downgrade(self), self.wake.clone()));
        } else if wake {
            self.wake.notify_one();
        }
        id
    }

    /// Stops renewing. Synchronous, so no renewal is *started* for this lease afterwards; one
    /// already in flight is owner-checked and cannot resurrect a released grant.
    pub fn unregister(&self, id: u64) {
        self.registry().entries.remove(&id);
    }

    /// Picks the due leases, or says when to look again. `None`: nothing registered, the task
    /// should end.
    fn due(&self) -> Option<(Batch, Option<Instant>)> {
        let now = Instant::now();
        let mut r = self.registry();
        r.entries.retain(|_, e| e.lease.upgrade().is_some_and(|l| l.lost_now().is_none()));
        if r.entries.is_empty() {
            r.task_running = false;
            return None;
        }
        let mut batch = Vec::new();
        let mut next: Option<Instant> = None;
        for (id, e) in &r.entries {
            // Renew up to half an interval (ttl/6) early so leases with nearby due times share
            // one round trip.
            let early = e.next_due.checked_sub(e.interval / 2).unwrap_or(now);
            if early <= now {
                if let Some(l) = e.lease.upgrade() {
                    batch.push((*id, l));
                }
            } else {
                next = Some(next.map_or(early, |n| n.min(early)));
            }
        }
        r.sleeping_until = if batch.is_empty() { next } else { None };
        Some((batch, next))
    }

    fn reschedule(&self, id: u64, at: Instant) {
        if let Some(e) = self.registry().entries.get_mut(&id) {
            e.next_due = at;
        }
    }

    async fn renew_batch(&self, batch: Batch) {
        let items: Vec<RenewItem> = batch
            .iter()
            .map(|(_, l)| RenewItem { key: l.id.key().clone(), owner: l.id.owner(), ttl: l.ttl })
            .collect();
        // Wait for the answer as long as it can still confirm a lease: until the earliest
        // local deadline in the batch (bounded by the op timeout). A renewal abandoned
        // earlier and re-sent would only queue behind itself on a multiplexed connection.
        let sent = Instant::now();
        let limit = batch
            .iter()
            .map(|(_, l)| {
                l.deadline()
                    .map_or(l.op_timeout, |d| d.saturating_duration_since(sent))
                    .min(l.op_timeout)
            })
            .min()
            .unwrap_or(Duration::from_secs(1))
            .max(Duration::from_millis(1));
        let answer = tokio::time::timeout(limit, self.store.renew_many(&items)).await;
        let took = sent.elapsed();
        match answer {
            Ok(Ok(results)) if results.len() == batch.len() => {
                for ((id, lease), ok) in batch.into_iter().zip(results) {
                    // Released (or dropped) while the batch was in flight: a not-owner answer
                    // is the release's doing, not a loss.
                    if !self.registry().entries.contains_key(&id) {
                        continue;
                    }
                    lease.tel.renewed(lease.id.key(), if ok { "ok" } else { "not_owner" }, took);
                    if ok && lease.confirm(sent).is_ok() {
                        self.reschedule(id, sent + Self::interval(lease.ttl));
                    } else {
                        if !ok {
                            lease.mark_lost(LostReason::NotOwner);
                        }
                        self.unregister(id);
                    }
                }
            }
            outcome => {
                let why = match outcome {
                    Ok(Ok(_)) => "store answered a different number of results".to_string(),
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => format!("no answer within {limit:?}"),
                };
                tracing::warn!(leases = batch.len(), error = %why, "renewal failed; retrying");
                let now = Instant::now();
                let outcome = if why.starts_with("no answer") { "timeout" } else { "error" };
                for (id, lease) in batch {
                    lease.tel.renewed(lease.id.key(), outcome, took);
                    let retry = (lease.ttl / 12).max(Duration::from_millis(5));
                    self.reschedule(id, now + retry);
                }
            }
        }
    }
}

async fn run(watchdog: Weak<Watchdog>, wake: Arc<Notify>) {
    loop {
        let Some(wd) = watchdog.upgrade() else { return };
        let Some((batch, next)) = wd.due() else {
            return;
        };
        if !batch.is_empty() {
            let started = Instant::now();
            // The shortest renew interval among the batch bounds how soon to look again.
            let min_interval = batch.iter().map(|(_, l)| l.ttl / 3).min().unwrap_or_default();
            wd.renew_batch(batch).await;
            // Leases are renewed up to half an interval early, so looking again an eighth of an
            // interval later still catches every one in time (with room for the batch
            // itself to take a while), and leases registered meanwhile share one round trip.
            let again = started + min_interval / 8;
            if again > Instant::now() {
                wd.registry().sleeping_until = Some(again);
                drop(wd);
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep_until(again.into()) => {}
                }
            }
            continue;
        }
        drop(wd);
        let woken = wake.notified();
        match next {
            Some(at) => {
                tokio::select! {
                    _ = woken => {}
                    _ = tokio::time::sleep_until(at.into()) => {}
                }
            }
            None => woken.await,
        }
    }
}
