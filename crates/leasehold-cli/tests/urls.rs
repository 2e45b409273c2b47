//! Store URLs as a user types them: a misspelled option is refused on every scheme before any
//! connection (exit 64, naming it), every duration option takes the one syntax, and a password
//! in the URL never appears in errors, `doctor` (text and JSON) or `chaos` output.

mod common;

use std::process::{Command, Output};

use common::BIN;

fn leasehold(args: &[&str]) -> (i32, String) {
    let o: Output = Command::new(BIN).args(args).output().unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    (o.status.code().unwrap_or(-1), text)
}

fn run_on(store: &str) -> (i32, String) {
    leasehold(&["run", "--store", store, "k", "--", "true"])
}

/// Nothing listens on port 1: a URL that passes the checks fails to connect (69).
#[test]
fn a_misspelled_option_is_refused_on_every_scheme() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    for url in [
        format!("sqlite://{d}/x.db?wait_replica=1"),
        format!("file://{d}/locks?wait_replica=1"),
        "redis://127.0.0.1:1?wait_replica=1".to_owned(),
        "rediss://127.0.0.1:1?wait_replica=1".to_owned(),
        "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?wait_replica=1".to_owned(),
        "postgres://x@127.0.0.1:1/x?wait_replica=1".to_owned(),
        "mysql://x@127.0.0.1:1/x?wait_replica=1".to_owned(),
        "etcd://127.0.0.1:1?wait_replica=1".to_owned(),
        "zk://127.0.0.1:1?wait_replica=1".to_owned(),
    ] {
        let (code, text) = run_on(&url);
        assert_eq!(code, 64, "{url}: {text}");
        assert!(text.contains("wait_replica"), "{url}: the message names the option: {text}");
    }
    assert!(!dir.path().join("x.db?wait_replica=1").exists(), "no file named after the query");
}

#[test]
fn every_duration_option_takes_the_one_syntax() {
    for url in [
        "redis://127.0.0.1:1?wait_replicas=1&wait_timeout=1s",
        "redis://127.0.0.1:1?wait_replicas=1&wait_timeout=250ms",
        "postgres://x@127.0.0.1:1/x?mode=session&heartbeat=1m",
        "mysql://x@127.0.0.1:1/x?mode=session&heartbeat=1m30s",
        "etcd://127.0.0.1:1?ttl=1m30s",
        // A zk connect waits up to the session timeout: keep it short here.
        "zk://127.0.0.1:1?session=1s500ms",
        "zk://127.0.0.1:1?session=2000ms",
    ] {
        let (code, text) = run_on(url);
        assert_eq!(code, 69, "{url} is valid and reaches no server: {text}");
    }
    for url in [
        "redis://127.0.0.1:1?wait_timeout=100",
        "postgres://x@127.0.0.1:1/x?heartbeat=5x",
        "etcd://127.0.0.1:1?ttl=2h",
        "zk://127.0.0.1:1?session=soon",
    ] {
        let (code, text) = run_on(url);
        assert_eq!(code, 64, "{url}: {text}");
        assert!(text.contains("duration") || text.contains("range"), "{url}: {text}");
    }
}

#[test]
fn a_password_never_appears_in_errors() {
    for url in [
        "redis://u:S3CRETpw@127.0.0.1:99999",
        "redis://u:S3CRETpw@127.0.0.1:1",
        "postgres://u:S3CRETpw@127.0.0.1:1/x",
        "postgres://u@127.0.0.1:1/x?password=S3CRETpw",
        "mysql://u:S3CRETpw@127.0.0.1:1/x",
        "mysql://u:S3CRETpw@127.0.0.1:99999/x",
        "etcd://u:S3CRETpw@127.0.0.1:1",
        "redis://u:S3CRETpw@127.0.0.1:1?bogus=1",
    ] {
        let (code, text) = run_on(url);
        assert!(matches!(code, 64 | 69), "{url}: {code} {text}");
        assert!(!text.contains("S3CRETpw"), "{url} printed its password: {text}");
        for cmd in [&["doctor", "--store", url][..], &["doctor", "--json", "--store", url]] {
            let (_, text) = leasehold(cmd);
            assert!(!text.contains("S3CRETpw"), "{cmd:?} printed the password: {text}");
        }
    }
}

/// doctor and chaos against a Redis that requires a password: the runs work, and neither
/// their output nor chaos's report.json and timeline.svg hold the password.
#[test]
fn doctor_and_chaos_keep_the_password_out_of_their_output() {
    use leasehold_testkit::stores::redis::server::RedisServer;
    let server = RedisServer::start();
    // Set after start: the launcher's readiness check pings without a password.
    server.cli(&["CONFIG", "SET", "requirepass", "S3CRETpw"]);
    let url = format!("redis://:S3CRETpw@127.0.0.1:{}", server.port());
    for cmd in [&["doctor", "--store", &url][..], &["doctor", "--json", "--store", &url]] {
        let (code, text) = leasehold(cmd);
        assert_eq!(code, 0, "{text}");
        assert!(text.contains(":***@"), "{text}");
        assert!(!text.contains("S3CRETpw"), "{text}");
    }
    let out = tempfile::tempdir().unwrap();
    let o = out.path().to_str().unwrap();
    let (code, text) = leasehold(&[
        "chaos",
        "--store",
        &url,
        "--scenario",
        "stalled-holder",
        "--trials",
        "1",
        "--control-trials",
        "1",
        "--ttl",
        "300ms",
        "--out",
        o,
    ]);
    assert_eq!(code, 0, "{text}");
    assert!(!text.contains("S3CRETpw"), "{text}");
    for file in ["report.json", "timeline.svg"] {
        let body = std::fs::read_to_string(out.path().join(file)).unwrap();
        assert!(body.contains(":***@"), "{file} names the store, redacted");
        assert!(!body.contains("S3CRETpw"), "{file} holds the password");
    }
}
