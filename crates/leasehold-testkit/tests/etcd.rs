//! etcd: the conformance suite, the process-level scenarios, interop with `etcdctl lock`,
//! the stale-release case, leader loss on a 3-member cluster and the etcd fenced resource.

use std::time::{Duration, Instant};

use leasehold::backends::etcd::EtcdStore;
use leasehold::fence::etcd::EtcdFence;
use leasehold::{Error, Locker, LostReason, Wait};
use leasehold_testkit::conformance::unique_key;
use leasehold_testkit::stores::etcd::server::EtcdCluster;
use leasehold_testkit::{etcd_fixture, process};

mod conformance {
    use leasehold_testkit::{conformance_suite, etcd_fixture, primitives_suite};
    conformance_suite!(etcd_fixture());
    primitives_suite!(etcd_fixture());
}

leasehold_testkit::process_suite! {
    mutex { multi_process_mutual_exclusion: etcd_fixture() }
    permits { multi_process_permits: etcd_fixture() }
    // The etcd fenced transaction is the resource, on the store's own cluster.
    stalled etcd_fixture(), resource |url: &str| ((), url.to_owned());
}

/// `etcdctl lock` (etcd's own concurrency.Mutex) and leasehold exclude each other on one name,
/// both ways, and the lock keys are readable with `etcdctl get`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_lock_and_leasehold_exclude_each_other() {
    let cluster = EtcdCluster::single();
    let l = Locker::connect(&cluster.url("")).await.unwrap();
    let key = unique_key("interop");
    let name = format!("leasehold/{key}");

    // leasehold holds: etcdctl waits.
    let a = l.acquire(&key, Duration::from_secs(30)).await.unwrap();
    let listed = cluster.ctl(&["get", "--prefix", &format!("{name}/")]);
    assert!(listed.contains(&a.owner().to_string()), "lock key not visible: {listed}");
    let endpoints = cluster.endpoints();
    let ctl = {
        let name = name.clone();
        tokio::task::spawn_blocking(move || {
            let out = std::process::Command::new("timeout")
                .args(["20", "etcdctl", &format!("--endpoints={endpoints}"), "lock", &name])
                .args(["--", "sh", "-c", "echo got; sleep 2; echo done"])
                .env("ETCDCTL_API", "3")
                .output()
                .unwrap();
            (Instant::now(), String::from_utf8_lossy(&out.stdout).into_owned())
        })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let released = Instant::now();
    assert!(a.release().await.unwrap().is_clean());
    // etcdctl now holds for 2 s: leasehold must not get in.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = l.acquire(&key, Duration::from_secs(30)).await;
    assert!(matches!(r, Err(Error::Busy { .. })), "leasehold got a lock etcdctl holds: {r:?}");
    assert!(matches!(l.holders(Some(&key)).await, Err(Error::Busy { .. })));
    let b = l
        .acquire(&key, Duration::from_secs(30))
        .wait(Wait::For(Duration::from_secs(20)))
        .await
        .expect("leasehold gets the lock after etcdctl");
    let (ctl_done, said) = ctl.await.unwrap();
    assert_eq!(said.trim(), "got\ndone", "etcdctl output: {said:?}");
    // It ran its 2 s command only after the release.
    assert!(
        ctl_done >= released + Duration::from_secs(2),
        "etcdctl held the lock while leasehold did"
    );
    assert!(b.release().await.unwrap().is_clean());
}

/// A stale release never deletes the successor's grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_release_does_not_delete_the_successor() {
    let fx = etcd_fixture().await;
    process::stale_release_keeps_successor(&fx.locker, &fx.url).await;
}

/// Freezing the only etcd member: keepalives go unanswered, `admit()` turns false at once and
/// `lost()` fires before the server could expire the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_store_turns_admit_false_then_fires_lost() {
    let cluster = EtcdCluster::single();
    let l = Locker::connect(&cluster.url("?ttl=3s")).await.unwrap();
    let key = unique_key("frozen");
    let a = l.acquire(&key, Duration::from_secs(30)).await.unwrap();
    let t0 = Instant::now();
    cluster.stop(0);
    // admit() turns false with the first unanswered keepalive, before lost() fires.
    while a.admit() {
        assert!(t0.elapsed() < Duration::from_secs(3), "admit() still true at the TTL");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!a.is_lost(), "lost() fired before admit() turned false");
    let lost = tokio::time::timeout(Duration::from_secs(10), a.lost()).await;
    let at = t0.elapsed();
    cluster.cont(0);
    let reason = lost.expect("lost() fired");
    assert!(matches!(reason, LostReason::SessionEnded(_)), "{reason:?}");
    // The TTL counts from the last keepalive the server applied, at most TTL/3 before t0.
    assert!(at < Duration::from_secs(3), "lost() fired {at:?} after the freeze");
    assert!(!a.admit());
    // The store opens a new session for the next grant.
    let b = l
        .acquire(&key, Duration::from_secs(30))
        .wait(Wait::For(Duration::from_secs(15)))
        .await
        .expect("new session after the old one ended");
    assert!(b.fence() > a.fence());
    assert!(b.release().await.unwrap().is_clean());
}

