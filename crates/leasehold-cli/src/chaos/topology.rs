//! `leasehold chaos --topology NAME`: the store-failure scenarios on deployments a store URL
//! alone does not describe (a ZooKeeper ensemble, PostgreSQL with a synchronous standby,
//! Redlock over five instances), started privately for every trial
//! ([`leasehold_harness::stores::topology`]).
//!
//! - `zk-ensemble`: `failover` / `store-kill` kill the leader mid-hold; `partition` cuts the
//!   holder off the whole ensemble ([`partition`]), its `admit()` and `lost()` timed against
//!   its session timeout.
//! - `pg-sync`: `failover` kills the primary and promotes the synchronous standby; doctor's
//!   verdict on a fresh copy of the deployment is checked against `pg_stat_replication`.
//! - `redlock5`: `store-kill` kills a minority (2 of 5) and restarts it empty; `partition`
//!   cuts the holder off a minority. `redlock5-majority`: `store-kill` restarts instances
//!   empty until a majority has forgotten the grant, the hazard the literature describes.
//!   Both arms get fences from an external source (a file in `--out`, `max(last + 1, clock
//!   µs)` under `flock`), which the resource checks in the fenced arm.
//!
//! - `nats-cluster`: three JetStream nodes; `failover` / `store-kill` kill the node leading
//!   the grants' stream mid-hold (`store-kill` restarts it on its store); `partition` cuts
//!   the holder off all three.
//!
//! - `redis-cluster` and `redis-sentinel`: `failover` loses the holder's grant on purpose,
//!   the hazard asynchronous replication allows. After a warm-up grant has replicated and
//!   once the holder has connected, just before its grant, the replica (of the key's master;
//!   of the primary) is frozen (SIGSTOP) and its replication link closed (`CLIENT KILL TYPE
//!   replica`), so the grant cannot reach it; after the holder's first write the master or
//!   primary is killed (-9), the replica resumed and promoted at once (`CLUSTER FAILOVER
//!   TAKEOVER`; `SENTINEL FAILOVER`), and what it holds of the key is read before any
//!   successor (the failover event says the topology's `loses_grant` words when neither the
//!   lease nor the holder's fence is there; the setup line counts those trials). The
//!   successor, through the same `redis-cluster://` / `redis-sentinel://` URL, is granted
//!   the key while the holder still believes it holds it (a lease long enough that its first
//!   renewal, at a third of it, comes after the successor's grant: `--ttl 5s` on the
//!   cluster, `--ttl 10s` with sentinels, whose promotion takes about a second). A second holder is allowed here;
//!   the general verdict is what must hold: its fence (the promoted node's clock) is larger,
//!   so the resource refuses the stale holder (no stale effect, no locked-out successor),
//!   and the unfenced control shows the stale write accepted.
//!
//! Read strictly, beyond the general verdict: where the topology promises one holder (every
//! one but `redlock5-majority`), a holder whose `lost()` came after the successor's grant
//! fails the run, whatever the backend's `Guarantees` allow in general.

use leasehold_harness::stores::{
    self,
    topology::{self, Topology},
};

use super::{Outline, Settings, Trial, faults, fences, progress};

mod partition;

/// The options a topology's URL carries: the `--store` URL's, when it has the topology's
/// scheme, else its defaults (a 1 s ZooKeeper session).
fn options(s: &Settings, t: &Topology) -> String {
    if s.url.scheme() != t.scheme {
        return t.default_options.to_owned();
    }
    let tail = s.url.path_and_options();
    tail.find('?').map_or(String::new(), |i| tail[i..].to_owned())
}

