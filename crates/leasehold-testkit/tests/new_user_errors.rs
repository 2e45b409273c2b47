//! Errors as a new user meets them (issue 35): a store URL aimed at the wrong service is a
//! configuration error, never an outage (so `leasehold run --if-unavailable run` does not run
//! the job unlocked on every host); a fence claim before `fence::install` says how to
//! install; URL options are given once; `connect_timeout` takes one syntax; no message says
//! its kind twice.
//!
//! The wrong-service cases use the machine's real services (Redis at 6379, PostgreSQL at
//! 5432, MariaDB at 3306) without touching their data (nothing is ever authenticated), and an
//! HTTP listener this test starts on a free loopback port.

use std::time::{Duration, Instant};

use leasehold::fence::Fencing;
use leasehold::fence::mysql::mysql_async::{self, prelude::Queryable};
use leasehold::fence::postgres::tokio_postgres;
use leasehold::{Error, FenceToken, Key, Locker, OwnerToken};
use leasehold_testkit::{MyDatabase, PgSchema, postgres_base};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Starts a tiny HTTP/1.1 server on a free loopback port: it answers every request (and
/// anything else it is sent, once a line break arrives) with `400 Bad Request`, as web
/// servers do. Returns its port.
async fn http_listener() -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else { return };
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let mut seen = Vec::new();
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    if seen.windows(2).any(|w| w == b"\r\n") {
                        let body = "bad request\n";
                        let _ = s
                            .write_all(
                                format!(
                                    "HTTP/1.1 400 Bad Request\r\nContent-Length: {}\r\n\
                                     Connection: close\r\n\r\n{body}",
                                    body.len()
                                )
                                .as_bytes(),
                            )
                            .await;
                        return;
                    }
                }
            });
        }
    });
    port
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

async fn connect(url: &str) -> (Result<Locker, Error>, Duration) {
    let start = Instant::now();
    let r = Locker::connect_within(url, Duration::from_secs(5)).await;
    (r, start.elapsed())
}

