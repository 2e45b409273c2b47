//! Auto-renew: one task per locker renews every registered lease at ttl/3. When a lease is
//! due, the leases within ttl/6 of their own due time ride along in the same `renew_many`
//! round trip; no lease is renewed early unless another one is really due (`docs/design.md`
//! §3: a lease is renewed about three times per ttl, never more than once per ttl/6).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::client::lease_state::Shared;
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
            wake = r.sleeping_until.is_some_and(|t| sent + interval < t);
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
        let picked = pick(now, r.entries.iter().map(|(id, e)| (*id, e.next_due, e.interval)));
        let batch: Batch = picked
            .batch
            .into_iter()
            .filter_map(|id| Some((id, r.entries.get(&id)?.lease.upgrade()?)))
            .collect();
        r.sleeping_until = if batch.is_empty() { picked.next } else { None };
        Some((batch, picked.next))
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
            wd.renew_batch(batch).await;
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

/// What [`pick`] chose: the leases to renew now, and when the next one falls due.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Picked {
    pub batch: Vec<u64>,
    pub next: Option<Instant>,
}

/// The batching rule, a pure function of `(id, next_due, interval)`: nothing is renewed
/// before some lease is due; once one is, every lease within half its own interval of its due
/// time joins that round trip. `next` is the earliest due time left out.
pub(crate) fn pick(now: Instant, leases: impl Iterator<Item = (u64, Instant, Duration)>) -> Picked {
    let leases: Vec<_> = leases.collect();
    let any_due = leases.iter().any(|(_, due, _)| *due <= now);
    let mut out = Picked::default();
    for (id, due, interval) in leases {
        let early = due.checked_sub(interval / 2).unwrap_or(now);
        if any_due && early <= now {
            out.batch.push(id);
        } else {
            out.next = Some(out.next.map_or(due, |n: Instant| n.min(due)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn nothing_is_renewed_early_alone() {
        let now = Instant::now();
        // Due in 0.4 s of a 1 s interval: within the early window, but nobody is due.
        let p = pick(now, [(1, now + S * 4 / 10, S)].into_iter());
        assert_eq!(p, Picked { batch: vec![], next: Some(now + S * 4 / 10) });
    }

    #[test]
    fn leases_near_their_due_time_ride_along() {
        let now = Instant::now();
        let p = pick(
            now,
            [(1, now, S), (2, now + S * 4 / 10, S), (3, now + S * 6 / 10, S)].into_iter(),
        );
        assert_eq!(p, Picked { batch: vec![1, 2], next: Some(now + S * 6 / 10) });
    }

    /// Simulated time: one lease alone is renewed once per interval, three per ttl.
    #[test]
    fn one_lease_renews_once_per_interval() {
        let t0 = Instant::now();
        let (mut due, mut now, mut renewals) = (t0 + S, t0, 0);
        while now <= t0 + S * 6 {
            let p = pick(now, [(1, due, S)].into_iter());
            if p.batch.is_empty() {
                now = p.next.expect("one lease");
            } else {
                renewals += 1;
                due = now + S;
            }
        }
        assert_eq!(renewals, 6, "over six intervals");
    }
}
