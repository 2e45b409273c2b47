//! Tasks contending for one key: how long a release takes to reach the next holder.

use super::{
    BenchResult, Contender, KitRaw, Leasehold, Progress, RunResult, Settings, Tally, counted, hist,
    median, report, round_to, unique,
};
use leasehold::Locker;
use leasehold_harness::baseline::{HandoffBaseline, ServerView};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::Instant;

pub(super) async fn handoff(
    s: &Settings,
    locker: &Locker,
    peers: &[HandoffBaseline],
    view: Option<&dyn ServerView>,
    p: &Progress,
) -> BenchResult<report::Handoff> {
    let mut lh = Tally::default();
    let mut separate = Tally::default();
    // The store's own lock recipe (its kit's first handoff baseline that is not a peer
    // crate), one client per task; and a peer crate's lock, where the kit has one.
    let own_lock = peers.iter().find(|b| !b.peer);
    let peer_lock = peers.iter().find(|b| b.peer);
    let (mut own, mut peer) = (Tally::default(), Tally::default());
    // Waiters in other processes are woken by the store's notification (NOTIFY, pub/sub),
    // not by this process's queue: measure that path with one store connection per task.
    let per_task: Vec<Leasehold> =
        if leasehold_harness::stores::kit(s.url.scheme()).handoff_per_connection() {
            let mut v = Vec::new();
            for _ in 0..s.tasks {
                v.push(Leasehold(super::connect(&s.url).await?));
            }
            v
        } else {
            Vec::new()
        };
    // `clients` taking turns on a fresh key, with the requests of `names` the server counted
    // meanwhile where it counts them.
    async fn run_counted<C: Contender>(
        view: Option<&dyn ServerView>,
        names: &[&str],
        clients: Vec<C>,
        d: Duration,
    ) -> BenchResult<RunResult> {
        let key = unique("h");
        let run = handoff_each(clients, &key, d);
        match view.filter(|_| !names.is_empty()) {
            Some(v) => {
                let (mut r, c) = counted(v, names, run).await?;
                r.commands = Some(c.calls);
                Ok(r)
            }
            None => run.await,
        }
    }
    let lh_requests = view.map(|v| v.leasehold_requests()).unwrap_or_default();
    for run in 0..s.runs {
        p.step(format!("handoff run {}/{}", run + 1, s.runs));
        if !per_task.is_empty() {
            separate.add(handoff_each(per_task.clone(), &unique("h"), s.duration).await?);
        }
        let lh_c = vec![Leasehold(locker.clone()); s.tasks];
        lh.add(run_counted(view, lh_requests, lh_c, s.duration).await?);
        for (base, t) in [(own_lock, &mut own), (peer_lock, &mut peer)] {
            if let Some(b) = base {
                let each: Vec<KitRaw> = b.clients.iter().cloned().map(KitRaw).collect();
                t.add(run_counted(view, b.requests, each, s.duration).await?);
            }
        }
    }
    let mut rows = vec![lh.row("leasehold (wait forever, notified)")];
    if !separate.per_run.is_empty() {
        rows.push(
            separate.row(
                "leasehold, one store connection per task (woken by the store's notification)",
            ),
        );
    }
    // leasehold's handoffs/s over a baseline's, when it ran.
    let vs = |base: &Tally, places| {
        (!base.per_run.is_empty()).then(|| {
            let ratio = median(lh.handoffs_per_run.clone()) / median(base.handoffs_per_run.clone());
            round_to(ratio, places)
        })
    };
    let (vs_own, vs_peer) = (vs(&own, 2), vs(&peer, 1));
    for (base, t, ratio) in [(own_lock, &own, vs_own), (peer_lock, &peer, vs_peer)] {
        if let (Some(b), Some(_)) = (base, ratio) {
            rows.push(t.row(b.label));
        }
    }
    Ok(report::Handoff {
        what: format!(
            "{} tasks on one key, empty critical section. A handoff is an acquisition by another task than the previous holder; handoff wait runs from the holder calling release to the next waiter's acquire returning.{}",
            s.tasks,
            match view {
                Some(v) =>
                    format!(" Store requests are client requests counted by {}.", v.counter()),
                None => String::new(),
            }
        ),
        contenders: rows,
        leasehold_handoffs_vs_own_lock: vs_own,
        leasehold_handoffs_vs_peer: vs_peer,
    })
}

/// `tasks` tasks taking turns on `key` for `d`, each acquiring with a wait.
pub(super) async fn handoff_run<C: Contender>(
    c: &C,
    key: &str,
    tasks: usize,
    d: Duration,
) -> BenchResult<RunResult> {
    handoff_each(vec![c.clone(); tasks], key, d).await
}

/// Like [`handoff_run`] with one contender per task (e.g. one store connection each).
async fn handoff_each<C: Contender>(cs: Vec<C>, key: &str, d: Duration) -> BenchResult<RunResult> {
    let base = Instant::now();
    let deadline = base + d;
    // Nanoseconds since `base` at which the current holder started its release.
    let released_at = Arc::new(AtomicU64::new(0));
    let last_holder = Arc::new(AtomicU64::new(u64::MAX));
    let mut handles = Vec::new();
    for (task, c) in cs.into_iter().enumerate() {
        let task = task as u64;
        let (key, released_at, last_holder) =
            (key.to_string(), released_at.clone(), last_holder.clone());
        handles.push(tokio::spawn(async move {
            let (mut acq, mut hand) = (hist(), hist());
            let (mut n, mut changes) = (0u64, 0u64);
            while Instant::now() < deadline {
                let t0 = base.elapsed().as_nanos() as u64;
                let wait =
                    deadline.saturating_duration_since(Instant::now()) + Duration::from_secs(2);
                let Some(guard) = c.acquire(&key, wait).await? else { break };
                let got = base.elapsed().as_nanos() as u64;
                acq.record(((got - t0) / 1000).max(1)).ok();
                let rel = released_at.load(Ordering::SeqCst);
                if rel > t0 && got >= rel {
                    hand.record(((got - rel) / 1000).max(1)).ok();
                }
                n += 1;
                if last_holder.swap(task, Ordering::SeqCst) != task {
                    changes += 1;
                }
                released_at.store(base.elapsed().as_nanos() as u64, Ordering::SeqCst);
                c.release(guard).await?;
            }
            Ok::<_, String>((n, changes, acq, hand))
        }));
    }
    let (mut ops, mut changes, mut acq, mut hand) = (0, 0, hist(), hist());
    for h in handles {
        let (n, ch, a, hd) = h.await.map_err(|e| e.to_string())??;
        ops += n;
        changes += ch;
        acq.add(a).ok();
        hand.add(hd).ok();
    }
    Ok(RunResult {
        ops,
        handoffs: Some(changes),
        elapsed: base.elapsed(),
        acquire: Some(acq),
        handoff: Some(hand),
        ..Default::default()
    })
}
