//! The conformance suite and the process-level scenarios on private Redis servers.

use std::time::Duration;

use leasehold::fence::redis::RedisFence;
use leasehold::{Error, Locker, Wait};
use leasehold_testkit::stores::redis::server::RedisServer;
use leasehold_testkit::{conformance_suite, primitives_suite, redis_fixture};

conformance_suite!(redis_fixture());
primitives_suite!(redis_fixture());

leasehold_testkit::process_suite! {
    mutex { multi_process_mutual_exclusion: redis_fixture() }
    permits { multi_process_permits: redis_fixture() }
    stalled redis_fixture(), resource |_| {
        let resource = RedisServer::start();
        let url = resource.url();
        (resource, url)
    };
}

/// The keys as an operator sees them with redis-cli: owner token and PTTL on the lease key,
/// the fence on its counter; a stale release leaves the successor's key in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_layout_is_inspectable() {
    let server = RedisServer::start();
    let l = Locker::connect(&format!("{}?prefix=app:", server.url())).await.unwrap();
    let a = l.acquire("job", Duration::from_secs(30)).await.unwrap();
    assert_eq!(server.cli(&["GET", "app:{job}"]), a.owner().to_string());
    let pttl: u64 = server.cli(&["PTTL", "app:{job}"]).parse().unwrap();
    assert!(pttl > 20_000 && pttl <= 30_000, "{pttl}");
    assert_eq!(server.cli(&["GET", "app:{job}:fence"]), a.fence().to_string());
    // The counter outlives the grant by the horizon (default a day), then expires.
    let ttl: u64 = server.cli(&["TTL", "app:{job}:fence"]).parse().unwrap();
    assert!(
        ttl > 24 * 3600 && ttl <= 24 * 3600 + 30,
        "the fence counter lives ttl + horizon: {ttl}"
    );
    let stale = a.owner();
    assert!(a.release().await.unwrap().is_clean());
    let b = l.acquire("job", Duration::from_secs(30)).await.unwrap();
    assert!(!l.release_by_owner("job", &stale).await.unwrap());
    assert_eq!(server.cli(&["GET", "app:{job}"]), b.owner().to_string());
    assert!(b.release().await.unwrap().is_clean());
}

/// A semaphore's slot as an operator sees it: `PREFIX{SEM}#I` (with `:fence` and `:holder`
/// after it) in the semaphore's hash tag, and the permit record `PREFIX{SEM}:permits`; a
/// reader's marker and hash under the key's lease name. A plain lock on `SEM#I` is that slot
/// (the same key), and a plain key with `#` that is no slot's keeps the plain form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_and_reader_key_layout() {
    let server = RedisServer::start();
    let l = Locker::connect(&format!("{}?prefix=app:", server.url())).await.unwrap();
    let p = l.acquire_permit("pool", 3, Duration::from_secs(30)).await.unwrap();
    let lease = format!("app:{{pool}}#{}", p.slot());
    assert_eq!(server.cli(&["GET", &lease]), p.owner().to_string());
    assert_eq!(server.cli(&["GET", &format!("{lease}:fence")]), p.fence().to_string());
    assert!(!server.cli(&["GET", &format!("{lease}:holder")]).is_empty());
    let n = server.cli(&["HGET", "app:{pool}:permits", &format!("{lease}|{}", p.owner())]);
    assert_eq!(n, "3");
    let slot_key = p.key().as_str().to_owned();
    let plain =
        leasehold_testkit::conformance::other(&l).acquire(&slot_key, Duration::from_secs(30));
    let plain = plain.await;
    assert!(matches!(plain, Err(Error::Busy { .. })), "{slot_key} is the slot: {plain:?}");
    let h = l.holders(Some(&slot_key)).await.unwrap();
    assert_eq!((h.len(), h[0].fence), (1, Some(p.fence())), "{h:?}");
    assert!(p.release().await.unwrap().is_clean());
    assert_eq!(server.cli(&["EXISTS", &lease]), "0");

    let odd = l.acquire("job#x", Duration::from_secs(30)).await.unwrap();
    assert_eq!(server.cli(&["GET", "app:{job#x}"]), odd.owner().to_string());
    let r = l.acquire_shared("doc", Duration::from_secs(30)).await.unwrap();
    assert_eq!(server.cli(&["GET", "app:{doc}"]), "readers");
    let entry = server.cli(&["HGET", "app:{doc}:readers", &r.owner().to_string()]);
    assert_eq!(entry.split(' ').nth(1), Some(r.fence().to_string().as_str()), "{entry}");
    let all = l.holders(None).await.unwrap();
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(r.release().await.unwrap().is_clean());
    assert!(odd.release().await.unwrap().is_clean());
}

