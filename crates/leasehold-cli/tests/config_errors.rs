//! Fail open only on an outage: a store that refuses the configuration (a wrong password, a
//! DB index or database that does not exist, a missing role) exits 78 and never runs the
//! command, whatever `--if-unavailable` says. These rely on each store classifying such
//! refusals as `Error::Config`.

mod common;

use common::*;
use leasehold_testkit::stores::redis::server::RedisServer;

/// `run` (with and without `--if-unavailable run`) and `status` against `url`: 78, and the
/// command did not run.
fn refused(url: &str) {
    let e = Env::new();
    let store = format!("--store={url}");
    for extra in [&[][..], &["--if-unavailable", "run"][..]] {
        let o = e
            .cmd()
            .args(["run", &store, "--timeout", "3s"])
            .args(extra)
            .args(["job", "--", "touch", "ran"])
            .output()
            .unwrap();
        assert_eq!(code(&o), 78, "{url} {extra:?}: {}", stderr(&o));
        assert!(!e.path("ran").exists(), "{url} {extra:?}: the command ran");
        assert!(!stderr(&o).contains("WITHOUT a lease"), "{}", stderr(&o));
    }
    let o = e.cmd().args(["status", &store, "--timeout", "3s"]).output().unwrap();
    assert_eq!(code(&o), 78, "{url}: {}", stderr(&o));
}

#[test]
fn redis_wrong_password_and_missing_db_index_exit_78() {
    let redis = RedisServer::start();
    let port = redis.port();
    refused(&format!("redis://127.0.0.1:{port}/99"));
    // From here on the server wants a password.
    let set = redis.cli(&["CONFIG", "SET", "requirepass", "right-pw"]);
    assert_eq!(set, "OK");
    refused(&format!("redis://:wrong-pw@127.0.0.1:{port}"));
    refused(&format!("redis://127.0.0.1:{port}"));
}

#[test]
fn postgres_missing_database_or_role_exits_78() {
    let base = leasehold_testkit::postgres_base();
    let (scheme_user, rest) = base.rsplit_once('@').unwrap();
    let host = rest.split('/').next().unwrap();
    refused(&format!("{scheme_user}@{host}/leasehold_no_such_database"));
    refused(&format!("postgres://leasehold_no_such_role@{host}/test"));
}

/// A store URL aimed at another service (issue 35: `redis://` at PostgreSQL's port answered
/// "broken pipe" and exited 69, so `--if-unavailable run` ran the job unlocked on every
/// host) is the same kind of mistake: 78, and the job does not run. The machine's real
/// PostgreSQL, MariaDB and Redis, and an HTTP listener started here.
#[test]
fn store_url_at_another_service_exits_78() {
    let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = http.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut s in http.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buf = [0u8; 1024];
                let mut seen = Vec::new();
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    if seen.windows(2).any(|w| w == b"\r\n") {
                        let _ = s.write_all(
                            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        );
                        return;
                    }
                }
            });
        }
    });
    refused("redis://127.0.0.1:5432");
    refused(&format!("redis://127.0.0.1:{port}"));
    refused("postgres://postgres@127.0.0.1:6379/test");
    refused("mysql://root@127.0.0.1:6379/test");
    refused("zk://127.0.0.1:6379");
}
