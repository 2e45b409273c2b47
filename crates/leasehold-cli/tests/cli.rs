//! The `leasehold` binary as a user runs it: exit codes, environment, contention, loss.

mod common;

use common::*;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

#[test]
fn run_exports_the_grant_and_returns_the_child_code() {
    let e = Env::new();
    let o = e.run(&[
        "run",
        "job",
        "--",
        "sh",
        "-c",
        "echo key=$LEASEHOLD_KEY; echo fence=$LEASEHOLD_FENCE; echo owner=$LEASEHOLD_OWNER; exit 3",
    ]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(field(&out, "key"), "job");
    // Fences are clock-backed: microseconds since 1970, below 2^53.
    let fence: u64 = field(&out, "fence").parse().unwrap();
    assert!(fence > 1_000_000_000_000_000 && fence < 1 << 53, "{fence}");
    assert_eq!(field(&out, "owner").len(), 32);
    // Released at exit: nobody holds it.
    let s = e.run(&["status", "--json", "job"]);
    assert_eq!(stdout(&s).trim(), "[]");
}

#[test]
fn fences_only_grow_across_runs() {
    let e = Env::new();
    let mut last = 0u64;
    for _ in 0..4 {
        let o = e.run(&["run", "job", "--", "sh", "-c", "echo fence=$LEASEHOLD_FENCE"]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let f: u64 = field(&stdout(&o), "fence").parse().unwrap();
        assert!(f > last, "{f} after {last}");
        last = f;
    }
}

#[test]
fn child_signal_death_is_128_plus_n() {
    let e = Env::new();
    let o = e.run(&["run", "job", "--", "sh", "-c", "kill -9 $$"]);
    assert_eq!(code(&o), 128 + 9);
}

#[test]
fn second_run_is_busy_and_a_waiter_gets_it_after() {
    let e = Env::new();
    let hold =
        "echo fence=$LEASEHOLD_FENCE; touch started; while [ ! -e stop ]; do sleep 0.02; done";
    let first = e.spawn(&["run", "job", "--", "sh", "-c", hold]);
    wait_for(&e.path("started"));
    let busy = e.run(&["run", "--wait", "0", "job", "--", "true"]);
    assert_eq!(code(&busy), 75, "{}", stderr(&busy));
    assert_eq!(stderr(&busy).lines().count(), 1, "{}", stderr(&busy));
    let waiter =
        e.spawn(&["run", "--wait", "20s", "job", "--", "sh", "-c", "echo fence=$LEASEHOLD_FENCE"]);
    std::thread::sleep(Duration::from_millis(200));
    std::fs::write(e.path("stop"), "").unwrap();
    let first = wait_child(first, Duration::from_secs(30));
    assert_eq!(code(&first), 0, "{}", stderr(&first));
    let waiter = wait_child(waiter, Duration::from_secs(30));
    assert_eq!(code(&waiter), 0, "{}", stderr(&waiter));
    let fence = |o: &Output| field(&stdout(o), "fence").parse::<u64>().unwrap();
    assert!(fence(&waiter) > fence(&first), "the waiter's fence is larger");
}

#[test]
fn stale_release_exits_77_and_keeps_the_holder() {
    let e = Env::new();
    let a = e.run(&["acquire", "--ttl", "30s", "--json", "job"]);
    assert_eq!(code(&a), 0, "{}", stderr(&a));
    let a: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    let owner_a = a["owner"].as_str().unwrap().to_string();
    let fence_a = a["fence"].as_u64().unwrap();
    assert_eq!(code(&e.run(&["release", "--owner", &owner_a, "job"])), 0);
    let b = e.run(&["acquire", "job"]);
    let owner_b = field(&stdout(&b), "owner");
    let fence_b: u64 = field(&stdout(&b), "fence").parse().unwrap();
    assert!(fence_b > fence_a, "{fence_b} after {fence_a}");
    let stale = e.run(&["release", "--owner", &owner_a, "job"]);
    assert_eq!(code(&stale), 77, "{}", stderr(&stale));
    assert_eq!(code(&e.run(&["renew", "--owner", &owner_a, "job"])), 77);
    let s = e.run(&["status", "--json", "--show-owner", "job"]);
    let holders: serde_json::Value = serde_json::from_slice(&s.stdout).unwrap();
    assert_eq!(holders[0]["owner"], owner_b.as_str());
    assert_eq!(holders[0]["owner_id"], &owner_b[..8]);
    assert_eq!(holders[0]["fence"], fence_b);
    assert!(holders[0]["expires_in"].as_u64().unwrap() <= 30_000);
    // Without --show-owner, only the short id: nobody copies a token out of a listing.
    let s = e.run(&["status", "--json", "job"]);
    assert!(!stdout(&s).contains(&owner_b), "{}", stdout(&s));
    let holders: serde_json::Value = serde_json::from_slice(&s.stdout).unwrap();
    assert_eq!(holders[0]["owner_id"], &owner_b[..8]);
    assert!(holders[0].get("owner").is_none(), "{holders}");
    let human = e.run(&["status", "job"]);
    assert!(!stdout(&human).contains(&owner_b), "{}", stdout(&human));
    assert!(stdout(&human).contains(&owner_b[..8]), "{}", stdout(&human));
    let human = e.run(&["status", "--show-owner", "job"]);
    assert!(stdout(&human).contains(&owner_b), "{}", stdout(&human));
    assert_eq!(code(&e.run(&["renew", "--ttl", "1m", "--owner", &owner_b, "job"])), 0);
    assert_eq!(code(&e.run(&["release", "--owner", &owner_b, "job"])), 0);
    assert_eq!(code(&e.run(&["acquire", "job"])), 0, "free again");
}

/// The lease is taken away while the command runs (here it releases its own grant, as an
/// operator or a stale-token bug would); the command ignores SIGTERM, so it needs SIGKILL.
#[test]
fn child_is_killed_when_the_lease_is_lost() {
    let e = Env::new();
    let script = r#""$LH" release --store "$STORE" --owner "$LEASEHOLD_OWNER" "$LEASEHOLD_KEY"; trap "" TERM; sleep 60; echo survived"#;
    let start = Instant::now();
    let o = e.run(&["run", "--ttl", "3s", "--grace", "500ms", "job", "--", "sh", "-c", script]);
    assert_eq!(code(&o), 79, "{}", stderr(&o));
    assert!(start.elapsed() < Duration::from_secs(30));
    assert!(!stdout(&o).contains("survived"));
    assert!(stderr(&o).contains("SIGKILL"), "{}", stderr(&o));
}

/// Renewals cannot be confirmed (the store's write lock is held elsewhere): the command is
/// terminated at the local deadline.
#[test]
fn child_is_terminated_when_renewals_cannot_be_confirmed() {
    use leasehold::fence::sqlite::rusqlite::Connection;
    let e = Env::new();
    let run = e.spawn(&[
        "run",
        "--ttl",
        "1s",
        "--grace",
        "200ms",
        "job",
        "--",
        "sh",
        "-c",
        "touch started; sleep 60",
    ]);
    wait_for(&e.path("started"));
    let db = Connection::open(e.path("s.db")).unwrap();
    db.execute_batch("BEGIN IMMEDIATE").unwrap();
    let o = wait_child(run, Duration::from_secs(30));
    db.execute_batch("ROLLBACK").unwrap();
    assert_eq!(code(&o), 79, "{}", stderr(&o));
    assert!(stderr(&o).contains("local deadline"), "{}", stderr(&o));
}

#[test]
fn signals_are_forwarded_to_the_command() {
    let e = Env::new();
    let script = "trap 'echo got-term; exit 0' TERM; touch started; while :; do sleep 0.02; done";
    let run = e.spawn(&["run", "job", "--", "sh", "-c", script]);
    wait_for(&e.path("started"));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(run.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let o = wait_child(run, Duration::from_secs(30));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("got-term"));
    assert_eq!(
        code(&e.run(&["run", "job", "--", "true"])),
        0,
        "released after the forwarded signal"
    );
}

#[test]
fn bad_input_is_one_line_and_exits_64_69_or_78() {
    let e = Env::new();
    let long = "k".repeat(513);
    let cases: &[(&[&str], i32)] = &[
        (&["run", "", "--", "true"], 64),
        (&["run", &long, "--", "true"], 64),
        (&["run", "--ttl", "0", "k", "--", "true"], 64),
        (&["run", "--ttl", "5x", "k", "--", "true"], 64),
        (&["run", "--wait", "soon", "k", "--", "true"], 64),
        (&["run", "--grace", "-1s", "k", "--", "true"], 64),
        (&["run", "k"], 64),
        (&["release", "--owner", "nothex", "k"], 64),
        (&["renew", "k"], 64),
        (&["status", "--store", "bogus://x"], 64),
        (&["status", "--store", "/no/scheme"], 64),
        // A path the store cannot use is a configuration error (EX_CONFIG), not an outage.
        (&["status", "--store", "sqlite:///proc/no/such/dir/s.db"], 78),
        (&["frobnicate"], 64),
    ];
    for (args, want) in cases {
        let o = e.cmd().args(*args).output().unwrap();
        let err = stderr(&o);
        assert_eq!(code(&o), *want, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("leasehold: ") && !err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn default_store_is_under_xdg_state_home_and_env_overrides() {
    let e = Env::new();
    let o = e.cmd().args(["run", "job", "--", "true"]).output().unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(e.path("state/leasehold/leasehold.db").exists());
    let other = format!("sqlite://{}/env.db", e.dir.path().display());
    let o =
        e.cmd().env("LEASEHOLD_STORE", &other).args(["run", "job", "--", "true"]).output().unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(e.path("env.db").exists());
}

#[test]
fn file_store_runs_but_refuses_detached_acquire() {
    let e = Env::new();
    let store = format!("file://{}/locks", e.dir.path().display());
    let o = e
        .cmd()
        .args(["run", "--store", &store, "job", "--", "sh", "-c", "echo fence=$LEASEHOLD_FENCE"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(field(&stdout(&o), "fence").parse::<u64>().unwrap() > 0);
    let o = e.cmd().args(["acquire", "--store", &store, "job"]).output().unwrap();
    assert_eq!(code(&o), 64, "{}", stderr(&o));
}

/// `run` on each SQL store form: contention exits 75, a waiter takes over after the holder,
/// with a greater fence.
#[test]
fn sql_stores_run_contend_and_hand_over() {
    use leasehold_testkit::{MyDatabase, PgSchema, postgres_base};
    let (pg, my) = (PgSchema::new(), MyDatabase::new());
    run_contend_and_hand_over(&[
        format!("{}?schema={}", postgres_base(), pg.name),
        format!("{}?mode=session&schema={}", postgres_base(), pg.name),
        my.url(""),
        my.url("?mode=session"),
    ]);
}

#[test]
fn quorum_stores_run_contend_and_hand_over() {
    use leasehold_testkit::stores::etcd::server::EtcdCluster;
    use leasehold_testkit::stores::zookeeper::server::ZkServer;
    let (etcd, zk) = (EtcdCluster::single(), ZkServer::start());
    run_contend_and_hand_over(&[etcd.url(""), zk.url("")]);
}

/// `run` on each store: the first holds, a second run exits 75, a waiter gets the key when
/// the first finishes, with a larger fence.
fn run_contend_and_hand_over(stores: &[String]) {
    for store in stores {
        let e = Env::new();
        let hold =
            "echo fence=$LEASEHOLD_FENCE; touch started; while [ ! -e stop ]; do sleep 0.02; done";
        let args = |extra: &[&str]| -> Vec<String> {
            let mut v = vec!["run".to_string(), format!("--store={store}")];
            v.extend(extra.iter().map(|s| s.to_string()));
            v
        };
        let first = e
            .cmd()
            .args(args(&["job", "--", "sh", "-c", hold]))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for(&e.path("started"));
        let busy = e.cmd().args(args(&["--wait", "0", "job", "--", "true"])).output().unwrap();
        assert_eq!(code(&busy), 75, "{store}: {}", stderr(&busy));
        let waiter = e
            .cmd()
            .args(args(&["--wait", "20s", "job", "--", "sh", "-c", "echo fence=$LEASEHOLD_FENCE"]))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        std::fs::write(e.path("stop"), "").unwrap();
        let first = wait_child(first, Duration::from_secs(30));
        assert_eq!(code(&first), 0, "{store}: {}", stderr(&first));
        let waiter = wait_child(waiter, Duration::from_secs(30));
        assert_eq!(code(&waiter), 0, "{store}: {}", stderr(&waiter));
        let (f1, f2): (u64, u64) = (
            field(&stdout(&first), "fence").parse().unwrap(),
            field(&stdout(&waiter), "fence").parse().unwrap(),
        );
        assert!(f1 >= 1 && f2 > f1, "{store}: fences {f1} then {f2}");
    }
}

/// Shell completions and the man page come from the clap definitions.
#[test]
fn completions_and_man_page() {
    for shell in ["bash", "zsh", "fish"] {
        let o = Command::new(BIN).args(["completions", shell]).output().unwrap();
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let script = stdout(&o);
        assert!(
            script.contains("leasehold") && script.contains("doctor"),
            "{shell}: {script:.300}"
        );
    }
    let o = Command::new(BIN).arg("man").output().unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let page = stdout(&o);
    assert!(page.contains(".TH leasehold") && page.contains("chaos"), "{page:.300}");
    let o = Command::new(BIN).args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(code(&o), 64, "an unknown shell is a usage error: {}", stderr(&o));
}
