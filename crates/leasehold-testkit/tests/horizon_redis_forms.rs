//! Bounded state on the Redis forms and primitives `horizon.rs` does not cover (issue 35):
//! with a 1 s horizon, a Redis Cluster's and a Sentinel-managed primary's fence counters, a
//! reader's counter and a semaphore slot's counter are gone once their leases' TTL plus the
//! horizon has passed, and the next grant's fence is still greater than every earlier one
//! (it comes from the server's clock).

use std::time::Duration;

use leasehold::Locker;
use leasehold_testkit::stores::redis::cluster::RedisCluster;
use leasehold_testkit::stores::redis::sentinel::SentinelSet;
use leasehold_testkit::stores::redis::server::RedisServer;

const TTL: Duration = Duration::from_millis(500);
/// TTL plus the 1 s horizon, plus room for the server's expiry cycle.
const FORGOTTEN: Duration = Duration::from_millis(500 + 1_000 + 400);

fn pttl(out: String) -> i64 {
    out.parse().unwrap_or_else(|_| panic!("PTTL answered {out:?}"))
}

/// Redis Cluster: the counter lives in the key's slot on its master, expires ttl + horizon
/// after the grant, and the next grant's fence is larger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_counter_is_forgotten_after_the_horizon_and_fences_still_grow() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start).await.unwrap();
    let l = Locker::connect(&cluster.url("?prefix=h:&horizon=1s")).await.unwrap();
    let a = l.acquire("job", TTL).await.unwrap();
    let master = cluster.master_of("h:{job}").expect("a master for the key's slot").port;
    let left = pttl(cluster.cli(master, &["PTTL", "h:{job}:fence"]));
    assert!(left > 1_000 && left <= 1_500, "the counter lives ttl + horizon: {left}");
    let first = a.fence();
    assert!(a.release().await.unwrap().is_clean());
    tokio::time::sleep(FORGOTTEN).await;
    assert_eq!(cluster.cli(master, &["EXISTS", "h:{job}:fence"]), "0", "the counter is gone");
    let b = l.acquire("job", TTL).await.unwrap();
    assert!(b.fence() > first, "{} after {}", b.fence(), first);
    assert!(b.release().await.unwrap().is_clean());
}

/// Redis Sentinel: the same on the primary the sentinels name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_counter_is_forgotten_after_the_horizon_and_fences_still_grow() {
    let set = tokio::task::spawn_blocking(SentinelSet::start).await.unwrap();
    let l = Locker::connect(&set.url("?prefix=h:&horizon=1s")).await.unwrap();
    let a = l.acquire("job", TTL).await.unwrap();
    let left = pttl(set.primary.cli(&["PTTL", "h:{job}:fence"]));
    assert!(left > 1_000 && left <= 1_500, "the counter lives ttl + horizon: {left}");
    let first = a.fence();
    assert!(a.release().await.unwrap().is_clean());
    tokio::time::sleep(FORGOTTEN).await;
    assert_eq!(set.primary.cli(&["EXISTS", "h:{job}:fence"]), "0", "the counter is gone");
    let b = l.acquire("job", TTL).await.unwrap();
    assert!(b.fence() > first, "{} after {}", b.fence(), first);
    assert!(b.release().await.unwrap().is_clean());
}

/// Readers and semaphore slots: a reader's counter outlives the last reader by the horizon
/// (and no longer), a slot's counter its lease by the horizon; fences grow across both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reader_and_permit_counters_are_forgotten_after_the_horizon() {
    let server = RedisServer::start();
    let l = Locker::connect(&format!("{}?prefix=h:&horizon=1s", server.url())).await.unwrap();

    let r = l.acquire_shared("doc", TTL).await.unwrap();
    let left = pttl(server.cli(&["PTTL", "h:{doc}:fence"]));
    assert!(left > 1_000 && left <= 1_500, "a reader's counter lives ttl + horizon: {left}");
    let first_reader = r.fence();
    assert!(r.release().await.unwrap().is_clean());

    let p = l.acquire_permit("pool", 2, TTL).await.unwrap();
    let slot = format!("h:{{pool}}#{}:fence", p.slot());
    let left = pttl(server.cli(&["PTTL", &slot]));
    assert!(left > 1_000 && left <= 1_500, "a slot's counter lives ttl + horizon: {left}");
    let first_permit = p.fence();
    assert!(p.release().await.unwrap().is_clean());

    tokio::time::sleep(FORGOTTEN).await;
    assert_eq!(server.cli(&["EXISTS", "h:{doc}:fence"]), "0", "the reader's counter is gone");
    assert_eq!(server.cli(&["EXISTS", &slot]), "0", "the slot's counter is gone");
    let w = l.acquire("doc", TTL).await.unwrap();
    assert!(w.fence() > first_reader, "{} after {}", w.fence(), first_reader);
    assert!(w.release().await.unwrap().is_clean());
    let q = l.acquire_permit("pool", 2, TTL).await.unwrap();
    assert!(q.fence() > first_permit, "{} after {}", q.fence(), first_permit);
    assert!(q.release().await.unwrap().is_clean());
}
