//! The conformance and primitives suites, the process-level scenarios (permits too), and a
//! failover and a slot migration during a held lease, on a private Redis Cluster (3
//! masters, 3 replicas) per test.

use std::time::{Duration, Instant};

use leasehold::{Locker, Wait};
use leasehold_testkit::conformance::other;
use leasehold_testkit::stores::redis::cluster::RedisCluster;
use leasehold_testkit::stores::redis::server::RedisServer;
use leasehold_testkit::{conformance_suite, primitives_suite, redis_cluster_fixture};

conformance_suite!(redis_cluster_fixture());
primitives_suite!(redis_cluster_fixture());

leasehold_testkit::process_suite! {
    mutex { multi_process_mutual_exclusion: redis_cluster_fixture() }
    permits { multi_process_permits: redis_cluster_fixture() }
    stalled redis_cluster_fixture(), resource |_| {
        let resource = RedisServer::start();
        let url = resource.url();
        (resource, url)
    };
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("launcher")
}

/// `CLUSTER FAILOVER` and then a slot migration of the key's slot while a lease is held: its
/// renewals (one of them while the slot is half-moved, answered with ASK) and its release
/// still reach the key, and the next grant's fence is larger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_and_slot_migration_during_a_hold() {
    let cluster = blocking(RedisCluster::start).await;
    let url = cluster.url("");
    let l = Locker::connect(&url).await.unwrap();
    let held = l.acquire("held", Duration::from_secs(30)).auto_renew(false).await.unwrap();
    let first = held.fence();
    let name = "leasehold:{held}";
    let old = cluster.master_of(name).unwrap().port;
    let (cluster, new) = blocking(move || {
        let new = cluster.failover(name);
        (cluster, new)
    })
    .await;
    let new = new.expect("CLUSTER FAILOVER");
    assert_ne!(old, new);
    held.renew().await.expect("renewal after CLUSTER FAILOVER reaches the new master");
    assert_eq!(cluster.cli(new, &["GET", name]), held.owner().to_string());

    let handle = tokio::runtime::Handle::current();
    let l2 = Locker::connect(&url).await.unwrap();
    // While the slot is half-moved (keys on the target, the source answering ASK): the
    // renewal and a status read follow ASK to the target.
    let moved = tokio::task::block_in_place(|| {
        cluster.migrate_slot(name, || {
            handle.block_on(async {
                held.renew().await.expect("renewal mid-migration (ASK)");
                let r = l2.holders(Some("held")).await.expect("status mid-migration (ASK)");
                assert_eq!(r.len(), 1, "{r:?}");
            })
        })
    });
    let (src, dst) = moved.expect("slot migration");
    assert_eq!(src, new);
    assert_eq!(cluster.master_of(name).unwrap().port, dst);
    held.renew().await.expect("renewal after the slot moved");
    let pttl: u64 = cluster.cli(dst, &["PTTL", name]).parse().unwrap();
    assert!(pttl > 20_000, "renewed on the new slot owner: {pttl}");
    assert!(held.release().await.unwrap().is_clean(), "release reaches the moved key");
    let next = l.acquire("held", Duration::from_secs(30)).await.unwrap();
    assert!(next.fence() > first, "{} then {}", first, next.fence());
    assert!(next.release().await.unwrap().is_clean());
    drop(cluster);
}

/// The same release sent twice (what redis-rs sends again when a reply is lost or a node
/// answers MOVED): the second finds the first's tombstone in the key's slot and answers
/// released, so the lease reports clean; a release of a key another owner holds is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_release_finds_its_tombstone() {
    let cluster = blocking(RedisCluster::start).await;
    let l = Locker::connect(&cluster.url("")).await.unwrap();
    let a = l.acquire("t", Duration::from_secs(30)).auto_renew(false).await.unwrap();
    let owner = a.owner();
    assert!(l.release_by_owner("t", &owner).await.unwrap());
    assert!(l.release_by_owner("t", &owner).await.unwrap(), "the repeat is told released");
    let (lease, tomb) = ("leasehold:{t}", "leasehold:{t}:released-by");
    assert_eq!(cluster.slot_of(lease), cluster.slot_of(tomb), "the tombstone is in the slot");
    let master = cluster.master_of(lease).unwrap().port;
    assert_eq!(cluster.cli(master, &["GET", tomb]), owner.to_string());
    drop(a);
    let b = l.acquire("t", Duration::from_secs(30)).await.unwrap();
    assert!(!l.release_by_owner("t", &owner).await.unwrap(), "b holds it now");
    assert!(b.release().await.unwrap().is_clean());
    assert!(!l.release_by_owner("t", &owner).await.unwrap(), "b's tombstone, not a's");
}

