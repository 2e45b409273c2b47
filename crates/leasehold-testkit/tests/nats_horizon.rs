//! Bounded state on NATS JetStream KV (issue 35), on a private `nats-server -js` with the
//! smallest horizon (1 s): the grants' bucket forgets a released key's marker and a dead
//! holder's grant once the horizon has passed, never a live holder's, never a grant written
//! after the pruning task examined the key; and fences still grow after the forgetting.

use std::time::{Duration, Instant};

use leasehold::Locker;
use leasehold::backends::nats::tools::{self, async_nats};
use leasehold_testkit::stores::nats::server::NatsServer;

use async_nats::jetstream::{self, stream::LastRawMessageErrorKind};

const TTL: Duration = Duration::from_millis(500);
const H: Duration = Duration::from_secs(1);

/// The grants' stream of the default bucket, through a raw client.
async fn grants_stream(server: &NatsServer) -> jetstream::stream::Stream {
    let client = async_nats::connect(server.url("")).await.unwrap();
    jetstream::new(client).get_stream("KV_leasehold").await.unwrap()
}

/// The sequence of `key`'s last message in the grants' stream, `None` when it has none.
async fn last_seq(stream: &jetstream::stream::Stream, key: &str) -> Option<u64> {
    match stream.get_last_raw_message_by_subject(&tools::grant_subject("leasehold", key)).await {
        Ok(m) => Some(m.sequence),
        Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => None,
        Err(e) => panic!("reading {key}: {e}"),
    }
}

/// A released key's marker and a dead holder's grant are purged once stamped more than the
/// horizon ago (by the next round, a quarter horizon later), not before; a live holder's
/// grant, older than the horizon, stays across many rounds; the next fences are larger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_and_dead_keys_are_purged_after_the_horizon_and_fences_still_grow() {
    let server = NatsServer::start();
    let l = Locker::connect(&server.url("?horizon=1s")).await.unwrap();
    let stream = grants_stream(&server).await;
    let t0 = Instant::now();
    let idle = l.acquire("idle", TTL).await.unwrap();
    let idle_fence = idle.fence();
    assert!(idle.release().await.unwrap().is_clean());
    let dead = l.acquire("dead", TTL).auto_renew(false).await.unwrap();
    let dead_fence = dead.fence();
    drop(dead.detach()); // its holder is gone: the heartbeat expires after TTL
    let held = l.acquire("held", TTL).auto_renew(true).await.unwrap();
    let mut info = stream.clone();
    let config = info.info().await.unwrap().config.clone();
    assert!(config.deny_delete && !config.deny_purge, "made as `nats kv add` makes it");

    tokio::time::sleep(Duration::from_millis(600)).await;
    for key in ["idle", "dead", "held"] {
        assert!(last_seq(&stream, key).await.is_some(), "{key}: not before the horizon");
    }
    // Stamped about t0; purged by the first round after t0 + H: before TTL + 2H.
    let deadline = t0 + TTL + 2 * H;
    while last_seq(&stream, "idle").await.is_some() || last_seq(&stream, "dead").await.is_some() {
        assert!(Instant::now() < deadline, "still there {:?} after t0", t0.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let gone = t0.elapsed();
    assert!(gone >= H, "purged {gone:?} after t0, before the horizon");
    // The held key's grant is older than the horizon, its heartbeat alive: kept round after
    // round (a round every 250 ms).
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(last_seq(&stream, "held").await.is_some(), "a held key's grant is kept");
    assert!(!held.is_lost());
    let state = info.info().await.unwrap().state.clone();
    assert_eq!(state.messages, 1, "only the held key's grant is left: {state:?}");

    let again = l.acquire("idle", TTL).await.unwrap();
    assert!(again.fence() > idle_fence, "{} after {}", again.fence(), idle_fence);
    let taken = l.acquire("dead", TTL).await.unwrap();
    assert!(taken.fence() > dead_fence, "{} after {}", taken.fence(), dead_fence);
    for lease in [again, taken, held] {
        assert!(lease.release().await.unwrap().is_clean());
    }
}

/// A grant written after a pruning round examined the key's record is never purged: the purge
/// reaches only up to the examined sequence. (A purge of the subject without that bound, as
/// the last step shows, would remove the live grant: the bound is what keeps it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_made_after_the_examination_is_never_purged() {
    let server = NatsServer::start();
    let l = Locker::connect(&server.url("")).await.unwrap();
    let store = tools::connect(&leasehold::StoreUrl::parse(&server.url("")).unwrap()).await;
    let store = store.unwrap();
    let stream = grants_stream(&server).await;
    let first = l.acquire("raced", TTL).await.unwrap();
    let first_fence = first.fence();
    assert!(first.release().await.unwrap().is_clean());
    let examined = last_seq(&stream, "raced").await.expect("the release marker");
    // The grant a contender makes between the round's examination and its purge.
    let second = l.acquire("raced", Duration::from_secs(30)).await.unwrap();
    assert!(second.fence() > first_fence);
    let granted = last_seq(&stream, "raced").await.unwrap();
    assert!(granted > examined);
    assert_eq!(tools::purge_examined(&store, "raced", examined).await.unwrap(), 0);
    assert_eq!(last_seq(&stream, "raced").await, Some(granted), "the newer grant is kept");
    let holders = l.holders(Some("raced")).await.unwrap();
    assert_eq!(holders.len(), 1, "still held: {holders:?}");
    assert!(!second.is_lost());
    // Without the bound the same purge takes the live grant.
    let purged = stream.purge().filter(tools::grant_subject("leasehold", "raced")).await;
    assert_eq!(purged.unwrap().purged, 1);
    assert_eq!(last_seq(&stream, "raced").await, None);
    let _ = second.release().await;
}

