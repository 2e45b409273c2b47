//! NATS JetStream KV: the conformance suite, the primitives (semaphores and readers refused),
//! the process-level scenarios, and the store failures after which fences must not go back
//! (a restarted server, a deleted JetStream store: every stream sequence starts again at 1),
//! on a private `nats-server -js`.

use std::time::Duration;

use leasehold::{Error, Locker, Wait};
use leasehold_testkit::conformance::unique_key;
use leasehold_testkit::stores::nats::server::{NatsCluster, NatsServer};
use leasehold_testkit::{Fixture, conformance_suite, primitives_suite, process};

/// A fixture over a private `nats-server -js` started for this test.
async fn nats_fixture() -> Fixture {
    let server = NatsServer::start();
    let url = server.url("");
    let locker = Locker::connect(&url)
        .await
        .unwrap_or_else(|e| panic!("cannot open the store at {url}: {e}"));
    Fixture { locker, url, guard: Box::new(server) }
}

conformance_suite!(nats_fixture());
primitives_suite!(nats_fixture());

leasehold_testkit::process_suite! {
    mutex { multi_process_mutual_exclusion: nats_fixture() }
    stalled nats_fixture(), resource leasehold_testkit::sqlite_resource;
}

/// A stale release never deletes the successor's grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_release_does_not_delete_the_successor() {
    let fx = nats_fixture().await;
    process::stale_release_keeps_successor(&fx.locker, &fx.url).await;
}

/// Fences never go back: not across releases and expiries, not across a `kill -9` and
/// restart, and not when the JetStream store is lost (every bucket gone, every stream's
/// sequence starting again at 1): the server's clock starts the chain above it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_never_go_back_across_restarts_and_a_lost_store() {
    let mut server = NatsServer::start();
    let key = unique_key("nats-fences");
    let mut issued = Vec::new();
    let grant = async |l: &Locker, issued: &mut Vec<u64>| {
        for _ in 0..3 {
            let lease = l.acquire(&key, Duration::from_secs(30)).await.unwrap();
            issued.push(lease.fence().get());
            assert!(lease.release().await.unwrap().is_clean());
        }
        // An expiry too: the next grant takes over an expired grant.
        let gone = l.acquire(&key, Duration::from_millis(200)).auto_renew(false).await.unwrap();
        issued.push(gone.fence().get());
        drop(gone.detach());
        let next =
            l.acquire(&key, Duration::from_secs(30)).wait(Wait::For(Duration::from_secs(10)));
        let next = next.await.unwrap();
        issued.push(next.fence().get());
        assert!(next.release().await.unwrap().is_clean());
    };
    let l = Locker::connect(&server.url("")).await.unwrap();
    grant(&l, &mut issued).await;
    server.restart(); // kill -9, same store
    let l = Locker::connect(&server.url("")).await.unwrap();
    grant(&l, &mut issued).await;
    server.restart_empty(); // the store is gone: buckets, chains, sequences
    let l = Locker::connect(&server.url("")).await.unwrap();
    grant(&l, &mut issued).await;
    // The same with memory storage, which a restart always empties.
    let mem = server.url("/mem?storage=memory");
    let l = Locker::connect(&mem).await.unwrap();
    grant(&l, &mut issued).await;
    server.restart();
    let l = Locker::connect(&mem).await.unwrap();
    grant(&l, &mut issued).await;
    assert!(issued.windows(2).all(|w| w[1] > w[0]), "a fence went back: {issued:?}");
    assert!(*issued.last().unwrap() < leasehold::store::MAX_FENCE);
}

/// Leases of different TTLs on one key exclude each other (one grants' bucket for every TTL;
/// only the heartbeats live in per-TTL buckets), and each expires at its own TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_of_different_ttls_share_one_key() {
    let fx = nats_fixture().await;
    let other = leasehold_testkit::conformance::other(&fx.locker);
    let key = unique_key("nats-ttls");
    let short =
        fx.locker.acquire(&key, Duration::from_millis(300)).auto_renew(false).await.unwrap();
    let r = other.acquire(&key, Duration::from_secs(60)).await;
    assert!(matches!(r, Err(Error::Busy { .. })), "a 60 s lease beside a 300 ms one: {r:?}");
    let fence = short.fence();
    drop(short.detach());
    let long = other
        .acquire(&key, Duration::from_secs(60))
        .wait(Wait::For(Duration::from_secs(10)))
        .await
        .expect("granted once the 300 ms lease expired");
    assert!(long.fence() > fence);
    let r = fx.locker.acquire(&key, Duration::from_millis(300)).await;
    assert!(matches!(r, Err(Error::Busy { .. })), "a 300 ms lease beside a 60 s one: {r:?}");
    assert!(long.release().await.unwrap().is_clean());
}

