//! `run --permits N`, `run --shared` and `run KEY1 KEY2 …` as a new user meets them, on the
//! embedded store and on a private Redis (and the first two through a private Redis Cluster
//! and a Sentinel set): real processes, each logging when its command starts and ends.

mod common;

use common::*;
use leasehold_testkit::stores::redis::cluster::RedisCluster;
use leasehold_testkit::stores::redis::sentinel::SentinelSet;
use leasehold_testkit::stores::redis::server::RedisServer;
use std::process::{Child, Output, Stdio};
use std::time::Duration;

/// A private environment on one store: the embedded one, or a Redis started for the test.
struct On {
    e: Env,
    url: String,
    _redis: Option<RedisServer>,
}

impl On {
    fn sqlite() -> On {
        let e = Env::new();
        On { url: e.store(), e, _redis: None }
    }
    fn redis() -> On {
        let server = RedisServer::start();
        On { e: Env::new(), url: server.url(), _redis: Some(server) }
    }
    /// A fresh environment (its own log) on a store that lives elsewhere.
    fn at(url: String) -> On {
        On { e: Env::new(), url, _redis: None }
    }
    fn path(&self, name: &str) -> std::path::PathBuf {
        self.e.path(name)
    }
    fn run(&self, args: &[&str]) -> Output {
        self.e.cmd().args(with_store(args, &self.url)).output().unwrap()
    }
    fn spawn(&self, args: &[&str]) -> Child {
        self.e
            .cmd()
            .args(with_store(args, &self.url))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

/// The shell body that logs `+ TAG time` and `- TAG time` around a sleep.
fn logged(tag: &str, secs: &str) -> String {
    format!(
        "echo \"+ {tag} $(date +%s%N)\" >> log; sleep {secs}; echo \"- {tag} $(date +%s%N)\" >> log"
    )
}

/// `(tag, start, end)` of every command in the log, in start order.
fn intervals(e: &On) -> Vec<(String, u128, u128)> {
    let text = std::fs::read_to_string(e.path("log")).unwrap_or_default();
    let mut open = std::collections::HashMap::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let [sign, tag, t] = f[..] else { panic!("bad log line {line:?}") };
        let t: u128 = t.parse().unwrap();
        match sign {
            "+" => {
                open.insert(tag.to_owned(), t);
            }
            _ => out.push((tag.to_owned(), open.remove(tag).expect("ended before it started"), t)),
        }
    }
    assert!(open.is_empty(), "commands that never ended: {open:?}");
    out.sort_by_key(|i| i.1);
    out
}

/// The most intervals that overlap at one instant.
fn most_at_once(iv: &[(String, u128, u128)]) -> usize {
    let mut ev: Vec<(u128, i32)> = iv.iter().flat_map(|i| [(i.1, 1), (i.2, -1)]).collect();
    ev.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in ev {
        now += d;
        most = most.max(now);
    }
    most as usize
}

fn finish(children: Vec<Child>) {
    for c in children {
        let o = wait_child(c, Duration::from_secs(90));
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
}

fn lines_starting(e: &On, prefix: &str) -> usize {
    let text = std::fs::read_to_string(e.path("log")).unwrap_or_default();
    text.lines().filter(|l| l.starts_with(prefix)).count()
}

fn wait_lines(e: &On, prefix: &str, n: usize) {
    let start = std::time::Instant::now();
    while lines_starting(e, prefix) < n {
        assert!(start.elapsed() < Duration::from_secs(30), "{n} × {prefix:?} never logged");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Six `run --permits 3` at once: never more than three commands run, each in a slot of its
/// own; a run naming another N meanwhile is refused (64).
#[test]
fn six_permit_runs_never_exceed_three() {
    six_permit_runs(&On::sqlite());
}

#[test]
fn six_permit_runs_never_exceed_three_on_redis() {
    six_permit_runs(&On::redis());
}

fn six_permit_runs(e: &On) {
    let body = logged("$LEASEHOLD_SLOT", "0.4");
    let runs: Vec<Child> = (0..6)
        .map(|_| {
            e.spawn(&["run", "--permits", "3", "--wait", "60s", "pool", "--", "sh", "-c", &body])
        })
        .collect();
    wait_lines(e, "+", 1);
    let status = e.run(&["status", "--json", "pool"]);
    let rows: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert!(rows.as_array().unwrap().iter().any(|r| r["slot"].is_u64()), "status: {rows}");
    let other_n = e.run(&["run", "-n", "2", "pool", "--", "true"]);
    assert_eq!(code(&other_n), 64, "another N while 3 are held: {}", stderr(&other_n));
    finish(runs);
    let iv = intervals(e);
    assert_eq!(iv.len(), 6);
    let most = most_at_once(&iv);
    assert!((1..=3).contains(&most), "{most} permit holders at once: {iv:?}");
    for (i, a) in iv.iter().enumerate() {
        for b in &iv[i + 1..] {
            assert!(a.0 != b.0 || b.1 >= a.2, "slot {} held twice at once: {iv:?}", a.0);
        }
    }
    let env = e.run(&[
        "run",
        "-n",
        "3",
        "pool",
        "--",
        "sh",
        "-c",
        "echo s=$LEASEHOLD_SLOT k=$LEASEHOLD_KEY",
    ]);
    let out = stdout(&env);
    let slot = field(&out.replace(' ', "\n"), "s");
    assert!(out.contains(&format!("k=pool#{slot}")), "{out}");
}

/// Three `--shared` readers overlap; a writer started while they run waits for all of them;
/// a reader started after the writer (while it waits) waits for the writer.
#[test]
fn readers_overlap_and_a_waiting_writer_goes_first() {
    readers_and_writer(&On::sqlite());
}

#[test]
fn readers_overlap_and_a_waiting_writer_goes_first_on_redis() {
    readers_and_writer(&On::redis());
}

fn readers_and_writer(e: &On) {
    let mut runs: Vec<Child> = (0..3)
        .map(|i| {
            let body = logged(&format!("r{i}"), "1.5");
            e.spawn(&["run", "--shared", "--wait", "60s", "doc", "--", "sh", "-c", &body])
        })
        .collect();
    wait_lines(e, "+ r", 3);
    runs.push(e.spawn(&["run", "--wait", "60s", "doc", "--", "sh", "-c", &logged("w", "0.5")]));
    std::thread::sleep(Duration::from_millis(400));
    runs.push(e.spawn(&[
        "run",
        "-s",
        "--wait",
        "60s",
        "doc",
        "--",
        "sh",
        "-c",
        &logged("late", "0.1"),
    ]));
    finish(runs);
    let iv = intervals(e);
    let get = |t: &str| iv.iter().find(|i| i.0 == t).unwrap_or_else(|| panic!("no {t}: {iv:?}"));
    let readers: Vec<_> = iv.iter().filter(|i| i.0.starts_with('r')).cloned().collect();
    assert_eq!(most_at_once(&readers), 3, "the three readers overlap: {iv:?}");
    let w = get("w");
    assert!(readers.iter().all(|r| r.2 <= w.1), "the writer ran alone, after the readers: {iv:?}");
    assert!(get("late").1 >= w.2, "the reader after the writer waited for it: {iv:?}");
    let shared = e.run(&["run", "-s", "doc", "--", "sh", "-c", "echo m=$LEASEHOLD_MODE"]);
    assert_eq!(field(&stdout(&shared), "m"), "shared");
}

/// Permits and readers through a Redis Cluster URL: a semaphore's slots share its hash tag,
/// a key's readers its, and waiters wake by the slot's shard channel.
#[test]
fn permits_and_readers_through_a_cluster_url() {
    let cluster = RedisCluster::start();
    six_permit_runs(&On::at(cluster.url("")));
    readers_and_writer(&On::at(cluster.url("")));
}

/// Permits and readers through a Sentinel URL, on the primary the sentinels name.
#[test]
fn permits_and_readers_through_a_sentinel_url() {
    let set = SentinelSet::start();
    six_permit_runs(&On::at(set.url("")));
    readers_and_writer(&On::at(set.url("")));
}

/// `run a b`, `run b a` and `run b` started together, five times over: all finish, and the
/// commands holding `b` never overlap; several keys get one fence each.
#[test]
fn several_keys_in_any_order_never_deadlock() {
    several_keys(&On::sqlite());
}

#[test]
fn several_keys_in_any_order_never_deadlock_on_redis() {
    several_keys(&On::redis());
}

fn several_keys(e: &On) {
    for round in 0..5 {
        let runs: Vec<Child> = [vec!["a", "b"], vec!["b", "a"], vec!["b"]]
            .iter()
            .enumerate()
            .map(|(i, keys)| {
                let body = logged(&format!("{round}.{i}"), "0.1");
                let mut args = vec!["run", "--wait", "60s"];
                args.extend(keys);
                args.extend(["--", "sh", "-c", &body]);
                e.spawn(&args)
            })
            .collect();
        finish(runs);
    }
    let iv = intervals(e);
    assert_eq!(iv.len(), 15);
    assert_eq!(most_at_once(&iv), 1, "every run holds b: never two at once: {iv:?}");
    let o = e.run(&[
        "run",
        "b",
        "a",
        "--",
        "sh",
        "-c",
        "echo n=$LEASEHOLD_KEYS k0=$LEASEHOLD_KEY_0 k1=$LEASEHOLD_KEY_1 f0=$LEASEHOLD_FENCE_0 f1=$LEASEHOLD_FENCE_1",
    ]);
    let out = stdout(&o);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(out.contains("n=2 k0=a k1=b f0="), "{out}");
    assert!(!field(&out.replace(' ', "\n"), "f1").is_empty());
}

/// A store that cannot hold readers or semaphores (MySQL's `GET_LOCK` session locks)
/// refuses at once with 64, naming what it cannot hold, and runs nothing.
#[test]
fn a_store_without_the_primitive_exits_64() {
    // MySQL's GET_LOCK (mode=session) holds neither: no shared mode, nowhere to record N.
    let db = leasehold_testkit::MyDatabase::new();
    let e = On { e: Env::new(), url: db.url("?mode=session"), _redis: None };
    for args in [["run", "--shared", "k"], ["run", "--permits", "2"]] {
        let mut a = args.to_vec();
        if a[1] == "--permits" {
            a.push("k");
        }
        a.extend(["--", "echo", "ran"]);
        let o = e.run(&a);
        assert_eq!(code(&o), 64, "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("cannot hold"), "{}", stderr(&o));
        assert!(!stdout(&o).contains("ran"));
    }
}

/// A plain run nested in a `--shared` run of the same key is a writer: it does not run under
/// the reader's grant (it would wait on its own parent; without --wait it is busy, 75).
#[test]
fn a_writer_nested_in_a_reader_does_not_borrow_its_grant() {
    let e = On::sqlite();
    let inner = format!("\"$LH\" run --store '{}' doc -- echo inner-ran", e.url);
    let o = e.run(&["run", "--shared", "doc", "--", "sh", "-c", &format!("{inner}; echo code=$?")]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(field(&stdout(&o), "code"), "75", "{}{}", stdout(&o), stderr(&o));
    assert!(!stdout(&o).contains("inner-ran"));
}
