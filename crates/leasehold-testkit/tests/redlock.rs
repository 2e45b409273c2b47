//! The conformance suite on Redlock over 3 and 5 private Redis servers, with and without a
//! fence source, and the quorum behaviour when instances die.

use std::time::Duration;

use leasehold::{Error, Locker, Wait};
use leasehold_testkit::stores::redis::server::RedisServer;
use leasehold_testkit::{conformance_suite, primitives_suite, redlock_fixture, redlock_url};

mod three {
    use super::*;
    conformance_suite!(redlock_fixture(3, true));
    // Semaphores and readers refused (Error::Unsupported); several keys held.
    primitives_suite!(redlock_fixture(3, true));
}

mod five {
    use super::*;
    conformance_suite!(redlock_fixture(5, true));
}

/// Without a fence source every grant carries fence 0, which the suite checks too.
mod three_unfenced {
    use super::*;
    conformance_suite!(redlock_fixture(3, false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minority_down_still_grants_majority_down_does_not() {
    let mut servers: Vec<RedisServer> = (0..5).map(|_| RedisServer::start()).collect();
    let l = Locker::connect(&redlock_url(&servers)).await.unwrap();
    servers[0].kill9();
    servers[1].kill9();
    let lease = l.acquire("k", Duration::from_secs(10)).await.expect("3 of 5 is a majority");
    assert!(lease.release().await.unwrap().is_clean());
    servers[2].kill9();
    let r = l.acquire("k", Duration::from_secs(10)).await;
    assert!(matches!(r, Err(Error::Unavailable { .. })), "2 of 5 must not grant: {r:?}");
    for s in &servers[3..] {
        assert_eq!(
            s.cli(&["EXISTS", "leasehold:{k}"]),
            "0",
            "a failed quorum is released everywhere"
        );
    }
}

/// A split vote (a minority already held by someone else) is refused and cleaned up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_vote_is_busy_and_released() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let l = Locker::connect(&redlock_url(&servers)).await.unwrap();
    // Someone holds the key on two of three instances.
    for s in &servers[..2] {
        s.cli(&["SET", "leasehold:{k}", "someone", "PX", "800"]);
    }
    let r = l.acquire("k", Duration::from_secs(10)).await;
    assert!(matches!(r, Err(Error::Busy { .. })), "{r:?}");
    assert_eq!(
        servers[2].cli(&["EXISTS", "leasehold:{k}"]),
        "0",
        "the minority grant was released"
    );
    let lease = l
        .acquire("k", Duration::from_secs(10))
        .wait(Wait::For(Duration::from_secs(10)))
        .await
        .expect("granted once the other holder's keys expire");
    assert!(lease.release().await.unwrap().is_clean());
}

/// The fence is fetched after the quorum; if it arrives after the validity ended, the grant
/// is released and the acquire fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_fence_fails_the_grant() {
    #[derive(Debug)]
    struct Slow;
    #[async_trait::async_trait]
    impl leasehold::backends::redis::redlock::FenceSource for Slow {
        async fn next(&self, _: &leasehold::Key) -> leasehold::Result<leasehold::FenceToken> {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(leasehold::FenceToken::new(7))
        }
        fn promise(&self) -> leasehold::FenceRepeat {
            leasehold::FenceRepeat::ClockBacked
        }
    }
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let store = leasehold::backends::redis::redlock::RedlockStore::connect(&redlock_url(&servers))
        .await
        .unwrap()
        .with_fence_source(std::sync::Arc::new(Slow));
    let l = Locker::new(store);
    let r = l.acquire("k", Duration::from_millis(200)).await;
    assert!(matches!(r, Err(Error::Unavailable { .. })), "{r:?}");
    for s in &servers {
        assert_eq!(s.cli(&["EXISTS", "leasehold:{k}"]), "0");
    }
    let ok =
        l.acquire("k", Duration::from_secs(5)).await.expect("a long enough ttl outlasts the fence");
    assert_eq!(ok.fence().get(), 7);
    assert!(ok.release().await.unwrap().is_clean());
}

/// Every instance refusing the same way (a password the URL lacks) is a configuration error;
/// one instance refusing while a majority answers is one failed instance, and grants go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_instances_refusing_is_config_a_minority_is_not() {
    let locked: Vec<RedisServer> =
        (0..3).map(|_| RedisServer::start_with(&["--requirepass", "sekret"])).collect();
    let e = Locker::connect(&redlock_url(&locked)).await.expect_err("no password given");
    assert!(e.is_config() && !e.is_unavailable(), "{e:?}");

    let mut mixed: Vec<RedisServer> = (0..2).map(|_| RedisServer::start()).collect();
    mixed.push(RedisServer::start_with(&["--requirepass", "sekret"]));
    let l = Locker::connect(&redlock_url(&mixed)).await.expect("2 of 3 answer");
    let lease = l.acquire("k", Duration::from_secs(10)).await.expect("a majority grants");
    assert!(lease.release().await.unwrap().is_clean());
}
