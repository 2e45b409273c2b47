//! The `leasehold` binary as a user runs it: exit codes, environment, contention, loss.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_leasehold");

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        Env { dir: tempfile::tempdir().unwrap() }
    }
    fn store(&self) -> String {
        format!("sqlite://{}/s.db", self.dir.path().display())
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn cmd(&self) -> Command {
        let mut c = Command::new(BIN);
        c.env_remove("LEASEHOLD_STORE")
            .env("XDG_STATE_HOME", self.dir.path().join("state"))
            .env("LH", BIN)
            .env("STORE", self.store())
            .current_dir(self.dir.path());
        c
    }
    /// `leasehold ARGS…`, with `--store` inserted after the subcommand.
    fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(with_store(args, &self.store())).output().unwrap()
    }
    fn spawn(&self, args: &[&str]) -> Child {
        self.cmd()
            .args(with_store(args, &self.store()))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

fn with_store(args: &[&str], store: &str) -> Vec<String> {
    let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    v.insert(1, format!("--store={store}"));
    v
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn wait_for(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < Duration::from_secs(30), "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn wait_child(mut c: Child, limit: Duration) -> Output {
    let start = Instant::now();
    loop {
        if c.try_wait().unwrap().is_some() {
            return c.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            let _ = c.kill();
            panic!("leasehold did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn field(text: &str, name: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name}= in {text:?}"))
        .to_string()
}

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
    assert_eq!(field(&out, "fence"), "1");
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
    let hold = "touch started; while [ ! -e stop ]; do sleep 0.02; done";
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
    assert_eq!(field(&stdout(&waiter), "fence"), "2");
}

#[test]
fn stale_release_exits_77_and_keeps_the_holder() {
    let e = Env::new();
    let a = e.run(&["acquire", "--ttl", "30s", "--json", "job"]);
    assert_eq!(code(&a), 0, "{}", stderr(&a));
    let a: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    let owner_a = a["owner"].as_str().unwrap().to_string();
    assert_eq!(a["fence"], 1);
    assert_eq!(code(&e.run(&["release", "--owner", &owner_a, "job"])), 0);
    let b = e.run(&["acquire", "job"]);
    let owner_b = field(&stdout(&b), "owner");
    assert_eq!(field(&stdout(&b), "fence"), "2");
    let stale = e.run(&["release", "--owner", &owner_a, "job"]);
    assert_eq!(code(&stale), 77, "{}", stderr(&stale));
    assert_eq!(code(&e.run(&["renew", "--owner", &owner_a, "job"])), 77);
    let s = e.run(&["status", "--json", "job"]);
    let holders: serde_json::Value = serde_json::from_slice(&s.stdout).unwrap();
    assert_eq!(holders[0]["owner"], owner_b.as_str());
    assert_eq!(holders[0]["fence"], 2);
    assert!(holders[0]["expires_in"].as_u64().unwrap() <= 30_000);
    let human = e.run(&["status", "job"]);
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
    let o = e.run(&["run", "--ttl", "1s", "--grace", "500ms", "job", "--", "sh", "-c", script]);
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
fn bad_input_is_one_line_and_exit_64_or_69() {
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
        (&["status", "--store", "sqlite:///proc/no/such/dir/s.db"], 69),
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
    assert_eq!(field(&stdout(&o), "fence"), "1");
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
    use leasehold_testkit::servers::{EtcdCluster, ZkServer};
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

fn doctor_json(store: &str) -> serde_json::Value {
    let o = Command::new(BIN).args(["doctor", "--json", "--store", store]).output().unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn verdicts(v: &serde_json::Value) -> String {
    v["this_deployment"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

fn setting(v: &serde_json::Value, name: &str) -> String {
    v["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["setting"] == name)
        .map(|s| s["value"].as_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("no setting {name}: {v}"))
}

/// doctor reads the real persistence and replication settings of private Redis servers and
/// draws the matching verdicts.
#[test]
fn doctor_reads_redis_persistence_and_replication() {
    use leasehold_testkit::servers::RedisServer;
    let bare = RedisServer::start();
    let v = doctor_json(&bare.url());
    assert_eq!(setting(&v, "appendonly"), "no");
    let text = verdicts(&v);
    assert!(text.contains("no persistence"), "{text}");
    assert!(text.contains("forgets the fence counters"), "{text}");
    assert!(text.contains("no replicas"), "{text}");
    assert!(text.contains("never go back after a restart or failover"), "{text}");
    assert_eq!(v["guarantees"]["backend"], "redis");
    assert!(v["clock_offset_ms"]["uncertainty"].as_f64().is_some());

    let durable = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let v = doctor_json(&durable.url());
    assert_eq!(setting(&v, "appendfsync"), "always");
    let text = verdicts(&v);
    assert!(text.contains("survive a restart or a crash"), "{text}");
    assert!(!v["would_change_it"].to_string().contains("appendfsync always"), "{v}");

    let replica = RedisServer::start();
    replica.replicate(&bare);
    let v = doctor_json(&bare.url());
    assert_eq!(setting(&v, "connected replicas"), "1");
    assert!(verdicts(&v).contains("1 replica(s), asynchronous"), "{v}");
    // The replica's clock, read against the primary's (one machine: well within a second).
    let name = format!("replica 127.0.0.1:{} clock − primary clock", replica.port());
    assert!(setting(&v, &name).ends_with(" ms)"), "{v}");
    assert!(!verdicts(&v).contains("behind the primary"), "{v}");
    let v = doctor_json(&format!("{}?wait_replicas=1", bare.url()));
    assert!(verdicts(&v).contains("waits for 1 replica ack"), "{v}");
    let v = doctor_json(&replica.url());
    assert!(verdicts(&v).contains("is a slave") || verdicts(&v).contains("is a replica"), "{v}");
}

/// `leasehold bench` on a private Redis measures leasehold and both raw-client baselines (plain
/// `SET NX PX`, and leasehold's own scripts sent raw) in one run, and reports the ratios the
/// README and BENCHMARKS.md quote. Checks shape and that every contender completed cycles;
/// no timing is asserted.
#[test]
fn bench_redis_measures_every_baseline() {
    let redis = leasehold_testkit::servers::RedisServer::start();
    let bench = |scenario: &str| -> serde_json::Value {
        let o = Command::new(BIN)
            .args(["bench", "--json", "--store", &redis.url(), "--runs", "1"])
            .args(["--duration", "150ms", "--scenario", scenario])
            .output()
            .unwrap();
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["scenarios"][scenario].clone()
    };
    let u = &bench("uncontended");
    let names: Vec<&str> = u["contenders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["contender"].as_str().unwrap())
        .collect();
    assert!(names.iter().any(|n| n.starts_with("raw redis-rs: SET NX PX")), "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("raw redis-rs sending leasehold's")), "{names:?}");
    for c in u["contenders"].as_array().unwrap() {
        assert!(c["ops_per_s_median"].as_f64().unwrap() > 0.0, "{c}");
    }
    for k in ["leasehold_time_per_cycle_vs_raw", "leasehold_time_per_cycle_vs_raw_fenced"] {
        assert!(u[k].as_f64().unwrap() > 0.0, "{k}: {u}");
    }

    let m = &bench("many-keys");
    assert_eq!(m["contenders"].as_array().unwrap().len(), 3, "{m}");
    for c in m["contenders"].as_array().unwrap() {
        assert!(c["ops_per_s_median"].as_f64().unwrap() > 0.0, "{c}");
    }
    for k in [
        "leasehold_cycles_vs_half_redis_benchmark",
        "raw_cycles_vs_half_redis_benchmark",
        "raw_fenced_cycles_vs_half_redis_benchmark",
    ] {
        assert!(m[k].as_f64().unwrap() > 0.0, "{k}: {m}");
    }
    assert!(m["redis_benchmark"]["ops_per_s_median"].as_f64().unwrap() > 0.0, "{m}");
}

/// doctor on PostgreSQL reads synchronous_commit, standbys and the pooler check.
#[test]
fn doctor_reads_postgres_settings() {
    let schema = leasehold_testkit::PgSchema::new();
    let base = leasehold_testkit::postgres_base();
    let sep = if base.contains('?') { '&' } else { '?' };
    let v = doctor_json(&format!("{base}{sep}schema={}", schema.name));
    assert_eq!(setting(&v, "synchronous_commit"), "on");
    assert_eq!(setting(&v, "transaction-pooling proxy in front"), "no sign of one");
    assert!(verdicts(&v).contains("lease table: linearizable"), "{v}");
    assert_eq!(v["guarantees"]["backend"], "postgres");
}

/// `leasehold chaos --scenario stalled-holder`, short, against a store: with fencing no stale
/// write gets through; without it, on stores that hand a frozen holder's key on, it does.
fn chaos_short(store: &str, hands_over: bool) {
    chaos_scenario(store, "stalled-holder", hands_over);
}

fn chaos_scenario(store: &str, scenario: &str, hands_over: bool) {
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(BIN)
        .args([
            "chaos",
            "--store",
            store,
            "--scenario",
            scenario,
            "--trials",
            "2",
            "--ttl",
            "300ms",
            "--out",
        ])
        .arg(out.path())
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("report.json")).unwrap()).unwrap();
    let arm =
        |n: &str| r["arms"].as_array().unwrap().iter().find(|a| a["arm"] == n).unwrap().clone();
    let (fenced, unfenced) = (arm("fenced"), arm("unfenced"));
    assert_eq!(fenced["stale_effects_accepted"], 0, "{r}");
    assert_eq!(fenced["fences_out_of_order"], 0, "{r}");
    assert_eq!(fenced["successors_locked_out"], 0, "{r}");
    assert_fenced_trials_clean(&r);
    if hands_over {
        assert_eq!(fenced["successor_acquired"], 2, "{r}");
        assert_eq!(
            unfenced["stale_effects_accepted"], 2,
            "the control must show stale writes: {r}"
        );
    } else {
        assert_eq!(unfenced["successor_acquired"], 0, "a frozen session holder lost its lock: {r}");
    }
    let svg = std::fs::read_to_string(out.path().join("timeline.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("fenced #1"), "{svg:.200}");
    assert!(stdout(&o).contains("stale effects accepted"), "{}", stdout(&o));
    assert!(stdout(&o).contains("successors locked out"), "{}", stdout(&o));
}

/// partition: the holder, cut off behind the fault proxy, learns of its loss before the
/// store hands the key on (checked by chaos itself: it exits 1 otherwise).
#[test]
fn chaos_partition_redis_and_etcd() {
    let server = leasehold_testkit::servers::RedisServer::start();
    chaos_scenario(&server.url(), "partition", true);
    let cluster = leasehold_testkit::servers::EtcdCluster::single();
    chaos_scenario(&cluster.url("?ttl=1s"), "partition", true);
}

#[test]
fn chaos_partition_sql_and_zookeeper() {
    let schema = leasehold_testkit::PgSchema::new();
    let base = leasehold_testkit::postgres_base();
    let sep = if base.contains('?') { '&' } else { '?' };
    chaos_scenario(&format!("{base}{sep}schema={}", schema.name), "partition", true);
    let db = leasehold_testkit::MyDatabase::new();
    chaos_scenario(&db.url(""), "partition", true);
    let zk = leasehold_testkit::servers::ZkServer::start();
    chaos_scenario(&zk.url("?session=1s"), "partition", true);
}

#[test]
fn chaos_stalled_holder_sqlite() {
    let d = tempfile::tempdir().unwrap();
    chaos_short(&format!("sqlite://{}/l.db", d.path().display()), true);
}

#[test]
fn chaos_stalled_holder_redis() {
    let server = leasehold_testkit::servers::RedisServer::start();
    chaos_short(&server.url(), true);
}

#[test]
fn chaos_stalled_holder_postgres() {
    let schema = leasehold_testkit::PgSchema::new();
    let base = leasehold_testkit::postgres_base();
    let sep = if base.contains('?') { '&' } else { '?' };
    chaos_short(&format!("{base}{sep}schema={}", schema.name), true);
    // Another store form has another fence counter: give it a resource of its own.
    let session = leasehold_testkit::PgSchema::new();
    chaos_short(&format!("{base}{sep}schema={}&mode=session", session.name), false);
}

#[test]
fn chaos_stalled_holder_mysql() {
    let db = leasehold_testkit::MyDatabase::new();
    chaos_short(&db.url(""), true);
    // Another store form has another fence counter: give it a resource of its own.
    let session = leasehold_testkit::MyDatabase::new();
    chaos_short(&session.url("?mode=session"), false);
}

#[test]
fn chaos_stalled_holder_etcd() {
    let cluster = leasehold_testkit::servers::EtcdCluster::single();
    chaos_short(&cluster.url("?ttl=1s"), true);
}

#[test]
fn chaos_stalled_holder_zookeeper() {
    let server = leasehold_testkit::servers::ZkServer::start();
    chaos_short(&server.url("?session=1s"), true);
}

/// Redlock issues no fence: chaos runs only the unfenced arm, says why, and shows the stale
/// write getting through once the frozen holder's lease expired on a majority.
#[test]
fn chaos_stalled_holder_redlock() {
    let servers: Vec<_> =
        (0..3).map(|_| leasehold_testkit::servers::RedisServer::start()).collect();
    let hosts: Vec<String> = servers.iter().map(|s| format!("127.0.0.1:{}", s.port())).collect();
    let (code, r) = chaos_report(&format!("redlock://{}", hosts.join(",")), "stalled-holder", 2, 2);
    assert_eq!(code, 0, "{r}");
    assert!(r["setup"].as_str().unwrap().contains("no fence"), "{r}");
    assert!(r["arms"].as_array().unwrap().iter().all(|a| a["arm"] != "fenced"), "{r}");
    let unfenced = arm(&r, "unfenced");
    assert_eq!(unfenced["successor_acquired"], 2, "{r}");
    assert_eq!(unfenced["stale_effects_accepted"], 2, "{r}");
    assert_eq!(unfenced["fences_out_of_order"], 0, "no fences, no order: {r}");
}

#[test]
fn chaos_stalled_holder_file() {
    let d = tempfile::tempdir().unwrap();
    chaos_short(&format!("file://{}/locks", d.path().display()), false);
}

/// doctor on MySQL, a 3-member etcd cluster and a standalone ZooKeeper reads their real
/// settings and membership.
#[test]
fn doctor_reads_mysql_etcd_and_zookeeper() {
    let db = leasehold_testkit::MyDatabase::new();
    let v = doctor_json(&db.url(""));
    assert_eq!(setting(&v, "innodb_flush_log_at_trx_commit"), "1");
    assert!(verdicts(&v).contains("lease table: linearizable"), "{v}");

    let cluster = leasehold_testkit::servers::EtcdCluster::start(3);
    let v = doctor_json(&cluster.url(""));
    assert_eq!(setting(&v, "members"), "3");
    assert!(verdicts(&v).contains("survives the loss of 1 member"), "{v}");

    let zk = leasehold_testkit::servers::ZkServer::start();
    let v = doctor_json(&zk.url(""));
    assert!(
        setting(&v, &format!("server 127.0.0.1:{}", zk.port())).starts_with("standalone"),
        "{v}"
    );
    assert!(verdicts(&v).contains("single (standalone) server"), "{v}");
}

/// Runs `leasehold chaos` with `trials` and `control` trials; its exit code and report.
fn chaos_report(
    store: &str,
    scenario: &str,
    trials: u32,
    control: u32,
) -> (i32, serde_json::Value) {
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(BIN)
        .args(["chaos", "--store", store, "--scenario", scenario, "--ttl", "300ms"])
        .args(["--trials", &trials.to_string(), "--control-trials", &control.to_string()])
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    let report = std::fs::read(out.path().join("report.json"))
        .unwrap_or_else(|_| panic!("no report: {}{}", stdout(&o), stderr(&o)));
    let r: serde_json::Value = serde_json::from_slice(&report).unwrap();
    let svg = std::fs::read_to_string(out.path().join("timeline.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains(" #1"), "{svg:.200}");
    (code(&o), r)
}

fn arm(r: &serde_json::Value, name: &str) -> serde_json::Value {
    r["arms"].as_array().unwrap().iter().find(|a| a["arm"] == name).unwrap().clone()
}

/// Reads every fenced trial's events without the tool's own counters: no holder effect
/// accepted after the successor's grant, no successor claim or effect refused, and (where
/// the successor wrote) the successor's value last.
fn assert_fenced_trials_clean(r: &serde_json::Value) {
    let fenced = r["trials"].as_array().unwrap().iter().filter(|t| t["arm"] == "fenced");
    for t in fenced {
        let events = t["events"].as_array().unwrap();
        let granted = events
            .iter()
            .find(|e| e["who"] == "successor" && e["what"] == "acquire")
            .map(|e| e["t_ns"].as_i64().unwrap());
        let accepted = |e: &serde_json::Value| {
            e["what"] == "effect" && e["detail"].as_str().is_some_and(|d| d.starts_with("accepted"))
        };
        for e in events {
            if let Some(g) = granted {
                assert!(
                    !(e["who"] == "holder" && accepted(e) && e["t_ns"].as_i64().unwrap() > g),
                    "a holder effect was accepted after the successor's grant: {t}"
                );
            }
            assert!(
                !(e["who"] == "successor"
                    && (e["what"] == "claim-refused" || (e["what"] == "effect" && !accepted(e)))),
                "the successor was refused by the resource: {t}"
            );
        }
        if events.iter().any(|e| e["who"] == "successor" && accepted(e)) {
            assert_eq!(t["final_value"], "successor", "{t}");
        }
    }
}

/// store-kill on private servers (the URL's host is never contacted). Redis without
/// persistence forgets the grant and its fence counter: the successor gets the key while the
/// holder works, with a larger fence (clock-backed), so the resource takes the successor and
/// refuses the stale holder, while the control shows the stale effect. etcd and ZooKeeper restart
/// from their data directories: fences keep increasing and no holder learns of its loss late
/// (chaos exits 1 otherwise).
#[test]
fn chaos_store_kill() {
    let (code, r) = chaos_report("redis://127.0.0.1:1", "store-kill", 2, 1);
    assert_eq!(code, 0, "{r}");
    assert!(r["setup"].as_str().unwrap().contains("without persistence"), "{r}");
    let fenced = arm(&r, "fenced");
    assert_eq!(fenced["successor_acquired"], 2, "{r}");
    assert_eq!(fenced["fences_out_of_order"], 0, "the forgotten counter restarts above: {r}");
    assert_eq!(fenced["stale_effects_accepted"], 0, "{r}");
    assert_eq!(fenced["successors_locked_out"], 0, "{r}");
    assert_fenced_trials_clean(&r);
    assert_eq!(arm(&r, "unfenced")["stale_effects_accepted"], 1, "{r}");

    // PostgreSQL, MariaDB, etcd and ZooKeeper keep the grant and the fence counter on disk;
    // the session-lock forms lose the lock with the server, and their holders learn of it
    // before the successor's grant.
    for store in [
        "postgres://x@127.0.0.1:1/x",
        "postgres://x@127.0.0.1:1/x?mode=session",
        "mysql://x@127.0.0.1:1/x",
        "mysql://x@127.0.0.1:1/x?mode=session",
        "etcd://127.0.0.1:1?ttl=1s",
        "zk://127.0.0.1:1?session=1s",
    ] {
        let (code, r) = chaos_report(store, "store-kill", 2, 1);
        assert_eq!(code, 0, "{r}");
        assert_fenced_trials_clean(&r);
        let fenced = arm(&r, "fenced");
        assert_eq!(fenced["successor_acquired"], 2, "{r}");
        assert_eq!(fenced["fences_out_of_order"], 0, "{r}");
        assert_eq!(fenced["lost_after_successor_grant"], 0, "{r}");
    }
    // Never a store it did not start.
    let (code, _) = chaos_report_err("sqlite:///tmp/leasehold-never.db", "store-kill");
    assert_eq!(code, 69);
}

/// failover: a Redis replica or PostgreSQL standby that missed the grant is promoted and
/// admits a second holder, with a larger fence: the resource takes it and refuses the stale
/// holder's late write (before clock-backed fences it kept the stale holder); an etcd leader
/// loss keeps the holder, and the successor gets the key only after its release, with a
/// larger fence.
#[test]
fn chaos_failover() {
    for store in ["redis://127.0.0.1:1", "postgres://x@127.0.0.1:1/x"] {
        let (code, r) = chaos_report(store, "failover", 2, 1);
        assert_eq!(code, 0, "{r}");
        let fenced = arm(&r, "fenced");
        assert_eq!(fenced["successor_acquired"], 2, "{r}");
        assert_eq!(fenced["fences_out_of_order"], 0, "the lagging counter restarts above: {r}");
        assert!(fenced["lost_after_successor_grant"].as_u64().unwrap() >= 1, "{r}");
        assert_eq!(fenced["stale_effects_accepted"], 0, "{r}");
        assert_eq!(fenced["successors_locked_out"], 0, "{r}");
        assert_fenced_trials_clean(&r);
        assert_eq!(arm(&r, "unfenced")["stale_effects_accepted"], 1, "{r}");
    }

    let (code, r) = chaos_report("etcd://127.0.0.1:1?ttl=1s", "failover", 1, 1);
    assert_eq!(code, 0, "{r}");
    assert_fenced_trials_clean(&r);
    for name in ["fenced", "unfenced"] {
        let a = arm(&r, name);
        assert_eq!(a["successor_acquired"], 1, "{r}");
        assert_eq!(a["lost_after_successor_grant"], 0, "{r}");
        assert_eq!(a["fences_out_of_order"], 0, "{r}");
        assert_eq!(a["stale_effects_accepted"], 0, "{r}");
    }
    let (code, _) = chaos_report_err("zk://127.0.0.1:1", "failover");
    assert_eq!(code, 69);
}

fn chaos_report_err(store: &str, scenario: &str) -> (i32, String) {
    let o = Command::new(BIN)
        .args(["chaos", "--store", store, "--scenario", scenario, "--out"])
        .arg(tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    assert!(stderr(&o).contains("this tool starts"), "{}", stderr(&o));
    (code(&o), stderr(&o))
}

/// unknown-acquire: replies dropped from the acquire's 1st to 4th reply on. Some trials leave
/// a grant the acquirer never heard of; the cleanup removes it after a reconnect, the store's
/// expiry when the link stays cut, and chaos exits 1 if one outlives that.
#[test]
fn chaos_unknown_acquire() {
    let redis = leasehold_testkit::servers::RedisServer::start();
    let etcd = leasehold_testkit::servers::EtcdCluster::single();
    let zk = leasehold_testkit::servers::ZkServer::start();
    let pg = leasehold_testkit::PgSchema::new();
    let base = leasehold_testkit::postgres_base();
    let sep = if base.contains('?') { '&' } else { '?' };
    let my = leasehold_testkit::MyDatabase::new();
    for store in [
        redis.url(),
        etcd.url("?ttl=1s"),
        zk.url("?session=1s"),
        format!("{base}{sep}schema={}", pg.name),
        my.url(""),
    ] {
        let (code, r) = chaos_report(&store, "unknown-acquire", 4, 2);
        assert_eq!(code, 0, "{r}");
        let (a, b) = (arm(&r, "reconnect"), arm(&r, "cut"));
        assert_eq!(a["orphans"], 0, "{r}");
        assert_eq!(b["orphans"], 0, "{r}");
        assert!(a["unknown_outcomes"].as_u64().unwrap() >= 1, "{r}");
        let seen = a["orphans_seen"].as_u64().unwrap() + b["orphans_seen"].as_u64().unwrap();
        assert!(seen >= 1, "no trial left a grant behind, so nothing was tested: {r}");
    }
    // Session locks: an unanswered request closes its dedicated connection, and the server
    // drops the lock with it: no grant is left behind at all.
    let pg_session = leasehold_testkit::PgSchema::new();
    let my_session = leasehold_testkit::MyDatabase::new();
    for store in [
        format!("{base}{sep}schema={}&mode=session", pg_session.name),
        my_session.url("?mode=session"),
    ] {
        let (code, r) = chaos_report(&store, "unknown-acquire", 2, 1);
        assert_eq!(code, 0, "{r}");
        for name in ["reconnect", "cut"] {
            let a = arm(&r, name);
            assert_eq!(a["unknown_outcomes"], a["trials"], "{r}");
            assert_eq!(a["orphans_seen"], 0, "{r}");
        }
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