/// A frozen server: requests answer within the op timeout as unknown or unavailable, never
/// hang; the holder's lease is lost by its local deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_server_is_answered_within_the_bounds() {
    let server = NatsServer::start();
    let l =
        Locker::connect(&server.url("")).await.unwrap().with_op_timeout(Duration::from_millis(500));
    let key = unique_key("nats-frozen");
    let a = l.acquire(&key, Duration::from_secs(2)).await.unwrap();
    server.stop();
    let t0 = std::time::Instant::now();
    let r = l.acquire(&unique_key("nats-frozen-2"), Duration::from_secs(2)).await;
    assert!(r.as_ref().is_err_and(|e| e.is_unavailable()), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(3), "answered after {:?}", t0.elapsed());
    let lost = tokio::time::timeout(Duration::from_secs(5), a.lost()).await;
    server.cont();
    assert!(lost.is_ok(), "lost() did not fire by the local deadline");
}

#[tokio::test]
async fn url_options_are_checked() {
    for bad in [
        "nats://",
        "nats://127.0.0.1",
        "nats://127.0.0.1:1?replicas=0",
        "nats://127.0.0.1:1?storage=disk",
        "nats://127.0.0.1:1?x=1",
        "nats://127.0.0.1:1/a.b",
    ] {
        let r = Locker::connect(bad).await;
        assert!(matches!(r, Err(Error::InvalidInput(_))), "{bad}: {r:?}");
    }
    let closed = format!("nats://127.0.0.1:{}", leasehold_testkit::spawn::free_port());
    let e = Locker::connect(&closed).await.expect_err("nothing listens");
    assert!(e.is_unavailable() && !e.is_config(), "{e:?}");
}

/// On a 3-node JetStream cluster with 3 replicas, killing a node while a grant is held (the
/// stream's leader or not) admits no second holder: the holder renews through it, a rival is
/// refused, and the next grant's fence is larger. The TTL is above JetStream's Raft election
/// time (NATS 2.9 elects within 4 to 9 s): with a shorter one a leader's loss ends the
/// holder's lease by its local deadline (safe, and not what this test is about).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_lost_from_a_3_node_cluster_keeps_the_grant() {
    let mut cluster = tokio::task::spawn_blocking(|| NatsCluster::start(3)).await.unwrap();
    let url = cluster.url("?replicas=3");
    // The JetStream meta leader is elected a moment after the servers answer.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let l = loop {
        match Locker::connect(&url).await {
            Ok(l) => break l,
            Err(e) if std::time::Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => panic!("no JetStream cluster at {url}: {e}"),
        }
    };
    // doctor sees the stream's Raft group: three replicas, a leader and its two peers.
    let p = leasehold::probe::probe(&url.parse().expect("a nats:// URL")).await.unwrap();
    assert_eq!(p.setting("replicas"), Some("3"), "{p:?}");
    assert!(p.setting("leader").is_some_and(|l| l.starts_with('n')), "{p:?}");
    let peers = p.settings.iter().filter(|s| s.setting.starts_with("peer ")).count();
    assert_eq!(peers, 2, "{p:?}");
    let rival = leasehold_testkit::conformance::other(&l);
    let key = unique_key("nats-cluster");
    let ttl = Duration::from_secs(20);
    let a = l.acquire(&key, ttl).await.unwrap();
    for node in 0..3 {
        cluster.kill9(node);
        // Past a renewal and an election: the holder renews through the loss, the rival never
        // gets in.
        let r = rival.acquire(&key, ttl).wait(Wait::For(Duration::from_secs(12)));
        let r = r.await;
        assert!(
            // Busy, or no answer while the cluster elects (unavailable, unknown): never a grant.
            r.as_ref().is_err_and(|e| e.is_busy() || e.is_unavailable()),
            "node {node} lost: {r:?}"
        );
        if a.is_lost() {
            panic!("the holder lost its grant to node {node}'s loss: {}", a.lost().await);
        }
        cluster.restart(node);
    }
    // The restarted node rejoins and its streams elect leaders again. Until they have, the
    // holder cannot renew; under load that can outlast its lease, and then (only then) the
    // rival may be granted.
    let fence = a.fence();
    let settle = std::time::Instant::now() + Duration::from_secs(60);
    let second = loop {
        match rival.acquire(&key, ttl).await {
            Err(Error::Busy { .. }) => break None,
            Ok(second) => {
                assert!(a.is_lost(), "a second holder while the first holds: {second:?}");
                break Some(second);
            }
            Err(e) if e.is_unavailable() && std::time::Instant::now() < settle => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => panic!("the cluster did not settle: {e}"),
        }
    };
    let b = match second {
        Some(b) => b,
        None => {
            // Renewals that went unanswered through the elections can outlast the holder's
            // own deadline while the store still keeps the grant (its expiry is the bucket's
            // `max_age`, at or after the TTL): the holder then knows it is lost and its
            // release says the section may have overlapped. Either way the rival gets the key
            // once the store lets go of it, within the TTL.
            let lost = a.is_lost();
            let released = a.release().await.unwrap();
            assert!(released.is_clean() || lost, "{released:?} from a holder that was not lost");
            rival
                .acquire(&key, ttl)
                .wait(Wait::For(ttl + Duration::from_secs(15)))
                .await
                .expect("the rival after the release")
        }
    };
    assert!(b.fence() > fence);
    assert!(b.release().await.unwrap().is_clean());
}

