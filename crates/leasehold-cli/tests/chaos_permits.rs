//! `leasehold chaos --scenario stalled-holder --permits N`: a frozen permit holder's late
//! write is refused by the slot-fenced resource and gets through without fencing; a store
//! that cannot hold semaphores is refused with exit 64 and its own error.

mod common;

use common::*;
use std::process::Command;

/// Runs `--permits n` with 3 fenced and 2 control trials and returns the report, checking it
/// as the mutex run is read: with fencing 0 stale effects, 0 locked-out successors, fences in
/// order, every successor in the frozen holder's slot `KEY#0`; without it, every stale
/// effect accepted.
fn permits_run(store: &str, n: u32) -> serde_json::Value {
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(BIN)
        .env("LEASEHOLD_STORE", store)
        .args(["chaos", "--scenario", "stalled-holder"])
        .args(["--permits", &n.to_string(), "--trials", "3", "--control-trials", "2"])
        .args(["--ttl", "300ms", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains(&format!("a semaphore of {n}")), "{}", stdout(&o));
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("report.json")).unwrap()).unwrap();
    assert_eq!(r["permits"], n, "{r}");
    let arm =
        |a: &str| r["arms"].as_array().unwrap().iter().find(|x| x["arm"] == a).unwrap().clone();
    let (fenced, unfenced) = (arm("fenced"), arm("unfenced"));
    assert_eq!(fenced["trials"], 3, "{r}");
    assert_eq!(fenced["successor_acquired"], 3, "{r}");
    assert_eq!(fenced["stale_effects_accepted"], 0, "{r}");
    assert_eq!(fenced["successors_locked_out"], 0, "{r}");
    assert_eq!(fenced["fences_out_of_order"], 0, "{r}");
    assert_eq!(unfenced["stale_effects_accepted"], 2, "the control must show stale writes: {r}");
    let slot0 = "leasehold-chaos:stalled-holder#0";
    for t in r["trials"].as_array().unwrap() {
        let events = t["events"].as_array().unwrap();
        let detail = |who: &str| {
            let e = events.iter().find(|e| e["who"] == who && e["what"] == "acquire");
            e.and_then(|e| e["detail"].as_str()).unwrap_or_default().to_owned()
        };
        assert_eq!(detail("holder"), slot0, "{t}");
        assert_eq!(detail("successor"), slot0, "{t}");
        if t["arm"] == "fenced" {
            assert!(t["holder_said"].as_str().unwrap().contains("stale fence"), "{t}");
            assert_eq!(t["final_value"], "successor", "{t}");
        }
    }
    r
}

#[test]
fn chaos_permits_sqlite() {
    let d = tempfile::tempdir().unwrap();
    permits_run(&format!("sqlite://{}/l.db", d.path().display()), 3);
}

#[test]
fn chaos_permits_redis() {
    let server = leasehold_testkit::stores::redis::server::RedisServer::start();
    permits_run(&server.url(), 3);
    // One permit: the semaphore is a mutex of slot KEY#0, and the same holds.
    permits_run(&server.url(), 1);
}

/// The file store holds no semaphores: refused before any trial, with the store's own error.
#[test]
fn chaos_permits_refused_where_the_store_cannot() {
    let d = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(BIN)
        .env("LEASEHOLD_STORE", format!("file://{}", d.path().display()))
        .args(["chaos"])
        .args(["--scenario", "stalled-holder", "--permits", "3", "--trials", "1", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    assert_eq!(code(&o), 64, "{}{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).contains("semaphore"), "{}", stderr(&o));
    assert!(!out.path().join("report.json").exists());
    // --permits belongs to stalled-holder on the --store URL only.
    let o = Command::new(BIN)
        .env("LEASEHOLD_STORE", format!("sqlite://{}/l.db", d.path().display()))
        .args(["chaos"])
        .args(["--scenario", "partition", "--permits", "3", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    assert_eq!(code(&o), 64, "{}{}", stdout(&o), stderr(&o));
}
