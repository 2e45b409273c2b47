//! `leasehold chaos --topology NAME`: the store-failure scenarios on deployments a store URL
//! alone does not describe (a ZooKeeper ensemble, PostgreSQL with a synchronous standby,
//! Redlock over five instances), started privately for every trial
//! ([`leasehold_harness::servers::topology`]).
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
//! - `redis-cluster` and `redis-sentinel`: `failover` loses the holder's grant on purpose,
//!   the hazard asynchronous replication allows. After a warm-up grant has replicated and
//!   once the holder has connected, just before its grant, the replica (of the key's master;
//!   of the primary) is frozen (SIGSTOP) and its replication link closed (`CLIENT KILL TYPE
//!   replica`), so the grant cannot reach it; after the holder's first write the master or
//!   primary is killed (-9), the replica resumed and promoted at once (`CLUSTER FAILOVER
//!   TAKEOVER`; `SENTINEL FAILOVER`), and what it holds of the key is read before any
//!   successor (the failover event says [`servers::GRANT_LOST`] when neither the lease nor
//!   the holder's fence is there; the setup line counts those trials). The successor, through
//!   the same `redis-cluster://` / `redis-sentinel://` URL, is granted the key while the
//!   holder still believes it holds it (a lease long enough that its first renewal, at a
//!   third of it, comes after the successor's grant: `--ttl 5s` on the cluster, `--ttl 10s`
//!   with sentinels, whose promotion takes about a second). A second holder is allowed here;
//!   the general verdict is what must hold: its fence (the promoted node's clock) is larger,
//!   so the resource refuses the stale holder (no stale effect, no locked-out successor),
//!   and the unfenced control shows the stale write accepted.
//!
//! Read strictly, beyond the general verdict: where the topology promises one holder (every
//! one but `redlock5-majority`), a holder whose `lost()` came after the successor's grant
//! fails the run, whatever the backend's `Guarantees` allow in general.

#[cfg(feature = "redis")]
use std::io::{Read as _, Seek as _, Write as _};
use std::path::PathBuf;
use std::sync::OnceLock;

use leasehold::Locker;
#[cfg(feature = "redis")]
use leasehold::{FenceRepeat, FenceToken, Key};
use leasehold_harness::servers;

use super::{Outline, Settings, Trial, faults, progress};

mod partition;

/// Where a holder process finds the external fence source's file (Redlock topologies).
pub const ENV_FENCES: &str = "LEASEHOLD_CHAOS_FENCES";

/// This process's fence file (the successor's), set once by [`run`].
static FENCES: OnceLock<PathBuf> = OnceLock::new();

/// Fences from a file shared by every process of a run: `max(last + 1, clock µs)` under an
/// exclusive `flock`, written and synced before it is handed out, so it never goes back
/// while the file lasts (and, clock-backed, after that too).
#[cfg(feature = "redis")]
#[derive(Debug)]
struct FileFences(PathBuf);

#[cfg(feature = "redis")]
#[async_trait::async_trait]
impl leasehold::backends::redis::redlock::FenceSource for FileFences {
    async fn next(&self, _: &Key) -> leasehold::Result<FenceToken> {
        let path = self.0.clone();
        let next = tokio::task::spawn_blocking(move || bump(&path))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()));
        next.map(FenceToken::new).map_err(|e| leasehold::Error::Unavailable {
            message: format!("fence file: {e}"),
            source: None,
        })
    }
    fn promise(&self) -> FenceRepeat {
        FenceRepeat::ClockBacked
    }
}

#[cfg(feature = "redis")]
fn bump(path: &std::path::Path) -> std::io::Result<u64> {
    use nix::fcntl::{Flock, FlockArg};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    let mut f = Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| e)?;
    let mut s = String::new();
    f.read_to_string(&mut s)?;
    let last: u64 = s.trim().parse().unwrap_or(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    let next = (last + 1).max(now);
    f.set_len(0)?;
    f.rewind()?;
    write!(f, "{next}")?;
    f.sync_data()?;
    Ok(next)
}

/// Connects to `url`; a `redlock://` URL gets the run's external fence source when there is
/// one (this process's, or a holder's from [`ENV_FENCES`]).
pub(super) async fn connect(url: &str) -> leasehold::Result<Locker> {
    let url = leasehold::StoreUrl::parse(url)?;
    let file = FENCES.get().cloned().or_else(|| std::env::var_os(ENV_FENCES).map(PathBuf::from));
    #[cfg(feature = "redis")]
    if let Some(f) = file.filter(|_| url.scheme() == leasehold::Scheme::Redlock) {
        let store = leasehold::backends::redis::tools::redlock(&url).await?;
        return Ok(Locker::new(store.with_fence_source(std::sync::Arc::new(FileFences(f)))));
    }
    #[cfg(not(feature = "redis"))]
    let _ = file;
    Locker::open(&url, leasehold::DEFAULT_CONNECT_TIMEOUT).await
}

