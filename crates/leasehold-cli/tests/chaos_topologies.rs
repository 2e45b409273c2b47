//! `leasehold chaos --topology …` on a ZooKeeper ensemble, PostgreSQL with a synchronous
//! standby, Redlock over five instances, a Redis Cluster, a Sentinel deployment and a
//! JetStream cluster: each
//! report read strictly, its fenced trials also read from their events independently of the
//! tool, the controls showing the hazard where the literature says there is one.

mod common;

use common::*;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one `chaos --topology` run may take before the test kills it.
const LIMIT: Duration = Duration::from_secs(300);

/// Runs `chaos --topology T --scenario S` with `trials` fenced and `control` unfenced trials;
/// its exit code and report. The run is a process group of its own: past [`LIMIT`] the whole
/// group (leasehold and the private servers it started) is killed and the test fails.
fn topology(t: &str, scenario: &str, ttl: &str, trials: usize, control: usize) -> (i32, Value) {
    let out = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["chaos", "--topology", t, "--scenario", scenario, "--ttl", ttl])
        .args(["--trials", &trials.to_string(), "--control-trials", &control.to_string()])
        .arg("--out")
        .arg(out.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let group = Pid::from_raw(-(child.id() as i32));
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > LIMIT {
            let _ = kill(group, Signal::SIGKILL);
            let _ = child.wait();
            panic!("chaos --topology {t} --scenario {scenario} ran past {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = child.wait_with_output().unwrap();
    let text = std::fs::read(out.path().join("report.json")).unwrap_or_default();
    let r = serde_json::from_slice(&text)
        .unwrap_or_else(|_| panic!("no report: {}{}", stdout(&o), stderr(&o)));
    (code(&o), r)
}

fn arm(r: &Value, name: &str) -> Value {
    r["arms"].as_array().unwrap().iter().find(|a| a["arm"] == name).unwrap().clone()
}

/// The events of trial `t` read without the tool's counters: (holder effects accepted after
/// the successor's grant, successor claims or effects refused, successor granted before the
/// holder's lost() or release began).
fn read(t: &Value) -> (bool, bool, bool) {
    let events = t["events"].as_array().unwrap();
    let at = |who: &str, what: &str| {
        events
            .iter()
            .find(|e| e["who"] == who && e["what"] == what)
            .map(|e| e["t_ns"].as_i64().unwrap())
    };
    let accepted = |e: &Value| {
        e["what"] == "effect" && e["detail"].as_str().is_some_and(|d| d.starts_with("accepted"))
    };
    let granted = at("successor", "acquire");
    let stale = granted.is_some_and(|g| {
        events
            .iter()
            .any(|e| e["who"] == "holder" && accepted(e) && e["t_ns"].as_i64().unwrap() > g)
    });
    let locked_out = events.iter().any(|e| {
        e["who"] == "successor"
            && (e["what"] == "claim-refused" || (e["what"] == "effect" && !accepted(e)))
    });
    let end = [at("holder", "lost"), at("holder", "releasing")].into_iter().flatten().min();
    let overlap = match (granted, end) {
        (Some(g), Some(e)) => g < e,
        (Some(_), None) => true,
        _ => false,
    };
    (stale, locked_out, overlap)
}

/// The strict reading every topology shares: with fencing, no stale effect accepted and no
/// successor locked out (by the tool's counts and by the events), fences in order, every
/// successor granted. Returns (unfenced trials with a stale effect, trials of each arm with
/// two holders at once).
fn strict(r: &Value) -> (usize, usize, usize) {
    let fenced = arm(r, "fenced");
    assert_eq!(fenced["stale_effects_accepted"], 0, "{r}");
    assert_eq!(fenced["successors_locked_out"], 0, "{r}");
    assert_eq!(fenced["fences_out_of_order"], 0, "{r}");
    assert_eq!(fenced["successor_acquired"], fenced["trials"], "{r}");
    let (mut stale_control, mut overlap_fenced, mut overlap_control) = (0, 0, 0);
    for t in r["trials"].as_array().unwrap() {
        let (stale, locked_out, overlap) = read(t);
        if t["arm"] == "fenced" {
            assert!(!stale && !locked_out, "fenced trial read from its events: {t}");
            if t["successor_fence"].is_u64() && t["final_value"] != "successor" {
                panic!("the successor's value is not the last one: {t}");
            }
            overlap_fenced += usize::from(overlap);
        } else {
            stale_control += usize::from(stale);
            overlap_control += usize::from(overlap);
        }
    }
    assert_eq!(arm(r, "unfenced")["stale_effects_accepted"], stale_control, "{r}");
    (stale_control, overlap_fenced, overlap_control)
}

/// The ensemble's leader killed mid-hold: one holder at a time, czxid fences growing; the
/// unfenced holder's late write gets through once the successor has the key.
#[test]
fn chaos_topology_zk_ensemble_failover() {
    let (code, r) = topology("zk-ensemble", "failover", "300ms", 3, 2);
    assert_eq!(code, 0, "{r}");
    let (stale_control, overlap_f, overlap_c) = strict(&r);
    assert_eq!((overlap_f, overlap_c), (0, 0), "a second holder on an ensemble: {r}");
    let at_once =
        r["trials"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["arm"] == "unfenced")
            .filter(|t| {
                t["events"].as_array().unwrap().iter().any(|e| {
                    e["who"] == "successor" && e["what"] == "acquire" && e["detail"].is_null()
                })
            })
            .count();
    assert_eq!(stale_control, at_once, "every control whose successor got the key at once: {r}");
}

/// The holder cut off from every member: its lost() before the successor's grant (chaos
/// exits 1 otherwise), its admit() false before that, both timed in the setup line.
#[test]
fn chaos_topology_zk_ensemble_partition() {
    let (code, r) = topology("zk-ensemble", "partition", "300ms", 3, 1);
    assert_eq!(code, 0, "{r}");
    let (stale_control, overlap_f, overlap_c) = strict(&r);
    assert_eq!((overlap_f, overlap_c), (0, 0), "{r}");
    assert_eq!(stale_control, 1, "{r}");
    assert_eq!(arm(&r, "fenced")["lost_after_successor_grant"], 0, "{r}");
    assert!(r["arms"][0]["lost_before_grant_ms"]["min"].as_f64().unwrap() > 0.0, "{r}");
    let setup = r["setup"].as_str().unwrap();
    assert!(setup.contains("admit() false") && !setup.contains("admit() false never"), "{setup}");
}

/// The holder cut off from all three JetStream nodes (the cluster itself whole): its lost()
/// before the successor's grant (chaos exits 1 otherwise), its admit() false before that;
/// one holder at a time, and the unfenced control's late write accepted.
#[test]
fn chaos_topology_nats_cluster_partition() {
    let (code, r) = topology("nats-cluster", "partition", "300ms", 2, 1);
    assert_eq!(code, 0, "{r}");
    let (stale_control, overlap_f, overlap_c) = strict(&r);
    assert_eq!((overlap_f, overlap_c), (0, 0), "{r}");
    assert_eq!(stale_control, 1, "{r}");
    assert_eq!(arm(&r, "fenced")["lost_after_successor_grant"], 0, "{r}");
    assert!(r["arms"][0]["lost_before_grant_ms"]["min"].as_f64().unwrap() > 0.0, "{r}");
    let setup = r["setup"].as_str().unwrap();
    assert!(setup.contains("three-node JetStream cluster"), "{setup}");
    assert!(setup.contains("admit() false") && !setup.contains("admit() false never"), "{setup}");
}

/// The primary killed, the synchronous standby promoted: the grant survived (no second
/// holder), and doctor's verdict agreed with pg_stat_replication (chaos fails otherwise).
#[test]
fn chaos_topology_pg_sync_failover() {
    let (code, r) = topology("pg-sync", "failover", "300ms", 3, 2);
    assert_eq!(code, 0, "{r}");
    let (_, overlap_f, overlap_c) = strict(&r);
    assert_eq!((overlap_f, overlap_c), (0, 0), "a second holder after promotion: {r}");
    let setup = r["setup"].as_str().unwrap();
    assert!(setup.contains("1 synchronous") && setup.contains("standby1|sync"), "{setup}");
}

/// A minority of five instances killed and restarted empty, or cut off: exclusion kept (the
/// successor gets the key only after the holder's release), so even the control shows no
/// stale write. A 1 s lease gives each instance 100 ms to answer (a tenth of the TTL): with
/// 300 ms, 30 ms each, a loaded machine made the reachable majority's renewal answers late
/// and the holder lose its lease (exclusion kept, the holder keeping it not).
#[test]
fn chaos_topology_redlock5_minority() {
    for scenario in ["store-kill", "partition"] {
        let (code, r) = topology("redlock5", scenario, "1s", 3, 2);
        assert_eq!(code, 0, "{scenario}: {r}");
        let (stale_control, overlap_f, overlap_c) = strict(&r);
        assert_eq!((overlap_f, overlap_c, stale_control), (0, 0, 0), "{scenario}: {r}");
        for t in r["trials"].as_array().unwrap() {
            let late = t["events"].as_array().unwrap().iter().any(|e| {
                e["who"] == "successor"
                    && e["what"] == "acquire"
                    && e["detail"] == "after the holder's release"
            });
            assert!(late, "{scenario}: the successor was granted while the holder held: {t}");
        }
    }
}

/// A majority restarted empty: a second holder (the hazard), whose external fence is larger,
/// so the resource refuses the stale holder; the unfenced control accepts its write.
#[test]
fn chaos_topology_redlock5_majority() {
    let (code, r) = topology("redlock5-majority", "store-kill", "1s", 3, 2);
    assert_eq!(code, 0, "{r}");
    let (stale_control, overlap_f, overlap_c) = strict(&r);
    assert!(overlap_f + overlap_c > 0, "no second holder with a majority forgotten: {r}");
    assert_eq!(stale_control, 2, "the control accepts the stale holder's write: {r}");
    assert!(r["setup"].as_str().unwrap().contains("external source"), "{r}");
}

/// Redis Cluster or Sentinel `failover`, which loses the holder's grant on purpose: the
/// replica cut off just before the grant, the master killed, the replica promoted at once.
/// Every trial's promoted node lacked the grant (read on it before the successor); in at
/// least one fenced trial (all, on an idle machine) the successor, through the same URL, was
/// granted the key before the holder's `lost()` or release, by the tool's count and by the
/// events, and its larger fence kept the stale holder's late write out; the control accepted
/// it. The general verdict holds: no stale effect, no locked-out successor, fences in order.
fn lost_grant(t: &str, ttl: &str) {
    let (code, r) = topology(t, "failover", ttl, 2, 1);
    assert_eq!(code, 0, "{r}");
    let (stale_control, overlap_f, _) = strict(&r);
    let lost_late = arm(&r, "fenced")["lost_after_successor_grant"].as_u64().unwrap();
    assert!(lost_late >= 1 && overlap_f >= 1, "no fenced trial had two holders at once: {r}");
    assert_eq!(stale_control, 1, "the control accepts the stale holder's write: {r}");
    for trial in r["trials"].as_array().unwrap() {
        let events = trial["events"].as_array().unwrap();
        let lost = events.iter().any(|e| {
            e["what"] == "failover"
                && e["detail"].as_str().is_some_and(|d| d.contains("the holder's grant was lost"))
        });
        assert!(lost, "the promoted node had the holder's grant: {trial}");
        let (_, _, overlap) = read(trial);
        if overlap && trial["arm"] == "fenced" {
            let said = trial["holder_said"].as_str().unwrap();
            assert!(said.starts_with("rejected: stale fence"), "{trial}");
        }
    }
    let setup = r["setup"].as_str().unwrap();
    assert!(setup.contains("the holder's grant was lost in 3 of 3 trials"), "{setup}");
}

#[test]
fn chaos_topology_redis_cluster_failover_loses_the_grant() {
    lost_grant("redis-cluster", "5s");
}

#[test]
fn chaos_topology_redis_sentinel_failover_loses_the_grant() {
    lost_grant("redis-sentinel", "10s");
}

/// A scenario a topology does not run, or an unknown topology, is an error naming what runs.
#[test]
fn chaos_topology_refuses_what_it_cannot_run() {
    for (t, s, says) in [
        ("pg-sync", "partition", "runs: failover"),
        ("nope", "failover", "available: zk-ensemble"),
        ("redlock5-majority", "partition", "runs: store-kill"),
    ] {
        let o = Command::new(BIN)
            .args(["chaos", "--topology", t, "--scenario", s, "--trials", "1", "--out"])
            .arg(tempfile::tempdir().unwrap().path())
            .output()
            .unwrap();
        assert_ne!(code(&o), 0, "{t} {s}");
        assert!(stderr(&o).contains(says), "{t} {s}: {}", stderr(&o));
    }
}