/// `Store::forget` leaves the subject empty (a KV `PURGE` would leave its marker), and the
/// next grant's fence, from the server's clock, is still larger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forget_leaves_no_message_and_fences_still_grow() {
    let server = NatsServer::start();
    let url = server.url("");
    let l = Locker::connect(&url).await.unwrap();
    let stream = grants_stream(&server).await;
    let a = l.acquire("forgotten", TTL).await.unwrap();
    let fence = a.fence();
    assert!(a.release().await.unwrap().is_clean());
    assert!(last_seq(&stream, "forgotten").await.is_some());
    tools::forget(&leasehold::StoreUrl::parse(&url).unwrap(), "forgotten").await.unwrap();
    assert_eq!(last_seq(&stream, "forgotten").await, None, "no marker left");
    let b = l.acquire("forgotten", TTL).await.unwrap();
    assert!(b.fence() > fence, "{} after {}", b.fence(), fence);
    assert!(b.release().await.unwrap().is_clean());
}

/// Bounded state at scale (BENCHMARKS.md, "Bounded state at scale"): `LH_NATS_KEYS` (500 by
/// default) distinct keys locked and released once each (64 tasks), the grants' stream
/// measured empty, after the last key and once the horizon (`LH_NATS_HORIZON`, 1 s by
/// default) and the pruning rounds have passed; it must be back to the empty bucket's
/// messages within twice the horizon plus a minute. BENCHMARKS.md's figure is the same test
/// with `LH_NATS_KEYS=10000 LH_NATS_HORIZON=30s` and `--no-capture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_keys_locked_and_released_leave_the_empty_bucket() {
    let keys: usize =
        std::env::var("LH_NATS_KEYS").ok().and_then(|v| v.parse().ok()).unwrap_or(500);
    let horizon = std::env::var("LH_NATS_HORIZON").unwrap_or_else(|_| "1s".into());
    let h = leasehold::parse_duration(&horizon).unwrap();
    let server = NatsServer::start();
    let l = Locker::connect(&server.url(&format!("?horizon={horizon}"))).await.unwrap();
    let mut stream = grants_stream(&server).await;
    let state = async |s: &mut jetstream::stream::Stream| {
        let st = s.info().await.unwrap().state.clone();
        (st.bytes, st.messages)
    };
    let empty = state(&mut stream).await;
    let t0 = Instant::now();
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let (l, next) = (l.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= keys {
                        return;
                    }
                    let lease = l.acquire(&format!("scale/{i}"), Duration::from_secs(10)).await;
                    assert!(lease.unwrap().release().await.unwrap().is_clean());
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let locked = t0.elapsed();
    let after_last = state(&mut stream).await;
    let t1 = Instant::now();
    let mut after_horizon = state(&mut stream).await;
    while after_horizon.1 > empty.1 {
        let limit = 2 * h + Duration::from_secs(60);
        assert!(t1.elapsed() < limit, "not pruned: {after_horizon:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        after_horizon = state(&mut stream).await;
    }
    let show = |what: &str, (bytes, msgs): (u64, u64)| {
        println!("  {what:<14} {bytes:>10} bytes {msgs:>7} messages");
    };
    println!("[nats scale] {keys} keys locked and released, 64 tasks, horizon {horizon}");
    println!("  keys/s {:.0} ({locked:?})", keys as f64 / locked.as_secs_f64());
    show("empty", empty);
    show("after last key", after_last);
    show("after horizon", after_horizon);
    println!("  back to the empty bucket's messages {:?} after the last release", t1.elapsed());
}
