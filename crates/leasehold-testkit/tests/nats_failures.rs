//! The NATS failure plans `leasehold chaos` runs (`store-kill`, `failover`, the
//! `nats-cluster` topology) start their private servers, fail them and let them recover, each
//! step bounded: a killed single server comes back on its store with the grant; a cluster
//! whose grants' stream leader is killed elects another that still has the grant.

use std::time::{Duration, Instant};

use leasehold::{Error, Locker, Scheme};
use leasehold_harness::stores::topology;
use leasehold_testkit::failure::FailingStore;
use leasehold_testkit::spawn::blocking;
use leasehold_testkit::stores::plan;

const TTL: Duration = Duration::from_secs(30);

/// Acquires `key` on `url`, retrying (bounded by 30 s) while the store is unavailable or the
/// outcome unknown (a restarted server, a stream electing a leader): the first answer of the
/// store itself.
async fn settled_acquire(url: &str, key: &str) -> leasehold::Result<leasehold::Lease> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = match Locker::connect(url).await {
            Ok(l) => l.acquire(key, TTL).await,
            Err(e) => Err(e),
        };
        match r {
            Err(Error::Unavailable { .. } | Error::UnknownOutcome(_))
                if Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            other => return other,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_kill_restarts_the_server_on_its_store() {
    let p = plan(Scheme::Nats, false).expect("NATS has a store-kill plan");
    let mut store: Box<dyn FailingStore> = blocking(p.start).await.unwrap();
    let url = store.url("");
    let held = settled_acquire(&url, "k").await.expect("the private server serves");
    let mut store = blocking(move || {
        store.kill9();
        store
    })
    .await
    .unwrap();
    let r = Locker::open(&leasehold::StoreUrl::parse(&url).unwrap(), Duration::from_secs(2)).await;
    assert!(r.is_err(), "a killed server took a connection");
    store = blocking(move || {
        store.restart();
        store
    })
    .await
    .unwrap();
    let r = settled_acquire(&url, "k").await;
    assert!(
        matches!(r, Err(Error::Busy { .. })),
        "the grant survived kill -9 on file storage: {r:?}"
    );
    let next = settled_acquire(&url, "k2").await.expect("the restarted server serves");
    assert!(next.fence().get() > held.fence().get(), "fences go on growing");
    drop(store);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_kills_the_stream_leader_and_the_grant_survives() {
    let p = plan(Scheme::Nats, true).expect("NATS has a failover plan");
    let store: Box<dyn FailingStore> = blocking(p.start).await.unwrap();
    let url = store.url("/chaosb");
    assert!(url.contains("replicas=3"), "the failover cluster replicates its buckets: {url}");
    let held = settled_acquire(&url, "k").await.expect("the cluster serves");
    let ((what, after), store) = blocking(move || {
        let mut store = store;
        (store.fail_over("/chaosb"), store)
    })
    .await
    .unwrap();
    assert!(what.contains("took over"), "a new stream leader: {what}");
    let r = settled_acquire(&after, "k").await;
    assert!(matches!(r, Err(Error::Busy { .. })), "the new stream leader has the grant: {r:?}");
    let next = settled_acquire(&after, "k2").await.expect("the two survivors serve");
    assert!(next.fence().get() > held.fence().get());
    drop(store);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_topology_store_kill_restarts_the_old_leader() {
    let topo = topology::find("nats-cluster").expect("the NATS topology");
    assert_eq!(topo.scheme, Scheme::Nats);
    let p = topo.plan("store-kill").expect("store-kill on the cluster");
    let store: Box<dyn FailingStore> = blocking(p.start).await.unwrap();
    let url = store.url(topo.default_options);
    let held = settled_acquire(&url, "k").await.expect("the cluster serves");
    let store = blocking(move || {
        let mut store = store;
        store.kill9();
        store.restart();
        store
    })
    .await
    .unwrap();
    let r = settled_acquire(&url, "k").await;
    assert!(matches!(r, Err(Error::Busy { .. })), "the grant survived the leader's loss: {r:?}");
    let next = settled_acquire(&url, "k2").await.expect("all three serve again");
    assert!(next.fence().get() > held.fence().get());
    drop(store);
}

/// A first grant of a TTL on a replicated cluster creates that TTL's heartbeat bucket (a new
/// 3-replica stream and its Raft group). Its local deadline is measured from the heartbeat's
/// send, after the bucket exists: the lease is alive when `acquire` returns. Found by
/// `chaos --scenario failover`: measured from before the bucket's creation, every first grant
/// of a 300 ms lease on three nodes came back already lost, and a successor's grant after the
/// failover (its bucket created while a node was down) was lost on arrival, refused by the
/// resource, while the store still held it for the successor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_grant_on_a_cluster_is_alive_when_acquire_returns() {
    let p = plan(Scheme::Nats, true).expect("NATS has a failover plan");
    let store: Box<dyn FailingStore> = blocking(p.start).await.unwrap();
    let url = store.url("");
    let ttl = Duration::from_millis(300);
    let deadline = Instant::now() + Duration::from_secs(30);
    let l = loop {
        match Locker::connect(&url).await {
            Ok(l) => break l,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("no JetStream cluster at {url}: {e}"),
        }
    };
    for (i, key) in ["first-a", "first-b"].into_iter().enumerate() {
        // A fresh TTL each time: each grant creates its heartbeat bucket.
        let ttl = ttl + Duration::from_millis(100 * i as u64);
        let t0 = Instant::now();
        let lease = l.acquire(key, ttl).auto_renew(false).await.expect("granted");
        let took = t0.elapsed();
        assert!(
            lease.admit(),
            "a {ttl:?} lease was lost on arrival (acquire took {took:?}): its deadline counted \
             the heartbeat bucket's creation"
        );
        let _ = lease.release().await;
    }
    drop(store);
}
