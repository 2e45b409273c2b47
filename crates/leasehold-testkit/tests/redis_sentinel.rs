//! The conformance and primitives suites, the process-level scenarios (permits too), and
//! failovers, on a private Sentinel deployment (a primary, a replica, three sentinels) per
//! test.

use std::time::{Duration, Instant};

use leasehold::{Locker, Wait};
use leasehold_testkit::stores::redis::sentinel::SentinelSet;
use leasehold_testkit::stores::redis::server::RedisServer;
use leasehold_testkit::{conformance_suite, primitives_suite, redis_sentinel_fixture};

conformance_suite!(redis_sentinel_fixture());
primitives_suite!(redis_sentinel_fixture());

leasehold_testkit::process_suite! {
    permits { multi_process_permits: redis_sentinel_fixture() }
    stalled redis_sentinel_fixture(), resource |_| {
        let resource = RedisServer::start();
        let url = resource.url();
        (resource, url)
    };
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("launcher")
}

/// `SENTINEL FAILOVER`, then waits (20 s at most) until the sentinels have turned the old
/// primary into a replica (it answers READONLY then).
async fn fail_over_and_demote(set: SentinelSet) -> SentinelSet {
    let set = blocking(move || {
        set.failover().expect("SENTINEL FAILOVER");
        set
    })
    .await;
    let start = Instant::now();
    while !set.primary.cli(&["ROLE"]).starts_with("slave") {
        assert!(start.elapsed() < Duration::from_secs(20), "the old primary was never demoted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    set
}

/// `SENTINEL FAILOVER` during a hold: the held lease's renewal and release reach the new
/// primary (the old one, demoted, answers READONLY), and a new grant through the same URL
/// has a larger fence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_failover_then_a_new_grant_through_the_same_url() {
    let set = blocking(SentinelSet::start).await;
    let url = set.url("");
    let l = Locker::connect(&url).await.unwrap();
    let held = l.acquire("job", Duration::from_secs(30)).auto_renew(false).await.unwrap();
    let first = held.fence();
    // The replica has the grant before the failover (SENTINEL FAILOVER waits for it too).
    set.primary.wait_applied_by(&set.replica);
    let set = fail_over_and_demote(set).await;
    held.renew().await.expect("renewal on the new primary");
    assert_eq!(set.replica.cli(&["GET", "leasehold:{job}"]), held.owner().to_string());
    assert!(held.release().await.unwrap().is_clean(), "release on the new primary");
    let again = Locker::connect(&url).await.unwrap();
    let next = again.acquire("job", Duration::from_secs(30)).await.unwrap();
    let next_fence = next.fence();
    assert!(next_fence > first, "{first} then {next_fence}");
    assert!(next.release().await.unwrap().is_clean());
    // The first locker, too, grants on the new primary.
    let mine = l.acquire("job", Duration::from_secs(30)).await.unwrap();
    assert!(mine.fence() > next_fence);
    assert!(mine.release().await.unwrap().is_clean());
}

/// The primary killed: the sentinels promote the replica, and the same URL grants there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_killed_then_grants_on_the_promoted_replica() {
    let set = blocking(SentinelSet::start).await;
    let url = set.url("");
    let l = Locker::connect(&url).await.unwrap();
    let warm = l.acquire("k", Duration::from_secs(30)).await.unwrap();
    let fence = warm.fence();
    assert!(warm.release().await.unwrap().is_clean());
    set.primary.wait_applied_by(&set.replica);
    let set = blocking(move || {
        let mut set = set;
        set.kill_primary();
        set.wait_promoted(Duration::from_secs(30)).expect("promotion");
        set
    })
    .await;
    let next = l
        .acquire("k", Duration::from_secs(30))
        .wait(Wait::For(Duration::from_secs(10)))
        .await
        .expect("a grant on the promoted replica");
    assert!(next.fence() > fence);
    assert_eq!(set.replica.cli(&["GET", "leasehold:{k}"]), next.owner().to_string());
    assert!(next.release().await.unwrap().is_clean());
}

/// A waiter is woken by the release on the primary; after a failover, a waiter's
/// subscription moves to the new primary and is woken there too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_is_woken_on_release_before_and_after_a_failover() {
    let set = blocking(SentinelSet::start).await;
    let url = set.url("");
    let l = Locker::connect(&url).await.unwrap();
    let other = Locker::connect(&url).await.unwrap();
    for round in 0..2 {
        let held = l.acquire("door", Duration::from_secs(60)).await.unwrap();
        let o = other.clone();
        let waiter = tokio::spawn(async move {
            let b = o
                .acquire("door", Duration::from_secs(30))
                .wait(Wait::For(Duration::from_secs(30)))
                .await;
            (b, Instant::now())
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiter.is_finished());
        let released = Instant::now();
        assert!(held.release().await.unwrap().is_clean());
        let (b, got) =
            tokio::time::timeout(Duration::from_secs(20), waiter).await.unwrap().unwrap();
        let b = b.expect("the waiter gets the key");
        assert!(got - released < Duration::from_secs(5), "round {round}: {:?}", got - released);
        assert!(b.release().await.unwrap().is_clean());
        if round == 0 {
            set.primary.wait_applied_by(&set.replica);
            set.failover().expect("SENTINEL FAILOVER");
        }
    }
    drop(set);
}