/// A lease length whose heartbeat bucket cannot be made (on a cluster: a 3-replica stream
/// that cannot be placed while a node is down; here, deterministically, a 3-replica stream
/// on a server that is not clustered, which JetStream refuses) is granted on the smallest
/// existing longer bucket: it renews there past its TTL, excludes a rival and releases
/// cleanly. Before the fallback every attempt was refused as unavailable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_ttl_whose_bucket_cannot_be_made_uses_a_longer_one() {
    let server = NatsServer::start();
    let key = unique_key("nats-new-ttl");
    // The grants' bucket and a 30 s heartbeat bucket exist (one replica).
    let one = Locker::connect(&server.url("/fallback")).await.unwrap();
    let first = one.acquire(&key, Duration::from_secs(30)).await.unwrap();
    let fence = first.fence();
    assert!(first.release().await.unwrap().is_clean());
    // A store asking 3 replicas: it opens the existing buckets, cannot make new ones.
    let l = Locker::connect(&server.url("/fallback?replicas=3")).await.unwrap();
    let ttl = Duration::from_secs(2);
    let a = l.acquire(&key, ttl).await.expect("a new TTL on the 30 s bucket");
    assert!(a.fence() > fence);
    let rival = leasehold_testkit::conformance::other(&one);
    let r = rival.acquire(&key, ttl).await;
    assert!(r.as_ref().is_err_and(|e| e.is_busy()), "a rival beside the holder: {r:?}");
    // Past its TTL: renewed on the longer bucket.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!a.is_lost(), "the lease was not renewed on the longer bucket");
    let r = rival.acquire(&key, ttl).await;
    assert!(r.as_ref().is_err_and(|e| e.is_busy()), "a rival after 3 s: {r:?}");
    let held = a.fence();
    assert!(a.release().await.unwrap().is_clean());
    let b = rival.acquire(&key, ttl).wait(Wait::For(Duration::from_secs(10))).await.unwrap();
    assert!(b.fence() > held);
    assert!(b.release().await.unwrap().is_clean());
    // With no bucket at least as long (above the ladder's top rung, 1 h), the refusal stands.
    let r = l.acquire(&unique_key("nats-new-ttl-long"), Duration::from_secs(7_200)).await;
    assert!(r.as_ref().is_err_and(|e| e.is_unavailable()), "no longer bucket: {r:?}");
}

/// The rungs of the ladder of heartbeat buckets a store makes beside its open (1 s to 1 h).
const RUNGS: [&str; 5] = ["1000ms", "10000ms", "60000ms", "600000ms", "3600000ms"];

/// Whether JetStream stream `stream` exists on `server`.
fn stream_exists(server: &NatsServer, stream: &str) -> bool {
    let info = server.js_api(&format!("$JS.API.STREAM.INFO.{stream}"), "");
    info.is_some_and(|a| a.contains("\"config\"") && !a.contains("\"error\""))
}