/// Fenced scripts: claims are owner- and key-bound, effects run only for the current claim,
/// and fences compare as exact decimals (no float rounding above 2^53).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_scripts() {
    use leasehold::fence::Fencing;
    use leasehold::{FenceToken, Key, OwnerToken};
    let server = RedisServer::start();
    let mut res = RedisFence::connect(&server.url()).await.unwrap();
    let f =
        |k: &str, t: u64, o: OwnerToken| Fencing::new(Key::new(k).unwrap(), FenceToken::new(t), o);
    let (a, b) = (OwnerToken::generate().unwrap(), OwnerToken::generate().unwrap());
    let stale = |r: leasehold::Result<()>| matches!(r, Err(Error::StaleFence { .. }));
    let big = (1u64 << 53) + 1;
    assert!(stale(res.set("r", &f("k", 5, a), "{r}:v", "x").await), "unclaimed");
    res.claim("r", &f("k", big, a)).await.unwrap();
    res.claim("r", &f("k", big, a)).await.unwrap();
    assert!(stale(res.claim("r", &f("k", big, b)).await), "same token, other owner");
    assert!(stale(res.claim("r", &f("k", big - 1, b)).await), "one less than 2^53+1");
    assert!(stale(res.claim("r", &f("other", big + 1, b)).await), "another key's token");
    assert!(stale(res.claim("r", &f("k", 0, b)).await), "no fence");
    res.set("r", &f("k", big, a), "{r}:v", "from-a").await.unwrap();
    assert_eq!(res.incr_by("r", &f("k", big, a), "{r}:n", 3).await.unwrap(), 3);
    res.hset("r", &f("k", big, a), "{r}:h", "field", "1").await.unwrap();
    res.claim("r", &f("k", big + 1, b)).await.unwrap();
    let r = res.set("r", &f("k", big, a), "{r}:v", "stale").await;
    match r {
        Err(Error::StaleFence { installed, .. }) => {
            assert_eq!(installed, Some(leasehold::FenceToken::new(big + 1)), "{installed:?}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.cli(&["GET", "{r}:v"]), "from-a");
}

/// Failover honesty: a replica that missed the grant is promoted, and a second holder is
/// admitted. Its fence is still larger than the first holder's (the grant script issues
/// `max(counter + 1, server µs)`), so the resource takes the successor and refuses the stale
/// holder, instead of keeping whichever claimed a repeated number first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_admits_a_second_holder_whose_fence_is_larger() {
    let mut primary = RedisServer::start();
    let replica = RedisServer::start();
    replica.replicate(&primary);
    let resource = RedisServer::start();
    let mut res = RedisFence::connect(&resource.url()).await.unwrap();

    let on_primary = Locker::connect(&primary.url()).await.unwrap();
    // Earlier grants replicate, so the replica's fence counter is not empty.
    let warm = on_primary.acquire("acct", Duration::from_secs(30)).await.unwrap();
    let warm_fence = warm.fence().to_string();
    let mut last = warm.fence();
    assert!(warm.release().await.unwrap().is_clean());
    let start = std::time::Instant::now();
    while replica.cli(&["GET", "leasehold:{acct}:fence"]) != warm_fence {
        assert!(start.elapsed() < Duration::from_secs(20), "replication never caught up");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // The replication link is down (a partition between primary and replica: here the
    // replica points at an address where nothing listens), so the replica misses the next
    // grants; then the primary dies and the replica is promoted.
    replica.detach();
    for _ in 0..3 {
        let l = on_primary.acquire("acct", Duration::from_secs(30)).await.unwrap();
        assert!(l.fence() > last);
        last = l.fence();
        assert!(l.release().await.unwrap().is_clean());
    }
    let first = on_primary.acquire("acct", Duration::from_secs(30)).await.unwrap();
    res.claim("acct", &first.fencing()).await.unwrap();
    res.set("acct", &first.fencing(), "{acct}:balance", "100").await.unwrap();
    primary.kill9();
    replica.promote();
    assert_eq!(replica.cli(&["GET", "leasehold:{acct}:fence"]), warm_fence, "the lag is real");

    let on_replica = Locker::connect(&replica.url()).await.unwrap();
    let second = on_replica
        .acquire("acct", Duration::from_secs(30))
        .wait(Wait::For(Duration::from_secs(10)))
        .await
        .expect("the promoted replica never saw the first grant: a second holder is admitted");
    assert!(!first.is_lost(), "the first holder has no way to know yet");
    assert!(
        second.fence() > first.fence(),
        "the promoted replica's counter was behind, yet its fence {} must exceed {}",
        second.fence(),
        first.fence()
    );

    // Two holders: the resource takes the successor and refuses the stale one.
    res.claim("acct", &second.fencing()).await.expect("the successor's claim");
    res.set("acct", &second.fencing(), "{acct}:balance", "0").await.expect("successor write");
    let stale = res.set("acct", &first.fencing(), "{acct}:balance", "90").await;
    assert!(matches!(stale, Err(Error::StaleFence { .. })), "{stale:?}");
    assert_eq!(resource.cli(&["GET", "{acct}:balance"]), "0");
    drop(first.detach());
    assert!(second.release().await.unwrap().is_clean());
}

/// A restart without persistence forgets every fence counter; the next grant still issues a
/// fence above every fence issued before. Counters left by an older version (small numbers)
/// are below the new ones, so an upgrade needs no migration. Fences stay below 2^53.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_never_go_back_across_a_restart_or_an_upgrade() {
    let mut server = RedisServer::start();
    let l = Locker::connect(&server.url()).await.unwrap();
    let mut issued = Vec::new();
    for _ in 0..5 {
        let lease = l.acquire("job", Duration::from_secs(30)).await.unwrap();
        issued.push(lease.fence());
        assert!(lease.release().await.unwrap().is_clean());
    }
    assert!(issued.windows(2).all(|w| w[1] > w[0]), "{issued:?}");
    server.restart(); // kill -9, and no persistence
    assert_eq!(server.cli(&["EXISTS", "leasehold:{job}:fence"]), "0", "the counter is gone");
    let l = Locker::connect(&server.url()).await.unwrap();
    let after = l.acquire("job", Duration::from_secs(30)).await.unwrap();
    assert!(after.fence() > *issued.last().unwrap(), "{} after {issued:?}", after.fence());
    assert!(after.fence().get() < leasehold::store::MAX_FENCE);
    assert!(after.release().await.unwrap().is_clean());

    // An older version's counter.
    server.cli(&["SET", "leasehold:{old}:fence", "41"]);
    let a = l.acquire("old", Duration::from_secs(30)).await.unwrap();
    let a_fence = a.fence();
    assert!(a_fence.get() > 41);
    assert!(a.release().await.unwrap().is_clean());
    let b = l.acquire("old", Duration::from_secs(30)).await.unwrap();
    assert!(b.fence() > a_fence);
    assert!(b.release().await.unwrap().is_clean());
    // A counter ahead of the clock (more than a million grants a second) keeps counting.
    let ahead = (leasehold::store::MAX_FENCE - 10).to_string();
    server.cli(&["SET", "leasehold:{fast}:fence", &ahead]);
    let c = l.acquire("fast", Duration::from_secs(30)).await.unwrap();
    assert_eq!(c.fence().get(), leasehold::store::MAX_FENCE - 9);
    assert!(c.release().await.unwrap().is_clean());
}

/// `wait_replicas`: with a live replica grants go through; with none, acquire fails closed
/// and leaves nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_replicas_fails_closed() {
    let primary = RedisServer::start();
    // A generous WAIT timeout: under a full test run on two cores a live replica's ack can
    // take longer than 300 ms; the refusal without a replica does not depend on it.
    let l = Locker::connect(&format!("{}?wait_replicas=1&wait_timeout=2000ms", primary.url()))
        .await
        .unwrap();
    let r = l.acquire("k", Duration::from_secs(30)).await;
    assert!(matches!(r, Err(Error::Unavailable { .. })), "{r:?}");
    assert_eq!(
        primary.cli(&["EXISTS", "leasehold:{k}"]),
        "0",
        "the unacknowledged grant was released"
    );
    let replica = RedisServer::start();
    replica.replicate(&primary);
    let lease = l.acquire("k", Duration::from_secs(30)).await.expect("acknowledged by the replica");
    assert!(lease.release().await.unwrap().is_clean());
}

