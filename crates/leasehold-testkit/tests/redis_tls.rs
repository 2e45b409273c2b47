//! The conformance suite over TLS (`rediss://`), and certificate checking.

use std::time::Duration;

use leasehold::{Error, Locker};
use leasehold_testkit::servers::RedisServer;
use leasehold_testkit::{conformance_suite, redis_tls_fixture};

conformance_suite!(redis_tls_fixture());

/// The server's certificate is verified: a CA that did not sign it is refused, and so is
/// plain text on the TLS port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_is_verified() {
    let server = RedisServer::start_tls();
    let other = RedisServer::start_tls(); // its CA did not sign `server`'s certificate
    let wrong = format!("rediss://127.0.0.1:{}?tls_ca={}", server.port(), other.ca().display());
    let r = Locker::connect(&wrong).await;
    assert!(matches!(r, Err(Error::Unavailable { .. })), "{r:?}");
    let plain = format!("redis://127.0.0.1:{}", server.port());
    let r = tokio::time::timeout(Duration::from_secs(20), Locker::connect(&plain)).await;
    assert!(!matches!(r, Ok(Ok(_))), "plain text on a TLS port must not connect");
    let ok = Locker::connect(&server.url()).await.expect("the right CA connects");
    let lease = ok.acquire("k", Duration::from_secs(5)).await.unwrap();
    assert_eq!(server.cli(&["GET", "leasehold:{k}"]), lease.owner().to_string());
    assert!(lease.release().await.unwrap().is_clean());
}