/// On a 3-member cluster, killing the leader during a hold does not admit a second holder, and
/// the next grant's fence is larger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_loss_keeps_the_holder_and_fences_monotonic() {
    let mut cluster = EtcdCluster::start(3);
    let url = cluster.url("?ttl=3s");
    let l = Locker::connect(&url).await.unwrap();
    let rival = Locker::connect(&url).await.unwrap();
    let key = unique_key("leader-loss");
    let a = l.acquire(&key, Duration::from_secs(30)).await.unwrap();
    let leader = cluster.leader().expect("a leader");
    cluster.kill9(leader);
    // A rival tries for longer than the session TTL: the holder keeps its lock throughout.
    let r =
        rival.acquire(&key, Duration::from_secs(30)).wait(Wait::For(Duration::from_secs(6))).await;
    assert!(matches!(r, Err(Error::Busy { .. }) | Err(Error::Unavailable { .. })), "{r:?}");
    assert!(!a.is_lost(), "the holder lost its lock to a leader change: {:?}", a.lost().await);
    let fence = a.fence();
    assert!(a.release().await.unwrap().is_clean());
    let b = rival
        .acquire(&key, Duration::from_secs(30))
        .wait(Wait::For(Duration::from_secs(15)))
        .await
        .expect("the rival after release");
    assert!(b.fence() > fence);
    cluster.restart(leader);
    assert!(b.release().await.unwrap().is_clean());
}

/// The etcd fenced transaction applies while the grant holds and refuses once it has ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_transaction_follows_the_lock_key() {
    let cluster = EtcdCluster::single();
    let store = EtcdStore::connect(&cluster.url("")).await.unwrap();
    let fence = EtcdFence::for_store(&store);
    let l = Locker::new(store);
    let key = unique_key("fenced-txn");
    let a = l.acquire(&key, Duration::from_secs(30)).await.unwrap();
    let fa = a.fencing();
    fence.put(&fa, "data/x", "a").await.expect("holder's put");
    assert!(a.release().await.unwrap().is_clean());
    let b = l.acquire(&key, Duration::from_secs(30)).await.unwrap();
    let r = fence.put(&fa, "data/x", "stale").await;
    assert!(matches!(r, Err(Error::StaleFence { .. })), "{r:?}");
    fence.put(&b.fencing(), "data/x", "b").await.expect("successor's put");
    // A token from another key is refused: it names another lock key.
    let other = l.acquire(&unique_key("fenced-other"), Duration::from_secs(30)).await.unwrap();
    let forged =
        leasehold::fence::Fencing::new(b.fencing().key().clone(), other.fence(), other.owner());
    assert!(matches!(fence.put(&forged, "data/x", "x").await, Err(Error::StaleFence { .. })));
    assert_eq!(cluster.ctl(&["get", "--print-value-only", "data/x"]), "b");
    assert!(b.release().await.unwrap().is_clean());
    assert!(other.release().await.unwrap().is_clean());
}

#[tokio::test]
async fn url_options_are_checked() {
    for bad in
        ["etcd://", "etcd://127.0.0.1", "etcd://127.0.0.1:1?ttl=0s", "etcd://127.0.0.1:1?x=1"]
    {
        let r = Locker::connect(bad).await;
        assert!(matches!(r, Err(Error::InvalidInput(_))), "{bad}: {r:?}");
    }
}

