//! `unknown-acquire`: an acquire whose request reaches the store but whose reply is lost.
//!
//! Each trial connects an acquirer to the store through a fault proxy, drops the store's
//! replies (from the acquire's first, second, third or fourth reply on, trial by trial, so
//! the last round trip of a multi-step acquisition is hit too) and acquires: the store grants, the acquirer's op timeout ends in an unknown
//! outcome, and the library schedules an owner-conditional cleanup (`docs/design.md` §3). An observer
//! (this process, connected directly) then measures how long the key stays blocked by that
//! orphaned grant. Two arms:
//! - `reconnect`: right after the unknown outcome the proxy resets the connection and passes
//!   traffic again. The orphan must be gone well before its TTL (a long one, ten times
//!   `--ttl`, at least 3 s): the cleanup, not the expiry, must remove it.
//! - `cut`: halfway through the acquire's wait the link goes dark both ways and stays dark, so
//!   the cleanup cannot reach the store. The orphan must be gone once the store's own expiry
//!   (the TTL, or the etcd/ZooKeeper session, with slack for the server's rounding) has
//!   passed.

use std::future::IntoFuture;
use std::time::{Duration, Instant};

use leasehold::{Error, Locker, Wait};
use leasehold_harness::proxy::{Fault, FaultProxy};

use super::{Event, KEY, Outline, Settings, Trial, ev, progress, session_timeout, through};

/// Runs the trials: `--trials` of the `reconnect` arm, `--control-trials` of the `cut` arm.
pub(super) async fn run(s: &Settings) -> Result<(Vec<Trial>, Outline), String> {
    through(&s.url, "127.0.0.1:1".parse().expect("addr"))?;
    let observer = super::connect(&s.url).await?;
    let mut trials = Vec::new();
    for (arm, count) in [("reconnect", s.trials), ("cut", s.control_trials)] {
        for n in 0..count {
            progress(s, arm, n, count);
            trials.push(trial(s, &observer, arm, n).await?);
        }
    }
    let outline = Outline {
        store: s.url.to_string(),
        guarantees: observer.guarantees(),
        resource: "none (this scenario checks the lock store only)".into(),
        setup: Some(format!(
            "the acquirer reaches the store through a fault proxy on loopback that drops \
             its replies from the acquire's 1st, 2nd, 3rd or 4th reply on (trial by trial), \
             op timeout {:?}; reconnect arm: the connection is reset right after \
             the unknown outcome (grant TTL {:?}); cut arm: the link goes dark halfway through \
             the acquire and stays dark (grant TTL {:?})",
            op_timeout(s),
            long_ttl(s),
            s.ttl
        )),
    };
    Ok((trials, outline))
}

fn op_timeout(s: &Settings) -> Duration {
    (s.ttl / 4).clamp(Duration::from_millis(200), Duration::from_secs(2))
}

fn long_ttl(s: &Settings) -> Duration {
    (s.ttl * 10).max(Duration::from_secs(3))
}