/// Each `(url, what answers there)`: refused as configuration, naming what answers, well
/// within the connect limit.
async fn assert_wrong_service(cases: &[(String, &str)]) {
    for (url, found) in cases {
        let (r, took) = connect(url).await;
        let e = r.err().unwrap_or_else(|| panic!("{url}: connected"));
        assert!(e.is_config() && !e.is_unavailable(), "{url}: {e:?}");
        assert!(e.to_string().contains(found), "{url}: {e}");
        assert!(took < Duration::from_secs(3), "{url}: took {took:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_url_at_another_service_is_config() {
    let http = http_listener().await;
    assert_wrong_service(&[
        ("redis://127.0.0.1:5432".into(), "PostgreSQL"),
        ("redis://127.0.0.1:3306".into(), "MySQL"),
        (format!("redis://127.0.0.1:{http}"), "HTTP"),
        // The other Redis forms: a seed, a sentinel, every Redlock instance.
        ("redis-cluster://127.0.0.1:5432".into(), "PostgreSQL"),
        ("redis-sentinel://127.0.0.1:5432/mymaster".into(), "PostgreSQL"),
        (format!("redlock://127.0.0.1:5432,127.0.0.1:3306,127.0.0.1:{http}"), "PostgreSQL"),
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_url_at_another_service_is_config() {
    let http = http_listener().await;
    assert_wrong_service(&[
        ("postgres://postgres@127.0.0.1:6379/test".into(), "Redis"),
        ("postgres://postgres@127.0.0.1:3306/test".into(), "MySQL"),
        (format!("postgres://postgres@127.0.0.1:{http}/test"), "HTTP"),
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_url_at_another_service_is_config() {
    let http = http_listener().await;
    assert_wrong_service(&[
        ("mysql://root@127.0.0.1:6379/test".into(), "Redis"),
        ("mysql://root@127.0.0.1:5432/test".into(), "PostgreSQL"),
        (format!("mysql://root@127.0.0.1:{http}/test"), "HTTP"),
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_url_at_another_service_is_config() {
    let http = http_listener().await;
    assert_wrong_service(&[
        ("etcd://127.0.0.1:6379".into(), "Redis"),
        ("etcd://127.0.0.1:5432".into(), "PostgreSQL"),
        ("etcd://127.0.0.1:3306".into(), "MySQL"),
        (format!("etcd://127.0.0.1:{http}"), "HTTP"),
    ])
    .await;
    // A real etcd is not taken for a mere HTTP server.
    let cluster = leasehold_harness::stores::etcd::server::EtcdCluster::single();
    let (r, _) = connect(&cluster.url("")).await;
    assert!(r.is_ok(), "{:?}", r.err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_url_at_another_service_is_config() {
    let http = http_listener().await;
    assert_wrong_service(&[
        ("zk://127.0.0.1:6379".into(), "Redis"),
        ("zk://127.0.0.1:5432".into(), "PostgreSQL"),
        ("zk://127.0.0.1:3306".into(), "MySQL"),
        (format!("zk://127.0.0.1:{http}"), "HTTP"),
    ])
    .await;
    // A real ZooKeeper, which answers none of the probe's questions, connects.
    let server = leasehold_harness::stores::zookeeper::server::ZkServer::start();
    let (r, _) = connect(&server.url("")).await;
    assert!(r.is_ok(), "{:?}", r.err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_url_at_another_service_is_config() {
    let http = http_listener().await;
    assert_wrong_service(&[
        ("nats://127.0.0.1:6379".into(), "Redis"),
        ("nats://127.0.0.1:5432".into(), "PostgreSQL"),
        ("nats://127.0.0.1:3306".into(), "MySQL"),
        (format!("nats://127.0.0.1:{http}"), "HTTP"),
    ])
    .await;
    // The other way round: a NATS server, which greets every client first, is named to the
    // stores that find it at their URL's port; a real NATS connects.
    let server =
        tokio::task::spawn_blocking(leasehold_harness::stores::nats::server::NatsServer::start)
            .await
            .unwrap();
    let p = server.port();
    assert_wrong_service(&[
        (format!("redis://127.0.0.1:{p}"), "NATS"),
        (format!("postgres://postgres@127.0.0.1:{p}/test"), "NATS"),
        (format!("mysql://root@127.0.0.1:{p}/test"), "NATS"),
    ])
    .await;
    let (r, _) = connect(&server.url("")).await;
    assert!(r.is_ok(), "{:?}", r.err());
}

/// A port nothing listens on stays an outage, on every store; the right service at the
/// right port connects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_connections_stay_unavailable_and_right_ports_connect() {
    let p = closed_port();
    for url in [
        format!("redis://127.0.0.1:{p}"),
        format!("postgres://postgres@127.0.0.1:{p}/test"),
        format!("mysql://root@127.0.0.1:{p}/test"),
        format!("etcd://127.0.0.1:{p}"),
        format!("zk://127.0.0.1:{p}"),
        format!("nats://127.0.0.1:{p}"),
    ] {
        let (r, _) = connect(&url).await;
        let e = r.err().unwrap_or_else(|| panic!("{url}: connected"));
        assert!(e.is_unavailable() && !e.is_config(), "{url}: {e:?}");
    }
    let schema = PgSchema::new();
    let (r, _) = connect(&format!("{}?schema={}", postgres_base(), schema.name)).await;
    assert!(r.is_ok(), "{:?}", r.err());
    let db = MyDatabase::new();
    let (r, _) = connect(&db.url("")).await;
    assert!(r.is_ok(), "{:?}", r.err());
}

fn fencing(deadline: Option<Duration>) -> Fencing {
    let f =
        Fencing::new(Key::new("k").unwrap(), FenceToken::new(5), OwnerToken::generate().unwrap());
    match deadline {
        Some(d) => f.with_deadline(Instant::now() + d),
        None => f,
    }
}

/// A claim on a database where `fence::install` never ran says the table is missing and
/// how to install it, with a lease's deadline (the bound statement pipelined before the
/// claim) and without, inside a transaction and outside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_claim_without_install_says_how_to_install() {
    let schema = PgSchema::new();
    let url = format!("{}?options=-csearch_path%3D{}", postgres_base(), schema.name);
    let (mut c, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    c.batch_execute(&format!("CREATE SCHEMA {}", schema.name)).await.unwrap();
    for deadline in [Some(Duration::from_secs(30)), None] {
        let f = fencing(deadline);
        let tx = c.transaction().await.unwrap();
        let e = leasehold::fence::postgres::claim(&tx, "r", &f).await.unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("leasehold_fence") && text.contains("fence::postgres::install"),
            "{text}"
        );
        drop(tx);
        let e = leasehold::fence::postgres::check(&c, "r", &f).await.unwrap_err();
        assert!(e.to_string().contains("fence::postgres::install"), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_claim_without_install_says_how_to_install() {
    let db = MyDatabase::new();
    let mut c = mysql_async::Conn::from_url(db.url("")).await.unwrap();
    for deadline in [Some(Duration::from_secs(30)), None] {
        let f = fencing(deadline);
        let mut tx = c.start_transaction(Default::default()).await.unwrap();
        let e = leasehold::fence::mysql::claim(&mut tx, "r", &f).await.unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("leasehold_fence") && text.contains("fence::mysql::install"),
            "{text}"
        );
        tx.rollback().await.unwrap();
        let e = leasehold::fence::mysql::check(&mut c, "r", &f).await.unwrap_err();
        assert!(e.to_string().contains("fence::mysql::install"), "{e}");
    }
    c.query_drop("DO 1").await.unwrap();
}

/// An option given twice is refused, naming it, before any connection; `connect_timeout`
/// takes the one duration syntax (and whole seconds) on both SQL stores, and a bad value
/// names the option.
#[tokio::test]
async fn url_options_once_and_one_connect_timeout_syntax() {
    for url in [
        "redis://127.0.0.1:6379?prefix=a&prefix=b",
        "postgres://postgres@127.0.0.1/test?schema=a&schema=b",
        "mysql://root@127.0.0.1/test?table=a&table=b",
        "sqlite:///tmp/x.db?prefix=a&prefix=b",
    ] {
        let e = Locker::connect(url).await.err().unwrap();
        let text = e.to_string();
        if url.starts_with("sqlite") {
            // prefix is not one of sqlite://'s options: refused as unknown first.
            assert!(matches!(e, Error::InvalidInput(_)), "{url}: {e}");
            continue;
        }
        assert!(matches!(e, Error::InvalidInput(_)) && text.contains("twice"), "{url}: {e}");
        assert!(!text.contains("invalid input: invalid input"), "{text}");
    }
    let schema = PgSchema::new();
    for t in ["5s", "500ms", "5"] {
        let url = format!("{}?schema={}&connect_timeout={t}", postgres_base(), schema.name);
        assert!(Locker::connect(&url).await.is_ok(), "postgres connect_timeout={t}");
    }
    let db = MyDatabase::new();
    for t in ["5s", "500ms", "5"] {
        assert!(
            Locker::connect(&db.url(&format!("?connect_timeout={t}"))).await.is_ok(),
            "mysql {t}"
        );
    }
    for url in [format!("{}?connect_timeout=5x", postgres_base()), db.url("?connect_timeout=5x")] {
        let e = Locker::connect(&url).await.err().unwrap();
        assert!(matches!(&e, Error::InvalidInput(m) if m.contains("connect_timeout")), "{e}");
    }
    // The transaction form's hint, and a bad value, say "invalid input" once.
    let e = Locker::connect(&format!("{}?mode=xact", postgres_base())).await.err().unwrap();
    assert_eq!(e.to_string().matches("invalid input").count(), 1, "{e}");
}