/// Fail open only on an outage: with auth on, no user, a wrong password and a role without
/// permission on the lock prefix are configuration errors; a closed port is an outage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_are_config_and_a_closed_port_is_unavailable() {
    let cluster = EtcdCluster::single();
    for args in [
        &["user", "add", "root:rootpw"][..],
        &["user", "add", "app:apppw"],
        &["role", "add", "other"],
        &["role", "grant-permission", "other", "--prefix=true", "readwrite", "other/"],
        &["user", "grant-role", "app", "other"],
        &["auth", "enable"],
    ] {
        cluster.ctl(args);
    }
    let with = |user: &str| cluster.url("").replacen("etcd://", &format!("etcd://{user}"), 1);
    // Refused when the store authenticates or opens its session, or at the first write (etcd
    // grants leases to anyone).
    for url in [with(""), with("root:wrong@"), with("app:apppw@")] {
        let e = match Locker::connect(&url).await {
            Err(e) => e,
            Ok(l) => l.acquire("k", Duration::from_secs(30)).await.expect_err(&url),
        };
        assert!(e.is_config() && !e.is_unavailable() && !e.is_retryable(), "{url}: {e:?}");
        assert!(!e.to_string().contains("wrong"), "a password in an error: {e}");
    }
    let root = Locker::connect(&with("root:rootpw@")).await.expect("root may");
    assert!(
        root.acquire("k", Duration::from_secs(30))
            .await
            .unwrap()
            .release()
            .await
            .unwrap()
            .is_clean()
    );

    let closed = format!("etcd://127.0.0.1:{}", leasehold_testkit::spawn::free_port());
    let e = Locker::connect(&closed).await.expect_err("nothing listens");
    assert!(e.is_unavailable() && !e.is_config(), "{e:?}");
}

/// Readers and writers in the layout of etcd's `recipes.RWMutex` (`KEY/read/…`, `KEY/write/…`,
/// written here as the recipe's Go client would, by plain puts): a recipe writer queued after
/// a leasehold reader blocks later leasehold readers and writers; a recipe reader overlaps
/// leasehold's readers and blocks its writer; an `etcdctl lock` key blocks readers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recipe_rwmutex_keys_interoperate() {
    let cluster = EtcdCluster::single();
    let l = Locker::connect(&cluster.url("")).await.unwrap();
    let key = unique_key("recipe-rw");
    let name = format!("leasehold/{key}");
    let busy = |r: &leasehold::Result<leasehold::Lease>| matches!(r, Err(Error::Busy { .. }));
    let r1 = l.acquire_shared(&key, Duration::from_secs(30)).await.unwrap();
    let listed = cluster.ctl(&["get", "--prefix", "--keys-only", &format!("{name}/")]);
    assert!(listed.contains(&format!("{name}/read/{}", r1.owner())), "{listed}");

    let writer = format!("{name}/write/1700000000000000001");
    cluster.ctl(&["put", &writer, "go"]);
    let r = l.acquire_shared(&key, Duration::from_secs(30)).await;
    assert!(busy(&r), "a reader passed a queued recipe writer: {r:?}");
    let w = l.acquire(&key, Duration::from_secs(30)).await;
    assert!(busy(&w), "a writer beside a reader: {w:?}");
    assert!(r1.release().await.unwrap().is_clean());
    let r = l.acquire_shared(&key, Duration::from_secs(30)).await;
    assert!(busy(&r), "a reader beside the recipe's writer: {r:?}");
    cluster.ctl(&["del", &writer]);

    let reader = format!("{name}/read/1700000000000000002");
    cluster.ctl(&["put", &reader, "go"]);
    let r2 = l.acquire_shared(&key, Duration::from_secs(30)).await.expect("readers overlap");
    let w = l.acquire(&key, Duration::from_secs(30)).await;
    assert!(busy(&w), "a writer beside the recipe's reader: {w:?}");
    let h = l.holders(Some(&key)).await.unwrap();
    assert_eq!(h.len(), 1, "the recipe's reader has no owner token: {h:?}");
    assert_eq!(h[0].mode, leasehold::Mode::Shared);
    assert!(r2.release().await.unwrap().is_clean());
    cluster.ctl(&["del", &reader]);

    let w = l.acquire(&key, Duration::from_secs(30)).await.unwrap();
    let listed = cluster.ctl(&["get", "--prefix", "--keys-only", &format!("{name}/")]);
    assert!(listed.contains(&format!("{name}/write/{}", w.owner())), "{listed}");
    assert!(w.release().await.unwrap().is_clean());

    let mutex = format!("{name}/694d7c5a1f2b3c4d"); // concurrency.Mutex's key (etcdctl lock)
    cluster.ctl(&["put", &mutex, ""]);
    let r = l.acquire_shared(&key, Duration::from_secs(30)).await;
    assert!(busy(&r), "a reader beside an etcdctl lock holder: {r:?}");
    cluster.ctl(&["del", &mutex]);
    let r = l.acquire_shared(&key, Duration::from_secs(30)).await.unwrap();
    assert!(r.release().await.unwrap().is_clean());
}