async fn trial(
    s: &Settings,
    observer: &Locker,
    arm: &'static str,
    n: usize,
) -> Result<Trial, String> {
    let (upstream, _) = through(&s.url, "127.0.0.1:1".parse().expect("addr"))?;
    let proxy = FaultProxy::start(upstream).await.map_err(|e| e.to_string())?;
    let url = through(&s.url, proxy.addr())?.1;
    let op = op_timeout(s);
    let acquirer = tokio::time::timeout(Duration::from_secs(30), super::connect(&url))
        .await
        .map_err(|_| "the acquirer could not connect through the proxy within 30 s".to_string())??
        .with_op_timeout(op);
    let cut = arm == "cut";
    let ttl = if cut { s.ttl } else { long_ttl(s) };
    // When a grant blocking the key would be an orphan: the cleanup should beat the long TTL
    // by far; a cut-off grant must go with the store's own expiry. Stores round short expiries
    // up and check them periodically (etcd raises a lease TTL to its minimum, 2 s with default
    // timers, and scans every 500 ms), so the bound is twice the asked expiry plus slack: it
    // catches a grant that never goes away, and the report gives the measured lifetimes.
    let bound = if cut {
        s.ttl.max(session_timeout(&s.url)) * 2 + op + Duration::from_secs(1)
    } else {
        ttl / 2
    };
    let mut events: Vec<Event> = Vec::new();
    // Trial by trial, the fault starts at the first, second, third or fourth reply of the
    // acquire, so every round trip of a multi-step acquisition gets its turn.
    let after = (n % 4) as u32;
    proxy.set(Fault::DropRepliesAfter(after));
    events.push(ev(
        "chaos",
        "pause",
        None,
        Some(format!("store replies dropped after {after} more")),
    ));
    events.push(ev("holder", "acquire", None, Some("request sent".into())));
    let attempt = acquirer.acquire(KEY, ttl);
    let outcome = if cut {
        let darken = async {
            tokio::time::sleep(op / 2).await;
            proxy.set(Fault::Blackhole);
        };
        tokio::join!(attempt.into_future(), darken).0
    } else {
        attempt.await
    };
    let unknown_at = Instant::now();
    let mut holder_fence = 0;
    let mut answered = false;
    match outcome {
        Err(Error::UnknownOutcome(e)) => events.push(ev("holder", "unknown", None, Some(e))),
        Ok(lease) => {
            // Every reply the acquire needed got through before the fault: not this
            // scenario's case (the unknown column counts the trials that were). Release it
            // over a fresh link, so it blocks nobody.
            holder_fence = lease.fence().get();
            answered = true;
            events.push(ev("holder", "granted", Some(holder_fence), Some("answer arrived".into())));
            proxy.set(Fault::Reset);
            tokio::time::sleep(Duration::from_millis(150)).await;
            proxy.set(Fault::Pass);
            let r = lease.release().await;
            events.push(ev("holder", "release", Some(holder_fence), Some(format!("{r:?}"))));
        }
        Err(e) => events.push(ev("holder", "error", None, Some(e.to_string()))),
    }
    if !cut {
        proxy.set(Fault::Reset);
        tokio::time::sleep(Duration::from_millis(150)).await;
        proxy.set(Fault::Pass);
        events.push(ev("chaos", "resume", None, Some("connection reset; traffic passes".into())));
    }
    // Is the orphan there?
    let probe = observer.acquire(KEY, s.ttl).await;
    let orphan_seen = matches!(probe, Err(Error::Busy { .. }));
    let got = match probe {
        Ok(l) => Ok(l),
        Err(Error::Busy { .. }) => {
            observer.acquire(KEY, s.ttl).wait(Wait::For(bound * 3 + Duration::from_secs(5))).await
        }
        Err(e) => Err(e),
    };
    let orphan_ms = unknown_at.elapsed().as_secs_f64() * 1e3;
    let successor_fence = match got {
        Ok(l) => {
            let f = l.fence().get();
            events.push(ev("successor", "acquire", Some(f), None));
            if cut {
                events.push(ev("chaos", "resume", None, Some("(link still dark)".into())));
            }
            let r = l.release().await;
            events.push(ev("successor", "release", Some(f), Some(format!("{r:?}"))));
            Some(f)
        }
        Err(e) => {
            events.push(ev("successor", "error", None, Some(e.to_string())));
            None
        }
    };
    proxy.set(Fault::Reset);
    drop(acquirer);
    events.sort_by_key(|e| e.t_ns);
    let mut t = Trial::checked(arm, n, holder_fence, successor_fence, String::new(), None, events);
    t.fence_out_of_order = false;
    t.lost_late = false;
    t.lost_lead_ms = None;
    t.orphan_seen = orphan_seen && !answered;
    t.orphan_ms = Some(orphan_ms);
    t.orphan =
        successor_fence.is_none() || (t.orphan_seen && orphan_ms > bound.as_secs_f64() * 1e3);
    Ok(t)
}