/// An acquire (`docs/design.md` §3) whose answer does not come back is reported as unknown, and the
/// owner-conditional cleanup removes the grant once the server answers again, long before
/// its TTL: no orphan blocks others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_acquire_is_cleaned_up() {
    let server = RedisServer::start();
    let l =
        Locker::connect(&server.url()).await.unwrap().with_op_timeout(Duration::from_millis(300));
    server.stop();
    let r = l.acquire("job", Duration::from_secs(120)).await;
    assert!(matches!(r, Err(Error::UnknownOutcome(_))), "{r:?}");
    server.cont();
    // The frozen server still executes the queued grant when it resumes; the cleanup then
    // deletes it (owner-checked).
    let other = Locker::connect(&server.url()).await.unwrap();
    let lease = other
        .acquire("job", Duration::from_secs(30))
        .wait(Wait::For(Duration::from_secs(20)))
        .await
        .expect("the orphan was cleaned up well before its 120 s TTL");
    assert!(lease.release().await.unwrap().is_clean());
}

/// A connection reset while a lease is held (a proxy, a server-side `CLIENT KILL`, an idle
/// timeout): the first request after it finds the connection broken. The owner-checked renew
/// and release are retried once on the reconnected connection instead of reporting an unknown
/// outcome and leaving the grant to its TTL (`leasehold chaos --scenario unknown-acquire`
/// found the release case).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renew_and_release_survive_a_connection_reset() {
    use leasehold_testkit::proxy::{Fault, FaultProxy};
    let server = RedisServer::start();
    let proxy =
        FaultProxy::start(format!("127.0.0.1:{}", server.port()).parse().unwrap()).await.unwrap();
    let locker = Locker::connect(&format!("redis://{}", proxy.addr())).await.unwrap();
    let lease = locker.acquire("k", Duration::from_secs(30)).await.unwrap();
    for _ in 0..2 {
        proxy.set(Fault::Reset);
        tokio::time::sleep(Duration::from_millis(200)).await;
        proxy.set(Fault::Pass);
        lease.renew().await.expect("a renewal after a reset");
    }
    proxy.set(Fault::Reset);
    tokio::time::sleep(Duration::from_millis(200)).await;
    proxy.set(Fault::Pass);
    assert!(lease.release().await.expect("a release after a reset").is_clean());
    assert_eq!(server.cli(&["EXISTS", "leasehold:k"]), "0");
}

