//! The harness's multi-server launchers come up and fail over: a ZooKeeper ensemble, a
//! PostgreSQL synchronous pair, five Redlock instances, a Redis Cluster and a Sentinel set,
//! each private, bounded and killed on drop.

use std::time::Duration;

use leasehold::{Error, Locker};
use leasehold_testkit::proxy::{Fault, FaultProxy};
use leasehold_testkit::stores::postgres::sync_pair::PgSyncPair;
use leasehold_testkit::stores::redis::cluster::RedisCluster;
use leasehold_testkit::stores::redis::redlock_set::RedlockSet;
use leasehold_testkit::stores::redis::sentinel::SentinelSet;
use leasehold_testkit::stores::zookeeper::ensemble::ZkEnsemble;

const TTL: Duration = Duration::from_secs(30);

/// Blocking launcher work off the runtime.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("launcher")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_ensemble_elects_again_and_keeps_grants() {
    let zk = blocking(ZkEnsemble::start).await;
    let leader = zk.leader().expect("one leader");
    assert_eq!(
        (0..3).filter(|&i| zk.mode(i).as_deref() == Some("follower")).count(),
        2,
        "two followers besides leader {leader}"
    );
    let url = zk.url("?session=4s");
    let l = Locker::connect(&url).await.unwrap();
    let held = l.acquire("k", TTL).await.unwrap();
    let (zk, old) = blocking(move || {
        let mut zk = zk;
        let old = zk.kill_leader().expect("a new leader");
        (zk, old)
    })
    .await;
    assert_ne!(zk.leader(), Some(old));
    let other = Locker::connect(&url).await.unwrap();
    let r = other.acquire("k", TTL).await;
    assert!(matches!(r, Err(Error::Busy { .. })), "the grant survived the leader: {r:?}");
    let next = other.acquire("k2", TTL).await.expect("the survivors serve");
    assert!(next.fence().get() > held.fence().get(), "czxid grows across the election");
    drop(zk);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_sync_pair_keeps_a_grant_through_promotion() {
    let pair = blocking(PgSyncPair::start).await;
    assert_eq!(pair.sync_state(), "standby1|sync");
    let l = Locker::connect(&pair.primary.url("")).await.unwrap();
    let held = l.acquire("k", TTL).await.unwrap();
    let pair = blocking(move || {
        let mut pair = pair;
        pair.fail_over();
        pair
    })
    .await;
    let promoted = Locker::connect(&pair.standby.url("")).await.unwrap();
    let r = promoted.acquire("k", TTL).await;
    assert!(matches!(r, Err(Error::Busy { .. })), "the synchronous standby had the grant: {r:?}");
    let next = promoted.acquire("k2", TTL).await.unwrap();
    assert!(next.fence().get() > held.fence().get());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_set_forgets_only_with_a_majority_restarted() {
    let set = blocking(|| RedlockSet::start(5)).await;
    let url = set.url("");
    let holder = Locker::connect(&url).await.unwrap();
    let _held = holder.acquire("k", TTL).await.unwrap();
    let set = blocking(move || {
        let mut set = set;
        set.restart_many(&[0, 1]);
        set
    })
    .await;
    assert_eq!(set.holding("leasehold:{k}"), 3);
    let other = Locker::connect(&url).await.unwrap();
    let r = other.acquire("k", TTL).await;
    assert!(matches!(r, Err(Error::Busy { .. })), "a minority forgot, the majority holds: {r:?}");
    let set = blocking(move || {
        let mut set = set;
        set.restart(2);
        set
    })
    .await;
    assert_eq!(set.holding("leasehold:{k}"), 2);
    // The hazard: with a majority restarted empty, a second client is granted the held key
    // (its next try, once it has reconnected to the restarted instance).
    let second = other
        .acquire("k", TTL)
        .wait(leasehold::Wait::For(Duration::from_secs(5)))
        .await
        .expect("a majority forgot the grant");
    drop(second);
    drop(set);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_set_partitioned_minority_still_grants() {
    let set = blocking(|| RedlockSet::start(5)).await;
    let mut proxies = Vec::new();
    for s in set.servers() {
        proxies.push(FaultProxy::start(([127, 0, 0, 1], s.port()).into()).await.unwrap());
    }
    let ports: Vec<u16> = proxies.iter().map(|p| p.addr().port()).collect();
    let l = Locker::connect(&RedlockSet::url_of(&ports, "")).await.unwrap();
    proxies[0].set(Fault::Blackhole);
    proxies[1].set(Fault::Blackhole);
    let lease = l.acquire("k", Duration::from_secs(5)).await.expect("3 of 5 answer");
    assert!(set.holding("leasehold:{k}") >= 3);
    proxies[2].set(Fault::Blackhole);
    let r = l.acquire("k2", Duration::from_secs(5)).await;
    assert!(matches!(r, Err(Error::Unavailable { .. })), "2 of 5 must not grant: {r:?}");
    drop(lease);
    drop(set);
}

#[test]
fn redis_cluster_covers_every_slot_and_fails_over() {
    let mut c = RedisCluster::start();
    let masters = c.cluster_nodes().into_iter().filter(|n| n.master).count();
    assert_eq!(masters, 3, "{:?}", c.cluster_nodes());
    let key = "{leasehold-chaos:k}";
    let m = c.master_of(key).expect("a master for the key");
    assert_eq!(c.cli(m.port, &["SET", key, "v"]), "OK");
    assert_eq!(c.cli(m.port, &["WAIT", "1", "5000"]), "1", "the replica acknowledged");
    // A manual failover: the replica takes the slot with the value.
    let promoted = c.failover(key).expect("CLUSTER FAILOVER");
    assert_ne!(promoted, m.port);
    assert_eq!(c.cli(promoted, &["GET", key]), "v");
    // The old master became its replica; killing the new master promotes it back.
    let killed = c.kill_master_of(key).unwrap();
    assert_eq!(killed, promoted);
    let back = c.wait_promoted(key, killed, Duration::from_secs(30)).expect("promotion");
    assert_eq!(back, m.port);
    assert_eq!(c.cli(back, &["GET", key]), "v");
    c.restart(killed).expect("the killed node rejoins");
}

#[test]
fn sentinels_promote_the_replica_they_discovered() {
    let mut s = SentinelSet::start();
    for i in 0..3 {
        assert_eq!(s.primary_port(i), Some(s.primary.port()), "sentinel {i}");
    }
    s.kill_primary();
    s.wait_promoted(Duration::from_secs(30)).expect("the sentinels promote the replica");
    assert!(s.url("").starts_with("redis-sentinel://127.0.0.1:"));
}
