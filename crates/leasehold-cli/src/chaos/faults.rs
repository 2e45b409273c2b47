//! `store-kill` and `failover`: the store itself fails while a holder works.
//!
//! Both run on private servers this tool starts on free loopback ports, fresh for every trial
//! (the `--store` URL gives the kind and its options; the server it names is never touched,
//! let alone killed). Each trial: a holder process acquires with auto-renew, claims an SQLite
//! resource in the output directory (independent of the failing store, as a real resource
//! would be) and writes; the store fails; a successor tries the key; the holder writes again.
//! - `store-kill`: the store process is killed (-9) and restarted on the same port and data
//!   directory half a lease (or session) later.
//! - `failover`: Redis: a primary and a replica; the replica stops replicating just before
//!   the holder's grant (the lag asynchronous replication always allows), the primary is
//!   killed and the replica promoted; the successor talks to the promoted replica, as a
//!   Sentinel-routed client would. etcd: three members; the leader is killed. The Redis
//!   Cluster and Sentinel topologies cut their replica off (frozen) once the holder has
//!   connected, just before its grant.
//!
//! When the successor is refused while the holder lives, it tries again after the holder's
//! release, so every trial also checks that fences kept increasing across the failure.

use std::time::Duration;

use leasehold::{Locker, Wait};
use leasehold_harness::failure::{FailingStore, Plan};
use leasehold_harness::stores;
use tokio::io::AsyncWriteExt;

use super::{
    Event, Holder, KEY, Outline, Settings, Trial, ev, fresh_resource, http, progress,
    session_timeout, successor_claim_and_write, successor_write,
};

pub(super) use leasehold_harness::spawn::blocking;

/// Runs the trials of `store-kill` or `failover`.
pub(super) async fn run(s: &Settings) -> Result<(Vec<Trial>, Outline), String> {
    let failover = s.scenario == super::Scenario::Failover;
    let scheme = s.url.scheme();
    let plan = stores::plan(scheme, failover)?;
    let mut trials = Vec::new();
    let mut guarantees = None;
    for fenced in [true, false] {
        let count = if fenced { s.trials } else { s.control_trials };
        for n in 0..count {
            progress(s, if fenced { "fenced" } else { "unfenced" }, n, count);
            let (t, g) = trial(s, plan, failover, fenced, n).await?;
            trials.push(t);
            guarantees = Some(g);
        }
    }
    let guarantees = guarantees.ok_or("no trials were run")?;
    let outline = Outline {
        store: leasehold::redact(&format!("{scheme}://(private){}", s.url.path_and_options())),
        guarantees,
        resource: format!("{}, fresh for each trial", stores::own_resource(&s.out).what),
        setup: Some(plan.setup.into()),
    };
    Ok((trials, outline))
}

pub(super) async fn trial(
    s: &Settings,
    plan: Plan,
    failover: bool,
    fenced: bool,
    n: usize,
) -> Result<(Trial, leasehold::Guarantees), String> {
    let arm = if fenced { "fenced" } else { "unfenced" };
    let tail = s.url.path_and_options().to_owned();
    let mut private: Box<dyn FailingStore> = blocking(plan.start).await?;
    // The private server's URL: a new one, parsed where it is made.
    let holder_url = leasehold::StoreUrl::parse(&private.url(&tail)).map_err(|e| e.to_string())?;
    let mut events = Vec::new();
    let (replicated, gated) = (private.replicated(), private.cut_after_connect());
    if replicated {
        // An earlier grant (which also creates a lease table) reaches the replica, so it has a
        // fence counter; then it stops following before the holder's grant.
        let warm = super::connect(&holder_url).await?;
        let l = warm.acquire(KEY, s.ttl).await.map_err(|e| format!("warm-up grant: {e}"))?;
        let _ = l.release().await;
        drop(warm);
        if !gated {
            private = cut(private, &tail, &mut events).await?;
        }
    }
    fresh_resource(&s.out);
    let spec = stores::own_resource(&s.out).spec;
    let mut holder = if replicated && gated {
        // Once the holder's store is open (a cluster client asks every node, and would wait
        // for a frozen one), just before its grant.
        let mut h = Holder::spawn_gated(s, &holder_url, &spec, fenced).await?;
        let said = h.line(Duration::from_secs(30)).await?;
        if said != "connected" {
            return Err(format!("the holder said {said:?}"));
        }
        private = cut(private, &tail, &mut events).await?;
        h.go().await?;
        h
    } else {
        Holder::spawn(s, &holder_url, &spec, fenced).await?
    };
    let ready = holder.line(s.ttl * 20 + Duration::from_secs(20)).await?;
    let holder_fence: u64 = ready
        .strip_prefix("ready ")
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| format!("the holder said {ready:?}"))?;
    // How long the store's own expiry of the holder can take.
    let expiry = s.ttl.max(session_timeout(&holder_url));
    let successor_url = if failover {
        events.push(ev("chaos", "pause", Some(holder_fence), Some("primary lost".into())));
        let tail2 = tail.clone();
        let ((what, url), p) = blocking(move || {
            let r = private.fail_over(&tail2);
            (r, private)
        })
        .await?;
        private = p;
        events.push(ev("chaos", "failover", Some(holder_fence), Some(what)));
        url
    } else {
        events.push(ev("chaos", "pause", Some(holder_fence), Some("store killed (-9)".into())));
        private = blocking(move || {
            private.kill9();
            private
        })
        .await?;
        tokio::time::sleep(expiry / 2).await;
        private = blocking(move || {
            private.restart();
            private
        })
        .await?;
        events.push(ev("chaos", "restart", Some(holder_fence), Some("store restarted".into())));
        holder_url.expose().to_owned()
    };
    let locker = connect_after_failure(&successor_url).await?;
    let guarantees = locker.guarantees();
    let mut res = http::open(&spec).await;
    // Long enough for any expiry of the holder's grant to pass, and for a restarted store to
    // take requests again.
    let wait = expiry * 2 + s.ttl * 2 + Duration::from_secs(2);
    let (successor_fence, final_value, said) =
        successor_round(&locker, &mut res, &mut holder, s, wait, fenced, holder_fence, &mut events)
            .await;
    holder.finish().await;
    events.append(&mut holder.events);
    events.sort_by_key(|e: &Event| e.t_ns);
    drop(private);
    let t = Trial::checked(arm, n, holder_fence, successor_fence, said, final_value, events);
    Ok((t, guarantees))
}