/// A release whose reply is lost and whose connection then breaks is retried on a fresh
/// connection; the retry finds the first attempt's tombstone and reports the release clean
/// (not an unknown outcome, not a possible overlap). A stale release of a key someone else
/// now holds is still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_retried_after_a_lost_reply_is_clean() {
    use leasehold_testkit::proxy::{Fault, FaultProxy};
    let server = RedisServer::start();
    let proxy =
        FaultProxy::start(format!("127.0.0.1:{}", server.port()).parse().unwrap()).await.unwrap();
    let locker = Locker::connect(&format!("redis://{}", proxy.addr())).await.unwrap();
    let lease = locker.acquire("k", Duration::from_secs(30)).auto_renew(false).await.unwrap();
    let owner = lease.owner();
    proxy.set(Fault::DropReplies);
    let release = tokio::spawn(async move { lease.release().await });
    let start = std::time::Instant::now();
    while server.cli(&["EXISTS", "leasehold:{k}"]) != "0" {
        assert!(start.elapsed() < Duration::from_secs(10), "the release never reached the server");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Its reply is gone; break the connection so the client retries on a new one.
    proxy.set(Fault::Pass);
    server.cli(&["CLIENT", "KILL", "TYPE", "normal"]);
    let r = tokio::time::timeout(Duration::from_secs(10), release).await.unwrap().unwrap();
    assert!(r.expect("the retried release answers").is_clean());
    assert_eq!(server.cli(&["GET", "leasehold:{k}:released-by"]), owner.to_string());
    let pttl: i64 = server.cli(&["PTTL", "leasehold:{k}:released-by"]).parse().unwrap();
    assert!(pttl > 0 && pttl <= 5000, "the tombstone lives the op timeout: {pttl}");
    let b = locker.acquire("k", Duration::from_secs(30)).await.unwrap();
    assert!(!locker.release_by_owner("k", &owner).await.unwrap(), "b holds it now");
    assert!(b.release().await.unwrap().is_clean());
    assert!(!locker.release_by_owner("k", &owner).await.unwrap(), "b's tombstone, not a's");
}