/// A waiter subscribes to the key's shard channel on the master of its slot and is woken
/// by the release, before its poll fallback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_is_woken_by_the_shard_channel() {
    let cluster = blocking(RedisCluster::start).await;
    let url = cluster.url("");
    let l = Locker::connect(&url).await.unwrap();
    let held = l.acquire("door", Duration::from_secs(60)).await.unwrap();
    let other = Locker::connect(&url).await.unwrap();
    let waiter = tokio::spawn(async move {
        let b = other
            .acquire("door", Duration::from_secs(30))
            .wait(Wait::For(Duration::from_secs(30)))
            .await;
        (b, Instant::now(), other)
    });
    let master = cluster.master_of("leasehold:{door}").unwrap().port;
    let channel = "leasehold:{door}:released";
    let start = Instant::now();
    while cluster.cli(master, &["PUBSUB", "SHARDNUMSUB", channel]).lines().nth(1) != Some("1") {
        assert!(start.elapsed() < Duration::from_secs(10), "no SSUBSCRIBE on the slot's master");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let fence = held.fence();
    let released = Instant::now();
    assert!(held.release().await.unwrap().is_clean());
    let (b, got, _other) =
        tokio::time::timeout(Duration::from_secs(20), waiter).await.unwrap().unwrap();
    let b = b.expect("the waiter gets the key");
    assert!(b.fence() > fence);
    assert!(got - released < Duration::from_secs(5), "handoff took {:?}", got - released);
    assert!(b.release().await.unwrap().is_clean());
}

/// Keys spread over every master are all listed by `status`; keys with braces keep their
/// lease and counter in one slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reads_every_master_and_brace_keys_share_a_slot() {
    let cluster = blocking(RedisCluster::start).await;
    let l = Locker::connect(&cluster.url("?prefix=app:")).await.unwrap();
    let mut leases = Vec::new();
    for k in ["a", "b", "c", "d", "e", "f", "g", "h", "}x{", "{y}", "}"] {
        leases.push(l.acquire(k, Duration::from_secs(30)).await.unwrap());
    }
    let masters: std::collections::HashSet<u16> = ["a", "b", "c", "d", "e", "f", "g", "h"]
        .iter()
        .map(|k| cluster.master_of(&format!("app:{{{k}}}")).unwrap().port)
        .collect();
    assert_eq!(masters.len(), 3, "the keys spread over the three masters");
    let held = l.holders(None).await.unwrap();
    assert_eq!(held.len(), leases.len(), "{held:?}");
    for lease in &leases {
        let h = l.holders(Some(lease.key().as_str())).await.unwrap();
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].fence, Some(lease.fence()));
    }
    for lease in leases {
        assert!(lease.release().await.unwrap().is_clean());
    }
}

/// A semaphore's slot keys lie in the slot of its permit record, a reader's keys in the slot
/// of the key's lease (by the cluster's own `CLUSTER KEYSLOT`), also for keys with braces;
/// `status` lists the permits and the readers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_and_reader_keys_keep_to_one_slot() {
    let cluster = blocking(RedisCluster::start).await;
    let l = Locker::connect(&cluster.url("?prefix=app:")).await.unwrap();
    let a = l.acquire_permit("pool", 2, LONG).await.unwrap();
    let b = other(&l).acquire_permit("pool", 2, LONG).await.unwrap();
    let record = "app:{pool}:permits";
    let tag = cluster.slot_of(record).unwrap();
    let master = cluster.master_of(record).unwrap().port;
    for p in [&a, &b] {
        let lease = format!("app:{{pool}}#{}", p.slot());
        for name in [lease.clone(), format!("{lease}:fence"), format!("{lease}:holder")] {
            assert_eq!(cluster.slot_of(&name), Some(tag), "{name} beside {record}");
        }
        assert_eq!(cluster.cli(master, &["GET", &lease]), p.owner().to_string());
        let n = cluster.cli(master, &["HGET", record, &format!("{lease}|{}", p.owner())]);
        assert_eq!(n, "2", "the slot's permit count");
    }
    let braces = l.acquire_permit("}x{", 1, LONG).await.unwrap();
    let r1 = l.acquire_shared("doc", LONG).await.unwrap();
    let r2 = other(&l).acquire_shared("doc", LONG).await.unwrap();
    let doc = cluster.slot_of("app:{doc}").unwrap();
    for name in ["app:{doc}:readers", "app:{doc}:fence", "app:{doc}:intents"] {
        assert_eq!(cluster.slot_of(name), Some(doc), "{name}");
    }
    let doc_master = cluster.master_of("app:{doc}").unwrap().port;
    assert_eq!(cluster.cli(doc_master, &["GET", "app:{doc}"]), "readers");
    let all = l.holders(None).await.unwrap();
    let keys: Vec<&str> = all.iter().map(|h| h.key.as_str()).collect();
    assert_eq!(all.len(), 5, "two permits, one of }}x{{, two readers: {all:?}");
    assert!(keys.contains(&"}x{#0") && keys.contains(&a.key().as_str()), "{keys:?}");
    let readers = all.iter().filter(|h| h.mode == leasehold::Mode::Shared).count();
    assert_eq!(readers, 2, "{all:?}");
    for p in [a, b, braces] {
        assert!(p.release().await.unwrap().is_clean());
    }
    for r in [r1, r2] {
        assert!(r.release().await.unwrap().is_clean());
    }
    assert!(l.holders(None).await.unwrap().is_empty());
}