/// How many messages stream `stream` holds (`state.messages`), if it answers.
fn stream_messages(server: &NatsServer, stream: &str) -> Option<u64> {
    let info = server.js_api(&format!("$JS.API.STREAM.INFO.{stream}"), "")?;
    let state = &info[info.find("\"state\":")?..];
    let from = state.find("\"messages\":")? + "\"messages\":".len();
    let digits: String = state[from..].chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

/// Waits (bounded) until every rung of `bucket` exists on `server`.
async fn rungs_made(server: &NatsServer, bucket: &str) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if RUNGS.iter().all(|r| stream_exists(server, &format!("KV_{bucket}-ttl-{r}"))) {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue 34's limit, removed up to the ladder's top: a TTL never used before, asked while its
/// bucket cannot be made (here, deterministically, a 3-replica stream on a server that is not
/// clustered; on a cluster, a node down), is granted on the next rung of the ladder the store
/// made when it opened. The rungs are made by a store opened while buckets can be made (one
/// replica here, standing for a whole cluster), as a deployment's first open makes them before
/// a node fails. Without the ladder no bucket is at least 3 s long and the grant is refused as
/// unavailable. Above the top rung (1 h) the refusal stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_ttl_is_granted_on_a_rung_while_its_bucket_cannot_be_made() {
    let server = NatsServer::start();
    let one = Locker::connect(&server.url("/ladder")).await.unwrap();
    assert!(rungs_made(&server, "ladder").await, "the store's open did not make the rungs");
    let l = Locker::connect(&server.url("/ladder?replicas=3")).await.unwrap();
    let key = unique_key("nats-ladder");
    let ttl = Duration::from_secs(3);
    let a = l.acquire(&key, ttl).await.expect("a new TTL granted on the 10 s rung");
    // The heartbeat is in the 10 s rung, and the grant names it: the server keeps the lease
    // up to 10 s after each heartbeat (renewed every second or so).
    assert!(!stream_exists(&server, "KV_ladder-ttl-3000ms"), "the 3 s bucket was made");
    assert_eq!(stream_messages(&server, "KV_ladder-ttl-10000ms"), Some(1), "no heartbeat there");
    let h = one.holders(Some(&key)).await.unwrap();
    let left = h.first().and_then(|h| h.expires_in);
    assert!(left.is_some_and(|left| left > ttl), "not judged by the 10 s rung: {h:?}");
    let rival = leasehold_testkit::conformance::other(&one);
    let r = rival.acquire(&key, ttl).await;
    assert!(r.as_ref().is_err_and(|e| e.is_busy()), "a rival beside the holder: {r:?}");
    let held = a.fence();
    assert!(a.release().await.unwrap().is_clean());
    let b = rival.acquire(&key, ttl).wait(Wait::For(Duration::from_secs(10))).await.unwrap();
    assert!(b.fence() > held);
    assert!(b.release().await.unwrap().is_clean());
    let r = l.acquire(&unique_key("nats-ladder-long"), Duration::from_secs(7_200)).await;
    assert!(r.as_ref().is_err_and(|e| e.is_unavailable()), "above the top rung: {r:?}");
}

/// A rung that cannot be made neither fails nor holds up the store's open: on a grants'
/// bucket that exists (made here beside the store, one replica), a store asking 3 replicas of
/// a server that is not clustered opens and serves reads while every rung's creation is
/// refused; no rung exists after, and a new TTL is refused as before the ladder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_neither_fails_nor_waits_when_rungs_cannot_be_made() {
    let server = NatsServer::start();
    let grants = r#"{"name":"KV_noladder","subjects":["$KV.noladder.>"],"max_msgs_per_subject":1,
        "storage":"file","num_replicas":1,"allow_rollup_hdrs":true,"deny_delete":true,
        "allow_direct":true,"discard":"new","duplicate_window":120000000000}"#;
    let made = server.js_api("$JS.API.STREAM.CREATE.KV_noladder", grants);
    assert!(made.as_ref().is_some_and(|a| !a.contains("\"error\"")), "{made:?}");
    let opening = std::time::Instant::now();
    let l = Locker::connect(&server.url("/noladder?replicas=3")).await.expect("open");
    // Reported, not asserted (no timing assertions): the open's cost beside the rungs'.
    eprintln!("open took {:?} with every rung refused", opening.elapsed());
    assert!(l.holders(None).await.unwrap().is_empty());
    let r = l.acquire(&unique_key("nats-noladder"), Duration::from_secs(3)).await;
    assert!(r.as_ref().is_err_and(|e| e.is_unavailable()), "no rung, no bucket: {r:?}");
    for rung in RUNGS {
        let stream = format!("KV_noladder-ttl-{rung}");
        assert!(!stream_exists(&server, &stream), "{stream} was made with 3 replicas");
    }
}

/// `doctor`'s probe reads the grants' bucket: replicas and storage, with the verdicts they
/// call for (one replica, memory storage), each peer of a cluster's stream, and the rungs of
/// the heartbeat ladder (made by the probe's open when missing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_reads_replicas_storage_and_peers() {
    let server = NatsServer::start();
    let url = server.url("/probed?storage=memory");
    let p = leasehold::probe::probe(&url.parse().expect("a nats:// URL")).await.unwrap();
    assert_eq!(p.setting("replicas"), Some("1"), "{p:?}");
    assert_eq!(p.setting("storage"), Some("memory"), "{p:?}");
    assert!(p.setting("server").is_some_and(|s| s.contains("2.")), "{p:?}");
    assert!(p.verdicts.iter().any(|v| v.contains("memory storage")), "{p:?}");
    assert!(p.verdicts.iter().any(|v| v.contains("single point of failure")), "{p:?}");
    assert_eq!(p.setting("heartbeat ladder"), Some("5 of 5 rungs"), "{p:?}");
}