/// Semaphore slots are plain locks `PREFIX/SEM#i` (grant key `…/write/OWNER`, the value naming
/// `slot I of N`): the etcd fenced transaction follows a permit's slot (refused once it is
/// released), and a key `etcdctl lock` puts under a slot's name takes that slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_are_slot_locks_fenced_per_slot() {
    let cluster = EtcdCluster::single();
    let store = EtcdStore::connect(&cluster.url("")).await.unwrap();
    let fence = EtcdFence::for_store(&store);
    let l = Locker::new(store);
    let sem = unique_key("etcd-sem");
    let ttl = Duration::from_secs(30);
    let p = l.acquire_permit(&sem, 2, ttl).await.unwrap();
    let grant = format!("leasehold/{sem}#{}/write/{}", p.slot(), p.owner());
    let value = cluster.ctl(&["get", "--print-value-only", &grant]);
    assert!(value.contains(&format!("slot {} of 2", p.slot())), "{value:?}");
    let fenced = p.fencing();
    fence.put(&fenced, "data/sem", "p").await.expect("the permit's fenced put");
    let q = l.acquire_permit(&sem, 2, ttl).await.unwrap();
    assert_ne!(p.slot(), q.slot());
    assert!(p.release().await.unwrap().is_clean());
    let r = fence.put(&fenced, "data/sem", "stale").await;
    assert!(matches!(r, Err(Error::StaleFence { .. })), "released permit: {r:?}");
    // An etcdctl lock holder on the free slot's name takes that slot.
    let free = format!("leasehold/{sem}#{}", 1 - q.slot());
    let ctl = cluster.ctl(&["put", &format!("{free}/694d7c5a1f2b3c4d"), ""]);
    let busy = l.acquire_permit(&sem, 2, ttl).await;
    assert!(matches!(busy, Err(Error::Busy { .. })), "{ctl} {busy:?}");
    cluster.ctl(&["del", "--prefix", &format!("{free}/")]);
    let r = l.acquire_permit(&sem, 2, ttl).await.expect("the slot is free again");
    assert_eq!(cluster.ctl(&["get", "--print-value-only", "data/sem"]), "p");
    assert!(q.release().await.unwrap().is_clean());
    assert!(r.release().await.unwrap().is_clean());
}

/// Two callers naming different N race for an empty semaphore, round after round: never
/// both granted (the count check and the grant are one transaction over all slots).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_permit_counts_never_mix() {
    let fx = etcd_fixture().await;
    let other = leasehold_testkit::conformance::other(&fx.locker);
    let ttl = Duration::from_secs(30);
    let (mut mixed, mut refused) = (0, 0);
    for round in 0..60 {
        let sem = unique_key(&format!("etcd-sem-race{round}"));
        let (a, b) = tokio::join!(
            fx.locker.acquire_permit(&sem, 2, ttl),
            other.acquire_permit(&sem, 3, ttl)
        );
        for r in [&a, &b] {
            if let Err(e) = r {
                assert!(matches!(e, Error::InvalidInput(_)), "{e:?}");
                refused += 1;
            }
        }
        mixed += usize::from(a.is_ok() && b.is_ok());
        for p in [a, b].into_iter().flatten() {
            assert!(p.release().await.unwrap().is_clean());
        }
    }
    assert_eq!(mixed, 0, "both counts granted at once in {mixed} rounds");
    assert!(refused >= 60, "one of each pair refused: {refused}");
}

/// A waiter frozen (SIGSTOP) past its etcd lease held nothing: resumed, it waits on with a new
/// session and gets the key when the holder releases, or answers busy when its wait runs out.
/// It used to fail "store unavailable".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_frozen_past_its_session_waits_on() {
    let cluster = EtcdCluster::single();
    let url = cluster.url("?ttl=2s");
    let l = Locker::connect(&url).await.unwrap();
    let worker = std::path::Path::new(env!("CARGO_BIN_EXE_lh-worker"));
    process::waiter_frozen_past_its_session(&l, &url, worker, Duration::from_secs(2)).await;
}

/// The torture run with workers frozen past their sessions in turn (holding or waiting): the
/// history is safe and no acquire fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torture_workers_frozen_past_their_sessions() {
    let cluster = EtcdCluster::single();
    let worker = std::path::Path::new(env!("CARGO_BIN_EXE_lh-worker"));
    let key = unique_key("torture-frozen");
    let session = Duration::from_secs(2);
    leasehold_testkit::torture::frozen_past_sessions(
        worker,
        &cluster.url("?ttl=2s"),
        &key,
        session,
    )
    .await;
}
