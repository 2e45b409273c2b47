//! `leasehold bench`: shape and completeness of a short run (no timing is asserted).

mod common;

use common::*;
use std::process::Command;

/// `leasehold bench` on a private Redis measures leasehold and both raw-client baselines (plain
/// `SET NX PX`, and leasehold's own scripts sent raw) in one run, and reports the ratios the
/// README and BENCHMARKS.md quote. Checks shape and that every contender completed cycles;
/// no timing is asserted.
#[test]
fn bench_redis_measures_every_baseline() {
    let redis = leasehold_testkit::stores::redis::server::RedisServer::start();
    // The scenario's JSON (bench.json) and the text table.
    let bench = |scenario: &str| -> (serde_json::Value, String) {
        let out = tempfile::tempdir().unwrap();
        let o = Command::new(BIN)
            .args(["bench", "--store", &redis.url(), "--runs", "1"])
            .args(["--duration", "150ms", "--scenario", scenario, "--out"])
            .arg(out.path())
            .output()
            .unwrap();
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let json = std::fs::read(out.path().join("bench.json")).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        (v["scenarios"][scenario].clone(), String::from_utf8(o.stdout).unwrap())
    };
    let (u, table) = &bench("uncontended");
    let line = "  server time per request (INFO commandstats, median over runs): leasehold EVALSHA (grant or release) ";
    assert!(table.contains(line) && table.contains(" µs, raw bare SET "), "{table}");
    for k in ["leasehold", "raw"] {
        assert!(u["server_us_per_request"][k].as_f64().unwrap() > 0.0, "{k}: {u}");
    }
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

    let (m, table) = &bench("many-keys");
    assert_eq!(m["contenders"].as_array().unwrap().len(), 3, "{m}");
    for c in m["contenders"].as_array().unwrap() {
        assert!(c["ops_per_s_median"].as_f64().unwrap() > 0.0, "{c}");
    }
    for k in [
        "leasehold_cycles_vs_half_request_load",
        "raw_cycles_vs_half_request_load",
        "raw_fenced_cycles_vs_half_request_load",
    ] {
        assert!(m[k].as_f64().unwrap() > 0.0, "{k}: {m}");
    }
    assert!(m["request_load"]["ops_per_s_median"].as_f64().unwrap() > 0.0, "{m}");
    // The ratio lines BENCHMARKS.md quotes, named by the store's kit.
    for line in [
        "  → leasehold cycles/s ÷ (redis-benchmark ops/s ÷ 2): ",
        "  → raw redis-rs (SET NX PX + compare-and-delete) cycles/s ÷ (redis-benchmark ops/s ÷ 2): ",
        "  → raw redis-rs sending leasehold's scripts, cycles/s ÷ (redis-benchmark ops/s ÷ 2): ",
        "  redis-benchmark: ",
    ] {
        assert!(table.contains(line), "{line}\n{table}");
    }
}

/// `--scenario primitives`: on sqlite (which holds all three) a row each for the mutex, the
/// permit and the reader, and both ratios; on the file store (no semaphores) the permit has
/// no row, is listed as skipped with the store's reason, and has no ratio. No timing asserted.
#[test]
fn bench_primitives_rows_and_refusals() {
    let e = Env::new();
    let bench = |store: &str| -> serde_json::Value {
        let o = Command::new(BIN)
            .args(["bench", "--json", "--store", store, "--runs", "1"])
            .args(["--duration", "150ms", "--scenario", "primitives"])
            .output()
            .unwrap();
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["scenarios"]["primitives"].clone()
    };
    let rows = |p: &serde_json::Value| -> Vec<String> {
        let rows = p["contenders"].as_array().unwrap();
        for c in rows {
            assert!(c["ops_per_s_median"].as_f64().unwrap() > 0.0, "{c}");
        }
        rows.iter().map(|c| c["contender"].as_str().unwrap().to_owned()).collect()
    };
    let s = bench(&e.store());
    let names = rows(&s);
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names[1].contains("semaphore") && names[2].contains("reader"), "{names:?}");
    assert!(s["skipped"].as_array().unwrap().is_empty(), "{s}");
    for k in ["permit_time_per_cycle_vs_mutex", "reader_time_per_cycle_vs_mutex"] {
        assert!(s[k].as_f64().unwrap() > 0.0, "{k}: {s}");
    }

    let f = bench(&format!("file://{}/locks", e.dir.path().display()));
    let names = rows(&f);
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.iter().all(|n| !n.contains("semaphore")), "{names:?}");
    let skipped = f["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{f}");
    assert!(skipped[0]["primitive"].as_str().unwrap().contains("semaphore"), "{f}");
    assert!(skipped[0]["reason"].as_str().unwrap().contains("semaphore"), "{f}");
    assert!(f.get("permit_time_per_cycle_vs_mutex").is_none(), "{f}");
    assert!(f["reader_time_per_cycle_vs_mutex"].as_f64().unwrap() > 0.0, "{f}");
}

