//! `leasehold size`: the measured distributions and the recommendation drawn from them.

mod common;

use common::*;

/// On the default store (SQLite under `$XDG_STATE_HOME`): the JSON carries both
/// distributions and a recommendation consistent with them, and the probe key is gone.
#[test]
fn size_json_recommends_from_the_printed_distributions() {
    let e = Env::new();
    let o = e.cmd().args(["size", "--json", "--for", "1s", "--job", "20ms"]).output().unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let n = |p: &str| v.pointer(p).and_then(|x| x.as_u64()).unwrap_or_else(|| panic!("{p}: {v}"));
    assert!(v["store"].as_str().unwrap().ends_with("leasehold/leasehold.db"), "{v}");
    for d in ["rtt", "pauses", "runtime_lag"] {
        let s = |f: &str| n(&format!("/{d}/{f}"));
        assert!(s("samples") >= 1, "{d}: {v}");
        assert!(s("p50_us") <= s("p99_us") && s("p99_us") <= s("p999_us"), "{d}: {v}");
        assert!(s("p999_us") <= s("max_us"), "{d}: {v}");
    }
    let (ttl, renew, margin, grace) =
        (n("/ttl_ms"), n("/renew_every_ms"), n("/margin_ms"), n("/grace_ms"));
    // The rule uses the longest samples, not the p99.9.
    let (p, r) = (n("/pauses/max_us") as f64 / 1000.0, n("/rtt/max_us") as f64 / 1000.0);
    assert_eq!(n("/job_step_ms"), 20);
    assert!(margin as f64 >= 20.0 + 2.0 * p.max(r), "margin covers J + 2·max(P, R): {v}");
    assert!(grace as f64 >= 20.0 + 2.0 * p.max(r), "{v}");
    assert!(ttl > margin && renew < ttl && renew == ttl / 3, "{v}");
    let ttl = ttl as f64;
    let room = ttl * 0.99 - margin as f64 - 2.0 * ttl / 3.0;
    assert!(room >= p + r, "a renewal at 2·ttl/3 still lands before the deadline: {v}");
    let run_margin = (ttl / 10.0).min(2000.0) + grace as f64;
    assert!(ttl * 0.99 - run_margin - 2.0 * ttl / 3.0 >= p + r, "and under run: {v}");
    assert!(v["arithmetic"].as_array().is_some_and(|a| a.len() >= 5), "{v}");
    assert!(v["note"].as_str().unwrap().contains("fencing stays required"), "{v}");
    assert!(n("/load/cpus") >= 1, "{v}");
    assert!(v["load"]["average"].as_array().is_some_and(|a| a.len() == 3), "{v}");
    // One second is too short for a p99.9 of either: it says so.
    let warnings = v["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w.as_str().unwrap().starts_with("pause p99.9 rests on")),
        "{v}"
    );
    let s = e.cmd().args(["status", "--json"]).output().unwrap();
    assert_eq!(stdout(&s).trim(), "[]", "the probe key was released");
}

/// The table shows the distributions, the arithmetic and the caveat.
#[test]
fn size_prints_the_arithmetic() {
    let e = Env::new();
    let o = e.run(&["size", "--for", "300ms"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    for want in [
        "renewal round trip",
        "host pause",
        "runtime lag (not used)",
        "load average",
        "P = longest pause",
        "grace (run) = run's default, 5000 ms (no --job given",
        "warning: pause p99.9 rests on",
        "margin = J + 2·max(P, R)",
        "renew every ttl/3",
        "no observed percentile bounds a future pause",
        "fencing stays required",
    ] {
        assert!(out.contains(want), "{want:?} missing from:\n{out}");
    }
}

#[test]
fn size_refuses_bad_input_and_hides_passwords() {
    let e = Env::new();
    let o = e.run(&["size", "--for", "0"]);
    assert_eq!(code(&o), 64, "{}", stderr(&o));
    let o = e.run(&["size", "--job", "soon"]);
    assert_eq!(code(&o), 64, "{}", stderr(&o));
    let o = e
        .cmd()
        .args(["size", "--for", "1s", "--store", "postgres://u:hunter2@127.0.0.1:1/db"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 69, "{}", stderr(&o));
    assert!(!stderr(&o).contains("hunter2") && !stdout(&o).contains("hunter2"), "{}", stderr(&o));
}

/// Nothing of the probe key stays in the store: no lease row, fence counter, queue row, Redis
/// fence key or lock file named `leasehold-size-probe-…`, searched for with each store's own
/// client after `size` ran.
#[test]
fn size_leaves_nothing_behind() {
    const PROBE: &str = "leasehold-size-probe-";
    let size = |store: &str| {
        let e = Env::new();
        let o = e.cmd().args(["size", "--for", "300ms", "--store", store]).output().unwrap();
        assert_eq!(code(&o), 0, "{store}: {}", stderr(&o));
    };
    // SQLite: every table of the store.
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("l.db");
    size(&format!("sqlite://{}", db.display()));
    let c = leasehold::fence::sqlite::rusqlite::Connection::open(&db).unwrap();
    for t in ["leasehold_leases", "leasehold_fences", "leasehold_queue"] {
        let n: i64 = c
            .query_row(&format!("SELECT count(*) FROM {t} WHERE key LIKE '{PROBE}%'"), [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(n, 0, "{t} keeps the probe key");
    }
    // Redis: every key.
    let server = leasehold_testkit::stores::redis::server::RedisServer::start();
    size(&server.url());
    let keys = std::process::Command::new("redis-cli")
        .args(["-p", &server.port().to_string(), "--scan", "--pattern", &format!("*{PROBE}*")])
        .output()
        .unwrap();
    assert_eq!(stdout(&keys).trim(), "", "redis keeps the probe's keys");
    // flock: the lock directory.
    let locks = d.path().join("locks");
    size(&format!("file://{}", locks.display()));
    let left: Vec<_> = std::fs::read_dir(&locks).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "lock files left: {left:?}");
    // PostgreSQL lease table, MySQL lease table and GET_LOCK fence table.
    let schema = leasehold_testkit::PgSchema::new();
    let base = leasehold_testkit::postgres_base();
    let sep = if base.contains('?') { '&' } else { '?' };
    size(&format!("{base}{sep}schema={}", schema.name));
    let q =
        format!("SELECT count(*) FROM {}.leasehold_leases WHERE key LIKE '{PROBE}%'", schema.name);
    let o = std::process::Command::new("psql").arg(&base).args(["-Atc", &q]).output().unwrap();
    assert_eq!(stdout(&o).trim(), "0", "postgres keeps the probe's row: {}", stderr(&o));
    let my = leasehold_testkit::MyDatabase::new();
    size(&my.url(""));
    size(&my.url("?mode=session"));
    for t in ["leasehold_leases", "leasehold_leases_fences"] {
        let q = format!("SELECT count(*) FROM {}.{t} WHERE lock_key LIKE '{PROBE}%'", my.name);
        let server = leasehold_testkit::mysql_server();
        let rest = server.trim_start_matches("mysql://");
        let (user, hostport) = rest.split_once('@').unwrap_or(("root", rest));
        let (host, port) = hostport.split_once(':').unwrap_or((hostport, "3306"));
        let o = std::process::Command::new("mariadb")
            .args(["-u", user, "-h", host, "-P", port.trim_end_matches('/'), "-N", "-e", &q])
            .output()
            .unwrap();
        assert_eq!(stdout(&o).trim(), "0", "mysql {t} keeps the probe's row: {}", stderr(&o));
    }
}