/// The environment a holder process gets: the fence file, when the run has one.
pub(super) fn worker_env() -> Vec<(&'static str, PathBuf)> {
    FENCES.get().map(|f| (ENV_FENCES, f.clone())).into_iter().collect()
}

/// The options a topology's URL carries: the `--store` URL's, when it has the topology's
/// scheme, else its defaults (a 1 s ZooKeeper session).
fn options(s: &Settings, scheme: &str) -> String {
    if s.url.scheme().as_str() == scheme {
        let rest = s.url.path_and_options();
        return rest.find('?').map_or(String::new(), |i| rest[i..].to_owned());
    }
    match scheme {
        "zk" => "?session=1s".into(),
        _ => String::new(),
    }
}

/// The host part of a topology's URL before its private servers exist (it only has to
/// parse: each trial's servers give the real one).
fn placeholder(scheme: &str) -> &'static str {
    match scheme {
        "redis-cluster" => "127.0.0.1:1",
        "redis-sentinel" => "127.0.0.1:1/leasehold",
        _ => "127.0.0.1:1",
    }
}

/// Runs `s.scenario` on topology `name`.
pub(super) async fn run(s: &Settings, name: &str) -> Result<(Vec<Trial>, Outline), String> {
    let scheme = servers::topology_scheme(name)
        .ok_or_else(|| format!("unknown topology {name:?}; available: {}", servers::TOPOLOGIES))?;
    if scheme == "redlock" {
        let file = s.out.join("fences");
        let _ = std::fs::remove_file(&file);
        if FENCES.set(file.clone()).is_err() && FENCES.get() != Some(&file) {
            return Err("one fence file per process".into());
        }
    }
    // The trials see the topology's scheme and options; the host part is the private one.
    let t = Settings {
        url: format!("{scheme}://{}{}", placeholder(scheme), options(s, scheme))
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
    let partitioned = matches!(name, "zk-ensemble" | "redlock5");
    let (trials, guarantees, mut setup) = if t.scenario == super::Scenario::Partition && partitioned
    {
        partition::run(&t, name).await?
    } else {
        let plan = servers::topology(name, &t.scenario.to_string())?;
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
    };
    if name == "pg-sync" {
        setup.push_str(&format!("; {}", doctor_on_sync_pair().await?));
    }
    if matches!(name, "redis-cluster" | "redis-sentinel") {
        let lost = trials
            .iter()
            .filter(|t| {
                t.events.iter().any(|e| {
                    e.what == "failover"
                        && e.detail.as_deref().is_some_and(|d| d.contains(servers::GRANT_LOST))
                })
            })
            .count();
        setup.push_str(&format!(
            "; read on the promoted node before the successor: {} in {lost} of {} trials",
            servers::GRANT_LOST,
            trials.len()
        ));
    }
    if scheme == "redlock" {
        setup.push_str(&format!(
            "; fences from an external source (the file {}: max(last + 1, clock µs) under \
             flock), given to holder and successor",
            s.out.join("fences").display()
        ));
    }
    let outline = Outline {
        store: format!("{scheme}://(private {name}){}", options(s, scheme)),
        guarantees,
        resource: format!(
            "SQLite file {} (table data), fresh for each trial",
            s.out.join("resource.db").display()
        ),
        setup: Some(setup),
    };
    Ok((trials, outline))
}

/// doctor's verdict on a fresh synchronous pair, checked against `pg_stat_replication`: an
/// error when they disagree.
async fn doctor_on_sync_pair() -> Result<String, String> {
    let pair = faults::blocking(servers::PgSyncPair::start).await?;
    let url = pair.primary.url("");
    let url: leasehold::StoreUrl = url.parse().map_err(|e| format!("{e}"))?;
    let probe = leasehold::probe::probe(&url).await.map_err(|e| format!("doctor: {e}"))?;
    let state = faults::blocking(move || (pair.sync_state(), pair)).await?.0;
    let verdict = probe
        .verdicts
        .iter()
        .find(|v| v.contains("standby"))
        .cloned()
        .unwrap_or_else(|| "no verdict on standbys".into());
    let says_sync = verdict.contains("1 synchronous") && verdict.contains("keeps every grant");
    let is_sync = state == format!("{}|sync", servers::SYNC_NAME);
    if says_sync != is_sync {
        return Err(format!(
            "doctor says {verdict:?} but pg_stat_replication says {state:?} (application_name|\
             sync_state)"
        ));
    }
    Ok(format!("doctor on this deployment: {verdict:?}; pg_stat_replication: {state} (they agree)"))
}

/// The topology's own strict reading, after the general verdict: where the topology keeps
/// one holder through the failure, no holder may learn of its loss after the successor's
/// grant.
pub fn verdict(name: &str, arms: &[leasehold_harness::history::chaos::Arm]) -> Result<(), String> {
    // Asynchronous replication (a Redis Cluster master or a Sentinel primary lost, with the
    // holder's grant, on purpose) admits a second holder: only the general verdict applies
    // (no stale effect accepted, no locked-out successor, fences in order).
    if matches!(name, "redlock5-majority" | "redis-cluster" | "redis-sentinel") {
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
