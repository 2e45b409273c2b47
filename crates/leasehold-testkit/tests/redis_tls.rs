//! The conformance suite over TLS (`rediss://`), and certificate checking.

use std::time::{Duration, Instant};

use leasehold::Locker;
use leasehold_testkit::stores::redis::server::RedisServer;
use leasehold_testkit::{conformance_suite, redis_tls_fixture};

conformance_suite!(redis_tls_fixture());

/// The server's certificate is verified: a CA that did not sign it is refused as a
/// configuration error (never an outage a job may run through), and so is plain text on the
/// TLS port, with a message that names the mistake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_is_verified() {
    let server = RedisServer::start_tls();
    let other = RedisServer::start_tls(); // its CA did not sign `server`'s certificate
    let wrong = format!("rediss://127.0.0.1:{}?tls_ca={}", server.port(), other.ca().display());
    let e = Locker::connect(&wrong).await.expect_err("an untrusted certificate must not connect");
    assert!(e.is_config() && !e.is_unavailable(), "{e:?}");
    assert!(e.to_string().contains("certificate") && e.to_string().contains("tls_ca"), "{e}");
    let plain = format!("redis://127.0.0.1:{}", server.port());
    let t = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(20), Locker::connect(&plain)).await;
    let e = r.expect("an answer within the connect limit").expect_err("plain text on a TLS port");
    assert!(e.is_config() && !e.is_unavailable(), "{e:?}");
    assert!(e.to_string().contains("rediss://"), "the message names the fix: {e}");
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "failed fast, not at a timeout: {:?}",
        t.elapsed()
    );
    let ok = Locker::connect(&server.url()).await.expect("the right CA connects");
    let lease = ok.acquire("k", Duration::from_secs(5)).await.unwrap();
    assert_eq!(server.cli(&["GET", "leasehold:{k}"]), lease.owner().to_string());
    assert!(lease.release().await.unwrap().is_clean());
}

/// `rediss://` aimed at a plain Redis port fails at once (not at the connect limit) with a
/// message naming the mistake; it is a configuration error, never an outage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_url_at_a_plain_port_is_named() {
    let tls = RedisServer::start_tls();
    let plain = RedisServer::start();
    let url = format!("rediss://127.0.0.1:{}?tls_ca={}", plain.port(), tls.ca().display());
    let t = Instant::now();
    let e = Locker::connect_within(&url, Duration::from_secs(10))
        .await
        .expect_err("TLS to a plain port must not connect");
    assert!(e.is_config() && !e.is_unavailable(), "{e:?}");
    assert!(e.to_string().contains("redis://"), "the message names the fix: {e}");
    assert!(t.elapsed() < Duration::from_secs(5), "well before the 10 s limit: {:?}", t.elapsed());
}

/// `doctor`'s probe connects as the store does: with the URL's `tls_ca`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_honours_tls_ca() {
    let server = RedisServer::start_tls();
    let p = leasehold::probe::probe(&server.url().parse().expect("a rediss:// URL"))
        .await
        .expect("the probe trusts tls_ca");
    assert!(p.setting("version").is_some(), "{p:?}");
}