/// A waiting reader and a waiting permit subscribe to their key's shard channel on the master
/// of its slot (a slot's channel in the semaphore's slot), and the release wakes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_readers_and_permits_use_the_shard_channel() {
    let cluster = blocking(RedisCluster::start).await;
    let l = Locker::connect(&cluster.url("")).await.unwrap();
    let writer = l.acquire("doc", LONG).await.unwrap();
    let permit = l.acquire_permit("pool", 1, LONG).await.unwrap();
    let (o1, o2) = (other(&l), other(&l));
    let wait = Wait::For(Duration::from_secs(30));
    let reader = tokio::spawn(async move {
        let r = o1.acquire_shared("doc", LONG).wait(wait).await;
        (r, Instant::now(), o1)
    });
    let next = tokio::spawn(async move {
        let p = o2.acquire_permit("pool", 1, LONG).wait(wait).await;
        (p, Instant::now(), o2)
    });
    for (lease, channel) in [
        ("leasehold:{doc}", "leasehold:{doc}:released"),
        ("leasehold:{pool}#0", "leasehold:{pool}#0:released"),
    ] {
        assert_eq!(cluster.slot_of(lease), cluster.slot_of(channel));
        let master = cluster.master_of(lease).unwrap().port;
        let start = Instant::now();
        while cluster.cli(master, &["PUBSUB", "SHARDNUMSUB", channel]).lines().nth(1) != Some("1") {
            assert!(start.elapsed() < Duration::from_secs(10), "no SSUBSCRIBE to {channel}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let released = Instant::now();
    assert!(writer.release().await.unwrap().is_clean());
    assert!(permit.release().await.unwrap().is_clean());
    let (r, r_at, _o1) = tokio::time::timeout(BOUND, reader).await.unwrap().unwrap();
    let (p, p_at, _o2) = tokio::time::timeout(BOUND, next).await.unwrap().unwrap();
    let (r, p) = (r.expect("the reader"), p.expect("the permit"));
    for at in [r_at, p_at] {
        assert!(at - released < Duration::from_secs(5), "handoff took {:?}", at - released);
    }
    assert!(r.release().await.unwrap().is_clean());
    assert!(p.release().await.unwrap().is_clean());
}

const LONG: Duration = Duration::from_secs(30);
const BOUND: Duration = Duration::from_secs(20);

/// A hot key's handoffs keep its shard subscription: 20 handoffs between two lockers, back
/// to back, subscribe its channel once (or twice, had a pause outlasted the 1 s linger), not
/// once per handoff; and the subscription is dropped once the key stays idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_keys_subscription_lingers_between_handoffs() {
    let cluster = blocking(RedisCluster::start).await;
    let l = Locker::connect(&cluster.url("")).await.unwrap();
    let o = other(&l);
    let master = cluster.master_of("leasehold:{hot}").unwrap().port;
    let subscribes = || -> u64 {
        let stats = cluster.cli(master, &["INFO", "commandstats"]);
        stats
            .lines()
            .find_map(|l| l.strip_prefix("cmdstat_ssubscribe:calls="))
            .and_then(|v| v.split(',').next()?.parse().ok())
            .unwrap_or(0)
    };
    let before = subscribes();
    let mut held = l.acquire("hot", LONG).await.unwrap();
    for round in 0..20 {
        let waiter = if round % 2 == 0 { o.clone() } else { l.clone() };
        let next = tokio::spawn(async move {
            waiter.acquire("hot", LONG).wait(Wait::For(Duration::from_secs(10))).await
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(held.release().await.unwrap().is_clean());
        held = tokio::time::timeout(BOUND, next).await.unwrap().unwrap().expect("handoff");
    }
    assert!(held.release().await.unwrap().is_clean());
    let n = subscribes() - before;
    assert!((1..=2).contains(&n), "{n} SSUBSCRIBEs for 20 handoffs");
    let channel = "leasehold:{hot}:released";
    let start = Instant::now();
    while cluster.cli(master, &["PUBSUB", "SHARDNUMSUB", channel]).lines().nth(1) != Some("0") {
        assert!(start.elapsed() < Duration::from_secs(10), "the idle subscription stayed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