/// Built with `peer-distributed-lock`, `--scenario primitives` on a private Redis also runs
/// the distributed-lock-redis crate's mutex, semaphore and reader in the same run: a row each
/// with completed cycles and the client requests the server counted, and one "leasehold ÷
/// peer" ratio per primitive, in the JSON and in the table. No timing is asserted.
#[cfg(feature = "peer-distributed-lock")]
#[test]
fn bench_primitives_distributed_lock_peer() {
    let redis = leasehold_testkit::stores::redis::server::RedisServer::start();
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(BIN)
        .env("LEASEHOLD_STORE", redis.url())
        .args(["bench", "--runs", "1", "--duration", "150ms"])
        .args(["--scenario", "primitives", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("bench.json")).unwrap())
            .unwrap();
    let p = &v["scenarios"]["primitives"];
    assert_eq!(p["peer"], "distributed-lock-redis 0.2", "{p}");
    let rows = p["contenders"].as_array().unwrap();
    assert_eq!(rows.len(), 6, "{p}");
    for c in rows {
        assert!(c["ops_per_s_median"].as_f64().unwrap() > 0.0, "{c}");
        assert!(c["store_commands_per_acquisition"].as_f64().unwrap() > 0.0, "{c}");
    }
    let peer_rows: Vec<&str> = rows
        .iter()
        .map(|c| c["contender"].as_str().unwrap())
        .filter(|n| n.starts_with("distributed-lock-redis 0.2 "))
        .collect();
    assert_eq!(peer_rows.len(), 3, "{peer_rows:?}");
    for (prim, word) in [
        ("mutex", "mutex"),
        ("semaphore (3 permits)", "semaphore"),
        ("reader (shared grant)", "reader"),
    ] {
        assert!(peer_rows.iter().any(|n| n.contains(word)), "{word}: {peer_rows:?}");
        let r = p["leasehold_time_per_cycle_vs_peer"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["baseline"] == prim)
            .unwrap_or_else(|| panic!("no ratio for {prim}: {p}"));
        assert!(r["median"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["per_run"].as_array().unwrap().len(), 1, "{r}");
        // Paired right: leasehold's time per cycle over the peer's is the peer's cycles/s over
        // leasehold's (the rows' figures are rounded to whole cycles/s).
        let run0 = |from: &str| {
            let row = rows
                .iter()
                .find(|c| {
                    let n = c["contender"].as_str().unwrap();
                    n.starts_with(from) && n.contains(word)
                })
                .unwrap_or_else(|| panic!("no {from} {word} row: {p}"));
            row["ops_per_s_runs"][0].as_f64().unwrap()
        };
        let want = run0("distributed-lock-redis") / run0("leasehold");
        let got = r["per_run"][0].as_f64().unwrap();
        assert!((got - want).abs() <= 0.01 * want + 0.002, "{prim}: {got} vs {want}: {p}");
        let line = format!("→ leasehold {prim} time per cycle ÷ distributed-lock-redis 0.2's");
        assert!(table.contains(&line), "{line}\n{table}");
    }
}

/// `leasehold bench --scenario uncontended` on `store`: the uncontended scenario's JSON.
fn uncontended(store: &str) -> serde_json::Value {
    let o = Command::new(BIN)
        .env("LEASEHOLD_STORE", store)
        .args(["bench", "--json", "--runs", "2"])
        .args(["--duration", "150ms", "--scenario", "uncontended"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["scenarios"]["uncontended"].clone()
}

/// The contenders' labels of an uncontended run, each checked to have completed cycles.
fn contenders(u: &serde_json::Value) -> Vec<String> {
    let rows = u["contenders"].as_array().unwrap();
    for c in rows {
        assert!(c["ops_per_s_median"].as_f64().unwrap() > 0.0, "{c}");
    }
    rows.iter().map(|c| c["contender"].as_str().unwrap().to_owned()).collect()
}

/// The stores whose raw baseline comes from their kit in the harness (NATS on a private
/// `nats-server -js`, MySQL on a private MariaDB): each baseline ran cycles in the same run as
/// leasehold, and the headline ratio is taken against the one sending leasehold's requests,
/// run by run. No timing is asserted.
#[test]
fn bench_kit_baselines_nats_and_mysql() {
    let nats = leasehold_testkit::stores::nats::server::NatsServer::start();
    let u = uncontended(&nats.url("/bench"));
    let names = contenders(&u);
    assert!(names.iter().any(|n| n.starts_with("raw async-nats sending leasehold's")), "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("raw async-nats, no heartbeat")), "{names:?}");
    assert!(u["leasehold_time_per_cycle_vs_raw"].as_f64().unwrap() > 0.0, "{u}");
    assert_eq!(u["per_run_ratios"].as_array().unwrap().len(), 2, "{u}");
    drop(nats);

    let my = leasehold_testkit::stores::mysql::server::MyServer::start();
    for (suffix, label) in [
        ("", "raw mysql_async: leasehold's grant and release"),
        ("?mode=session", "raw mysql_async: leasehold's GET_LOCK"),
    ] {
        let u = uncontended(&my.url(suffix));
        let names = contenders(&u);
        assert!(names.iter().any(|n| n.starts_with(label)), "{names:?}");
        assert!(u["leasehold_time_per_cycle_vs_raw"].as_f64().unwrap() > 0.0, "{u}");
    }
}

/// etcd (a private one-member cluster) and PostgreSQL (a private server, lease table and
/// session locks): their baselines come from their kits in the harness, the raw clients in
/// slices of the same run as leasehold, etcd's Lock RPC in the handoff too, and pgbench as
/// the server's own load tool. Every baseline completed cycles; no timing is asserted.
#[test]
fn bench_kit_baselines_etcd_and_postgres() {
    let etcd = leasehold_testkit::stores::etcd::server::EtcdCluster::start(1);
    let u = uncontended(&etcd.url("/bench"));
    let names = contenders(&u);
    assert!(names.iter().any(|n| n.starts_with("raw etcd gRPC client")), "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("etcd's Lock RPC")), "{names:?}");
    assert!(u["leasehold_time_per_cycle_vs_raw"].as_f64().unwrap() > 0.0, "{u}");
    let o = Command::new(BIN)
        .env("LEASEHOLD_STORE", etcd.url("/bench"))
        .args(["bench", "--json", "--runs", "1"])
        .args(["--duration", "300ms", "--scenario", "handoff", "--tasks", "3"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let h = &v["scenarios"]["handoff"];
    assert!(h["leasehold_handoffs_vs_own_lock"].as_f64().unwrap() > 0.0, "{h}");
    drop(etcd);

    let pg = leasehold_testkit::stores::postgres::server::PgServer::start();
    let u = uncontended(&pg.url(""));
    let names = contenders(&u);
    assert!(names.iter().any(|n| n.starts_with("pgbench: leasehold's grant")), "{names:?}");
    assert!(
        u["leasehold_time_per_cycle_vs_native_load"][0]["median"].as_f64().unwrap() > 0.0,
        "{u}"
    );
    let u = uncontended(&pg.url("?mode=session"));
    let names = contenders(&u);
    assert!(names.iter().any(|n| n.starts_with("raw tokio-postgres")), "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("pgbench: pg_advisory_lock")), "{names:?}");
    assert!(u["leasehold_time_per_cycle_vs_raw"].as_f64().unwrap() > 0.0, "{u}");
    assert_eq!(u["leasehold_time_per_cycle_vs_native_load"].as_array().unwrap().len(), 2, "{u}");
}

/// `--store redis-cluster://… --single redis://…`: the cluster against one server in one run,
/// each side as the cluster's kit has it. Every scenario (leasehold's three and the raw
/// client's) ran cycles on both sides, both sides' servers counted script calls, the key
/// spread covers the three masters, redis-benchmark ran on both, and the table quotes them.
/// A store with no reference of its family is refused. No timing is asserted.
#[test]
fn bench_cluster_against_one_server() {
    let cluster = leasehold_testkit::stores::redis::cluster::RedisCluster::start();
    let single = leasehold_testkit::stores::redis::server::RedisServer::start();
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(BIN)
        .env("LEASEHOLD_STORE", cluster.url(""))
        .env("LEASEHOLD_BENCH_SINGLE", single.url())
        .args(["bench", "--runs", "1", "--duration", "150ms"])
        .args(["--tasks", "3", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let table = String::from_utf8(o.stdout).unwrap();
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("cluster.json")).unwrap()).unwrap();
    let names: Vec<&str> =
        v["scenarios"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["uncontended", "handoff", "many-keys", "uncontended, raw redis-rs"], "{v}");
    for sc in v["scenarios"].as_array().unwrap() {
        for side in ["single_cycles_per_s", "cluster_cycles_per_s"] {
            assert!(sc[side][0].as_f64().unwrap() > 0.0, "{side}: {sc}");
        }
        for (i, side) in ["single", "cluster"].into_iter().enumerate() {
            let scripts = sc["scripts_per_cycle"][i].as_f64().unwrap();
            assert!(scripts >= 1.0, "{side} counted no script calls: {sc}");
        }
    }
    assert_eq!(v["masters"].as_array().unwrap().len(), 3, "{v}");
    let shares: Vec<f64> =
        v["key_share_per_master"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    assert!(shares.iter().all(|s| *s > 0.0) && (shares.iter().sum::<f64>() - 1.0).abs() < 0.01);
    assert!(v["request_load"][0].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["request_load"][1].as_f64().unwrap() > 0.0, "{v}");
    for line in [
        "server µs per cycle (INFO commandstats)",
        "uncontended, leasehold's cluster ÷ single over raw redis-rs's: cycles/s ",
        "redis-benchmark -c 50 -P 16 SET NX PX ops/s: single ",
    ] {
        assert!(table.contains(line), "{line}\n{table}");
    }

    let o = Command::new(BIN)
        .env("LEASEHOLD_STORE", single.url())
        .args(["bench", "--single", &single.url(), "--runs", "1", "--duration", "150ms"])
        .output()
        .unwrap();
    assert_ne!(code(&o), 0);
    assert!(stderr(&o).contains("redis:// has no reference store"), "{}", stderr(&o));
}