/// Runs `s.scenario` on topology `name`.
pub(super) async fn run(s: &Settings, name: &str) -> Result<(Vec<Trial>, Outline), String> {
    let topo = topology::find(name)?;
    let scheme = topo.scheme.as_str();
    if topo.external_fences {
        let file = s.out.join("fences");
        let _ = std::fs::remove_file(&file);
        fences::use_file(file)?;
    }
    // The trials see the topology's scheme and options; the host part is the private one.
    let t = Settings {
        url: format!("{scheme}://{}{}", topo.placeholder, options(s, topo))
            .parse()
            .map_err(|e| format!("{e}"))?,
        scenario: s.scenario,
        trials: s.trials,
        control_trials: s.control_trials,
        ttl: s.ttl,
        out: s.out.clone(),
        topology: s.topology.clone(),
        permits: None,
        locker: None,
    };
    let (trials, guarantees, mut setup) = match &topo.partition {
        Some(p) if t.scenario == super::Scenario::Partition => partition::run(&t, p).await?,
        _ => {
            let plan = topo.plan(&t.scenario.to_string())?;
            let failover = t.scenario == super::Scenario::Failover;
            let mut trials = Vec::new();
            let mut guarantees = None;
            for fenced in [true, false] {
                let count = if fenced { t.trials } else { t.control_trials };
                for n in 0..count {
                    progress(&t, if fenced { "fenced" } else { "unfenced" }, n, count);
                    let (trial, g) = faults::trial(&t, plan, failover, fenced, n).await?;
                    trials.push(trial);
                    guarantees = Some(g);
                }
            }
            (trials, guarantees.ok_or("no trials were run")?, plan.setup.to_owned())
        }
    };
    if let Some(check) = topo.check {
        setup.push_str(&format!("; {}", check().await?));
    }
    if let Some(grant_lost) = topo.loses_grant {
        let lost = trials
            .iter()
            .filter(|t| {
                t.events.iter().any(|e| {
                    e.what == "failover"
                        && e.detail.as_deref().is_some_and(|d| d.contains(grant_lost))
                })
            })
            .count();
        setup.push_str(&format!(
            "; read on the promoted node before the successor: {grant_lost} in {lost} of {} trials",
            trials.len()
        ));
    }
    if topo.external_fences {
        setup.push_str(&format!(
            "; fences from an external source (the file {}: max(last + 1, clock µs) under \
             flock), given to holder and successor",
            s.out.join("fences").display()
        ));
    }
    let outline = Outline {
        store: format!("{scheme}://(private {name}){}", options(s, topo)),
        guarantees,
        resource: format!("{}, fresh for each trial", stores::own_resource(&s.out).what),
        setup: Some(setup),
    };
    Ok((trials, outline))
}

/// The topology's own strict reading, after the general verdict: where the topology keeps
/// one holder through the failure, no holder may learn of its loss after the successor's
/// grant.
pub fn verdict(name: &str, arms: &[leasehold_harness::history::chaos::Arm]) -> Result<(), String> {
    // A topology that admits a second holder (asynchronous replication lost with the
    // holder's grant on purpose, a Redlock majority restarted empty): only the general
    // verdict applies (no stale effect accepted, no locked-out successor, fences in order).
    if !topology::find(name)?.one_holder {
        return Ok(());
    }
    for a in arms {
        if a.lost_after_successor_grant > 0 {
            return Err(format!(
                "{} trial(s) of the {} arm had a second holder (the successor was granted \
                 before the holder's lost()) on {name}, which keeps one holder through this \
                 failure",
                a.lost_after_successor_grant, a.arm
            ));
        }
    }
    Ok(())
}

/// How long a holder had between a fault and its `admit()` turning false / its `lost()`, and
/// the successor's grant, over the trials (for the report's setup line).
pub(super) fn timing(trials: &[Trial], arm: &str) -> Option<String> {
    let after = |t: &Trial, who: &str, what: &str| {
        let cut = t.events.iter().find(|e| e.who == "chaos" && e.what == "pause")?.t_ns;
        let e = t.events.iter().find(|e| e.who == who && e.what == what)?.t_ns;
        Some((e - cut) as f64 / 1e6)
    };
    let stats = |who: &str, what: &str| {
        let v = trials.iter().filter(|t| t.arm == arm).filter_map(|t| after(t, who, what));
        leasehold_harness::history::chaos::Stats::of(v.collect())
    };
    let show = |s: Option<leasehold_harness::history::chaos::Stats>| {
        s.map_or("never".to_owned(), |s| {
            format!(
                "{} / {} / {} ms (min / median / max, {} trials)",
                s.min, s.median, s.max, s.trials
            )
        })
    };
    Some(format!(
        "{arm} arm, after the cut: holder's admit() false {}; holder's lost() {}; successor's \
         grant {}",
        show(stats("holder", "admit-false")),
        show(stats("holder", "lost")),
        show(stats("successor", "acquire")),
    ))
}