/// Returning from `main` with a lease held frees the key at once, also when the release
/// round trip is slow (100 ms each way through a proxy): the runtime's shutdown would
/// otherwise cancel it mid-flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_with_lease_releases() {
    use leasehold_testkit::proxy::{Fault, FaultProxy};
    let server = RedisServer::start();
    let proxy =
        FaultProxy::start(format!("127.0.0.1:{}", server.port()).parse().unwrap()).await.unwrap();
    proxy.set(Fault::Latency(Duration::from_millis(100)));
    let locker = Locker::connect(&server.url()).await.unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_lh-exit"));
    let url = format!("redis://{}", proxy.addr());
    leasehold_testkit::process::exit_with_lease_releases(&locker, &url, bin).await;
}

/// With Redis frozen (a proxy that swallows everything): `admit()` turns false as soon as a
/// renewal is overdue, before the lease is lost; once it is lost, `release` and `renew`
/// answer at once instead of waiting out the op timeout on the dead link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_store_fails_fast_once_lost() {
    use leasehold::LostReason;
    use leasehold_testkit::proxy::{Fault, FaultProxy};
    use std::time::Instant;
    let server = RedisServer::start();
    let proxy =
        FaultProxy::start(format!("127.0.0.1:{}", server.port()).parse().unwrap()).await.unwrap();
    let locker = Locker::connect(&format!("redis://{}", proxy.addr())).await.unwrap();
    let ttl = Duration::from_secs(3);
    let lease = locker.acquire("frozen", ttl).margin(Duration::from_millis(300)).await.unwrap();
    proxy.set(Fault::Blackhole);
    let frozen = Instant::now();
    while lease.admit() {
        assert!(frozen.elapsed() < ttl, "admit() stayed true for a whole ttl");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(!lease.is_lost(), "admit() must turn false on the overdue renewal, before the loss");
    let reason = tokio::time::timeout(ttl, lease.lost()).await.expect("lost within the ttl");
    assert_eq!(reason, LostReason::DeadlinePassed);
    let t = Instant::now();
    assert!(matches!(lease.renew().await, Err(Error::Lost { .. })));
    let released = lease.release().await;
    assert!(matches!(released, Ok(leasehold::Released::MayHaveOverlapped)), "{released:?}");
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "renew and release after the loss took {:?} (the op timeout is 5 s)",
        t.elapsed()
    );
    proxy.set(Fault::Reset); // the background release fails at once; the test ends
}

/// A release that gets no answer is an unknown outcome, unless the lease was lost while it
/// waited (a holder thawed past its lease): then the answer is known, "may have overlapped".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_unanswered_past_the_deadline_says_may_have_overlapped() {
    use leasehold_testkit::proxy::{Fault, FaultProxy};
    let server = RedisServer::start();
    let proxy =
        FaultProxy::start(format!("127.0.0.1:{}", server.port()).parse().unwrap()).await.unwrap();
    let l = Locker::connect(&format!("redis://{}", proxy.addr()))
        .await
        .unwrap()
        .with_op_timeout(Duration::from_secs(1));
    let long = l.acquire("long", Duration::from_secs(30)).await.unwrap();
    let short = l
        .acquire("short", Duration::from_millis(1200))
        .margin(Duration::from_millis(300))
        .await
        .unwrap();
    assert!(short.admit());
    proxy.set(Fault::Blackhole);
    // The short lease's deadline (about 0.9 s) passes while its release waits out the 1 s
    // op timeout; the long one's does not.
    let r = short.release().await;
    assert!(matches!(r, Ok(leasehold::Released::MayHaveOverlapped)), "{r:?}");
    let r = long.release().await;
    assert!(matches!(r, Err(Error::UnknownOutcome(_))), "{r:?}");
    proxy.set(Fault::Reset);
}

