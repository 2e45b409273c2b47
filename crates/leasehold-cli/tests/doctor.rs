//! `leasehold doctor` against private servers and the machine's SQL servers: the settings it
//! reads and the verdicts it draws.

mod common;

use common::*;
use std::process::Command;

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
    use leasehold_testkit::stores::redis::server::RedisServer;
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

/// doctor on MySQL, a 3-member etcd cluster and a standalone ZooKeeper reads their real
/// settings and membership.
#[test]
fn doctor_reads_mysql_etcd_and_zookeeper() {
    let db = leasehold_testkit::MyDatabase::new();
    let v = doctor_json(&db.url(""));
    assert_eq!(setting(&v, "innodb_flush_log_at_trx_commit"), "1");
    assert!(verdicts(&v).contains("lease table: linearizable"), "{v}");

    let cluster = leasehold_testkit::stores::etcd::server::EtcdCluster::start(3);
    let v = doctor_json(&cluster.url(""));
    assert_eq!(setting(&v, "members"), "3");
    assert!(verdicts(&v).contains("survives the loss of 1 member"), "{v}");

    let zk = leasehold_testkit::stores::zookeeper::server::ZkServer::start();
    let v = doctor_json(&zk.url(""));
    assert!(
        setting(&v, &format!("server 127.0.0.1:{}", zk.port())).starts_with("standalone"),
        "{v}"
    );
    assert!(verdicts(&v).contains("single (standalone) server"), "{v}");
}