/// Cuts the private store's replica off ([`FailingStore::cut_replica`]), off the runtime.
async fn cut(
    mut private: Box<dyn FailingStore>,
    tail: &str,
    events: &mut Vec<Event>,
) -> Result<Box<dyn FailingStore>, String> {
    let tail = tail.to_owned();
    let (private, cut) = blocking(move || {
        let cut = private.cut_replica(&tail);
        (private, cut)
    })
    .await?;
    cut?;
    events.push(ev("chaos", "cut", None, Some("the replica stopped following".into())));
    Ok(private)
}

/// The successor's side of a fault trial once the holder has been cut off or its store has
/// failed: it waits up to `wait` for the key, claims and writes if it got it; the holder is
/// told to write; the successor writes once more, or, refused while the holder held on, takes
/// the key after the holder's release. Answers the successor's fence, the resource's final
/// value and what the holder said.
#[allow(clippy::too_many_arguments)]
pub(super) async fn successor_round(
    locker: &Locker,
    res: &mut http::Res,
    holder: &mut Holder,
    s: &Settings,
    wait: Duration,
    fenced: bool,
    holder_fence: u64,
    events: &mut Vec<Event>,
) -> (Option<u64>, Option<String>, String) {
    let mut lease = None;
    match locker.acquire(KEY, s.ttl * 10).wait(Wait::For(wait)).await {
        Ok(l) => {
            events.push(ev("successor", "acquire", Some(l.fence().get()), None));
            lease = Some(l);
        }
        Err(e) => events.push(ev("successor", "refused", None, Some(e.to_string()))),
    }
    // Resumed-from-the-failure point: the successor, if it got the key, works; then the holder
    // writes again.
    events.push(ev("chaos", "resume", Some(holder_fence), Some("holder writes".into())));
    if let Some(l) = &lease {
        successor_claim_and_write(res, l, fenced, events).await;
    }
    let _ = holder.stdin.write_all(b"write\n").await;
    let said =
        holder.line(Duration::from_secs(30)).await.unwrap_or_else(|e| format!("no answer: {e}"));
    if let Some(l) = &lease {
        // The successor goes on working after the holder's late write.
        tokio::time::sleep(s.ttl / 4).await;
        events.push(successor_write(res, &l.fencing(), fenced).await);
    } else {
        // Refused while the holder lived (or kept its majority): it releases after its write; then the successor must
        // get the key, with a larger fence.
        match locker.acquire(KEY, s.ttl * 10).wait(Wait::For(wait)).await {
            Ok(l) => {
                events.push(ev(
                    "successor",
                    "acquire",
                    Some(l.fence().get()),
                    Some("after the holder's release".into()),
                ));
                successor_claim_and_write(res, &l, fenced, events).await;
                lease = Some(l);
            }
            Err(e) => events.push(ev("successor", "error", None, Some(e.to_string()))),
        }
    }
    let successor_fence = lease.as_ref().map(|l| l.fence().get());
    let final_value = res.read().await;
    if let Some(l) = lease {
        let r = l.release().await;
        events.push(ev("successor", "release", successor_fence, Some(format!("{r:?}"))));
    }
    (successor_fence, final_value, said)
}

/// Connects the successor, retrying while the store recovers (a restarted server not yet
/// listening, an etcd cluster still electing), for up to 30 s.
async fn connect_after_failure(url: &str) -> Result<Locker, String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let last = match tokio::time::timeout_at(deadline, super::fences::connect(url)).await {
            Ok(Ok(l)) => return Ok(l),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "no answer".into(),
        };
        if tokio::time::Instant::now() + Duration::from_millis(100) >= deadline {
            return Err(format!(
                "{url} did not take a connection within 30 s of the failure: {last}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