/// Fail open only on an outage: a missing or wrong password, a database index the server lacks
/// and an ACL user without the permissions the store needs are configuration errors (never
/// retried, never "unavailable"), while a closed port is an outage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_configuration_is_config_and_a_closed_port_is_unavailable() {
    let server = RedisServer::start_with(&["--requirepass", "sekret"]);
    let p = server.port();
    for url in [
        format!("redis://127.0.0.1:{p}"),
        format!("redis://:wrong@127.0.0.1:{p}"),
        format!("redis://:sekret@127.0.0.1:{p}/99"),
    ] {
        let e = Locker::connect(&url).await.expect_err(&url);
        assert!(e.is_config() && !e.is_unavailable() && !e.is_retryable(), "{url}: {e:?}");
        assert!(!e.to_string().contains("sekret"), "a password in an error: {e}");
    }
    // An ACL user that may not touch the store's keys: refused at the first request.
    server.cli(&["-a", "sekret", "ACL", "SETUSER", "app", "on", ">pw", "~other:*", "+@all"]);
    let l = Locker::connect(&format!("redis://app:pw@127.0.0.1:{p}")).await.unwrap();
    let e = l.acquire("k", Duration::from_secs(30)).await.expect_err("NOPERM");
    assert!(e.is_config() && !e.is_unavailable(), "{e:?}");
    let ok = Locker::connect(&format!("redis://:sekret@127.0.0.1:{p}")).await.unwrap();
    assert!(
        ok.acquire("k", Duration::from_secs(30)).await.unwrap().release().await.unwrap().is_clean()
    );

    let closed = format!("redis://127.0.0.1:{}", leasehold_testkit::spawn::free_port());
    let e = Locker::connect(&closed).await.expect_err("nothing listens");
    assert!(e.is_unavailable() && !e.is_config(), "{e:?}");
}

/// Every call has a bound behind a frozen peer (a proxy that swallows everything): connecting
/// answers at the connect limit, and a connected locker's acquire and `holders` at the op
/// timeout, each within a small slack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_peer_is_answered_within_the_bounds() {
    use leasehold_testkit::proxy::{Fault, FaultProxy};
    use std::time::Instant;
    let server = RedisServer::start();
    let proxy =
        FaultProxy::start(format!("127.0.0.1:{}", server.port()).parse().unwrap()).await.unwrap();
    let url = format!("redis://{}", proxy.addr());
    let l = Locker::connect(&url).await.unwrap().with_op_timeout(Duration::from_secs(1));
    proxy.set(Fault::Blackhole);
    let t = Instant::now();
    let e = Locker::connect_within(&url, Duration::from_secs(1)).await.expect_err("frozen");
    assert!(e.is_unavailable(), "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(3), "connect took {:?}", t.elapsed());
    let t = Instant::now();
    let e = l.acquire("k", Duration::from_secs(30)).await.expect_err("frozen");
    assert!(e.is_unavailable(), "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(3), "acquire took {:?}", t.elapsed());
    let t = Instant::now();
    let e = l.holders(None).await.expect_err("frozen");
    assert!(e.is_unavailable(), "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(3), "holders took {:?}", t.elapsed());
    let t = Instant::now();
    let w = l.acquire("k", Duration::from_secs(30)).wait(Wait::For(Duration::from_secs(1))).await;
    assert!(w.is_err(), "{w:?}");
    assert!(t.elapsed() < Duration::from_secs(4), "a waiting acquire took {:?}", t.elapsed());
    proxy.set(Fault::Reset);
}

/// Who holds a key is kept beside the lease, in the same slot, with the lease's expiry:
/// renewed with it and deleted with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_info_lives_and_dies_with_the_lease() {
    let server = RedisServer::start();
    let l = Locker::connect(&server.url()).await.unwrap();
    let a = l.acquire("job", Duration::from_secs(30)).await.unwrap();
    let line = server.cli(&["GET", "leasehold:{job}:holder"]);
    let info = leasehold::HolderInfo::decode(&line).expect("an info line");
    assert_eq!(info.pid, std::process::id());
    let pttl: u64 = server.cli(&["PTTL", "leasehold:{job}:holder"]).parse().unwrap();
    assert!(pttl > 20_000 && pttl <= 30_000, "{pttl}");
    a.renew().await.unwrap();
    assert!(a.release().await.unwrap().is_clean());
    assert_eq!(server.cli(&["EXISTS", "leasehold:{job}:holder"]), "0");
}

/// Auto-renew renews at ttl/3, counted at the store: about 6 renewals in 6 s at ttl 3 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_renew_rate() {
    let fx = redis_fixture().await;
    leasehold_testkit::counted::auto_renew_rate(&fx.locker).await;
}