/// A permit and two readers held through `SENTINEL FAILOVER`: their renewals and releases
/// reach the new primary (the demoted one answers READONLY and is left), a writer waiting
/// there is granted once the readers are gone, with a larger fence than theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_and_readers_follow_a_failover() {
    let set = blocking(SentinelSet::start).await;
    let url = set.url("");
    let l = Locker::connect(&url).await.unwrap();
    let long = Duration::from_secs(30);
    let p = l.acquire_permit("pool", 2, long).auto_renew(false).await.unwrap();
    let r1 = l.acquire_shared("doc", long).auto_renew(false).await.unwrap();
    let r2 = l.acquire_shared("doc", long).auto_renew(false).await.unwrap();
    set.primary.wait_applied_by(&set.replica);
    let set = fail_over_and_demote(set).await;
    p.renew().await.expect("a permit's renewal on the new primary");
    r1.renew().await.expect("a reader's renewal on the new primary");
    let slot = format!("leasehold:{{pool}}#{}", p.slot());
    assert_eq!(set.replica.cli(&["GET", &slot]), p.owner().to_string());
    assert_eq!(set.replica.cli(&["GET", "leasehold:{doc}"]), "readers");
    let held = l.holders(None).await.unwrap();
    assert_eq!(held.len(), 3, "the permit and two readers, read on the new primary: {held:?}");
    let w = leasehold_testkit::conformance::other(&l);
    let writer = tokio::spawn(async move {
        let g = w.acquire("doc", long).wait(Wait::For(Duration::from_secs(20))).await;
        (g, w)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!writer.is_finished(), "the writer waits for the readers");
    let last = r2.fence().max(r1.fence());
    assert!(p.release().await.unwrap().is_clean());
    for r in [r1, r2] {
        assert!(r.release().await.unwrap().is_clean());
    }
    let (g, _w) = tokio::time::timeout(Duration::from_secs(25), writer).await.unwrap().unwrap();
    let g = g.expect("the writer, once the readers left");
    assert!(g.fence() > last, "{} after the readers' {last}", g.fence());
    assert!(g.release().await.unwrap().is_clean());
}

/// Torture-style overlap check through two failovers: four `lh-worker fenced` processes loop
/// acquire → two fenced effects on one shared resource (an SQLite file with a fence table, a
/// counter and a log of the effects it accepted) → release, all through the
/// `redis-sentinel://` URL, while the primary is failed over twice: a graceful `SENTINEL
/// FAILOVER`, then a kill -9 of the new primary, whose replica (the old primary, demoted by
/// the sentinels) was frozen and cut off first, so that the grants made meanwhile are lost.
/// One worker's hold granted after the cut waits after its first effect until a successor,
/// granted by the promoted replica, has written; then it writes again.
///
/// What asynchronous replication permits: a failover can lose grants (and releases), so a
/// second holder is possible (here certain: the waiting worker still believes it holds its
/// lost grant when the successor is granted); with fencing, never an accepted stale effect.
/// So the history must show: the resource's accepted effects never interleaving between
/// holders, their fences increasing in commit order (the history checker over the
/// resource's log), no lost update on the counter, every hold's fence above the one before
/// it in time unless the two overlapped, the late effect refused, every worker done within
/// its bound after `stop` (no hang); lost() and unknown outcomes are allowed and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torture_overlap_check_through_two_sentinel_failovers() {
    use leasehold_testkit::conformance::unique_key;
    use leasehold_testkit::torture::Workers;
    let set = blocking(SentinelSet::start).await;
    let key = unique_key("torture");
    let fence_name = format!("leasehold:{{{key}}}:fence");
    let worker = std::path::Path::new(env!("CARGO_BIN_EXE_lh-worker"));
    let mut w = Workers::start(worker, &set.url(""), &key, 4, Duration::from_secs(6));
    let t = Duration::from_secs(30);
    let mut seen = w.wait_effects(0, 6, t).await;

    // A graceful failover; then the sentinels demote the old primary, which streams from the
    // new one (a replica a failover back can promote).
    let set = blocking(move || {
        set.failover().expect("SENTINEL FAILOVER");
        set
    })
    .await;
    seen = w.wait_effects(seen, 6, t).await;
    let set = blocking(move || {
        set.wait_replica(&set.primary, &set.replica, Duration::from_secs(40)).expect("demoted");
        set
    })
    .await;
    w.wait_effects(seen, 2, t).await;

    // The new primary is `set.replica` now. Its replica frozen and cut off: the grants from
    // here on are the primary's alone. The fence counter at the cut bounds them from below.
    let name = fence_name.clone();
    let (set, at_cut) = blocking(move || {
        set.replica.freeze_and_cut(&set.primary).expect("cut off the replica");
        let at_cut: u64 = set.replica.cli(&["GET", &name]).parse().expect("a counter");
        (set, at_cut)
    })
    .await;
    w.send(0, &format!("hold {at_cut}")).await;
    let said = w.line(0).await;
    let paused: u64 = said.strip_prefix("paused ").and_then(|f| f.parse().ok()).expect(&said);
    let set = blocking(move || {
        let mut set = set;
        set.replica.kill9();
        set.primary.cont();
        set.force_failover(&set.primary, Duration::from_secs(30)).expect("promotion");
        set
    })
    .await;
    // The promoted replica never saw the waiting worker's grant.
    let counter: u64 = set.primary.cli(&["GET", &fence_name]).parse().expect("a counter");
    assert!(counter < paused, "the promoted replica had the grant of {paused}: {counter}");
    let succ = w.wait_for("by a successor", t, |e| e.fence > paused).await;
    w.send(0, "go").await;
    w.wait_effects(succ.seq as usize, 6, t).await;

    let r = w.stop(Duration::from_secs(30)).await;
    let total = r.total();
    eprintln!(
        "{} effects accepted; workers: {total}; holds overlapping another: {}",
        r.effects.len(),
        r.holds.overlaps.len()
    );
    r.assert_safe();
    assert!(total.refused >= 1, "the waiting worker's late effect was accepted: {total}");
    assert!(!r.holds.overlaps.is_empty(), "no second holder was recorded: {:?}", r.holds);
    drop(set);
}
