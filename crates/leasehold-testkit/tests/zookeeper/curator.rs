//! Interop with Curator's `InterProcessReadWriteLock` and `InterProcessSemaphoreV2` in a Java
//! process (`java/CuratorLock.java`): a Curator writer and leasehold readers exclude each other,
//! leasehold's writer (`?curator=rwlock`) and Curator readers too, readers of both overlap, and
//! leasehold permits and Curator leases on one semaphore never exceed N together.

use std::time::{Duration, Instant};

use leasehold::{Error, Locker, Wait};
use leasehold_testkit::conformance::unique_key;
use leasehold_testkit::stores::zookeeper::server::ZkServer;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

const LONG: Duration = Duration::from_secs(30);

/// Curator's `recipe` on `/leasehold/KEY`, held `hold_ms` once acquired.
fn curator(
    server: &ZkServer,
    key: &str,
    hold_ms: u64,
    recipe: &str,
) -> (Child, Lines<BufReader<ChildStdout>>) {
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/java/CuratorLock.java");
    let mut java = tokio::process::Command::new("java")
        .args(["-cp", &super::curator_classpath(), src])
        .arg(format!("127.0.0.1:{}", server.port()))
        .arg(format!("/leasehold/{key}"))
        .arg(hold_ms.to_string())
        .arg(recipe)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("run java");
    let out = BufReader::new(java.stdout.take().unwrap()).lines();
    (java, out)
}

/// The next line Curator prints, within `limit`; `None` when it printed nothing by then.
async fn said(out: &mut Lines<BufReader<ChildStdout>>, limit: Duration) -> Option<String> {
    match tokio::time::timeout(limit, out.next_line()).await {
        Ok(line) => Some(line.unwrap().unwrap_or_default()),
        Err(_) => None,
    }
}

/// Waits (bounded) until Curator's node with `marker` is queued under `path`: the JVM may take
/// seconds to start, and a check made before it queued would prove nothing.
async fn queued(server: &ZkServer, path: &str, marker: &str) {
    let store =
        leasehold::backends::zookeeper::ZookeeperStore::connect(&server.url("")).await.unwrap();
    let client = store.client().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let nodes = client.list_children(path).await.unwrap_or_default();
        if nodes.iter().any(|n| n.contains(marker)) {
            return;
        }
        assert!(Instant::now() < deadline, "Curator never queued under {path}: {nodes:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A Curator writer waits for leasehold's readers, and leasehold's readers for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_writer_and_leasehold_readers_exclude_each_other() {
    let server = ZkServer::start();
    let l = Locker::connect(&server.url("")).await.unwrap();
    let key = unique_key("curator-rw");
    let r = l.acquire_shared(&key, LONG).await.unwrap();
    let (mut java, mut out) = curator(&server, &key, 2000, "write");
    queued(&server, &format!("/leasehold/{key}"), "__WRIT__").await;
    let early = said(&mut out, Duration::from_secs(4)).await;
    assert!(early.is_none(), "a Curator writer got in beside a leasehold reader: {early:?}");
    // The waiting Curator writer blocks new leasehold readers (writer preference by sequence).
    let late = l.acquire_shared(&key, LONG).await;
    assert!(matches!(late, Err(Error::Busy { .. })), "a reader passed a waiting writer: {late:?}");
    let released = Instant::now();
    assert!(r.release().await.unwrap().is_clean());
    let line = said(&mut out, Duration::from_secs(20)).await.expect("Curator writes after");
    assert!(line.starts_with(&format!("acquired /leasehold/{key}/_c_")), "{line}");
    assert!(line.contains("__WRIT__"), "{line}");
    let busy = l.acquire_shared(&key, LONG).await;
    assert!(matches!(busy, Err(Error::Busy { .. })), "a reader beside Curator's writer: {busy:?}");
    let r = l.acquire_shared(&key, LONG).wait(Wait::For(Duration::from_secs(20))).await;
    let r = r.expect("a reader after Curator's writer");
    assert!(released.elapsed() >= Duration::from_secs(2), "the reader overlapped the writer");
    assert_eq!(said(&mut out, LONG).await.as_deref(), Some("released"));
    assert!(r.release().await.unwrap().is_clean());
    assert!(java.wait().await.unwrap().success());
}

/// With `?curator=rwlock`, leasehold's writer is Curator's `__WRIT__`: Curator readers wait
/// for it and it for them, while leasehold's readers and Curator's overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leasehold_writer_and_curator_readers_exclude_each_other() {
    let server = ZkServer::start();
    let l = Locker::connect(&server.url("?curator=rwlock")).await.unwrap();
    let key = unique_key("curator-wr");
    let w = l.acquire(&key, LONG).await.unwrap();
    let (mut java, mut out) = curator(&server, &key, 2000, "read");
    queued(&server, &format!("/leasehold/{key}"), "__READ__").await;
    let early = said(&mut out, Duration::from_secs(4)).await;
    assert!(early.is_none(), "a Curator reader got in beside a leasehold writer: {early:?}");
    let w_fence = w.fence();
    assert!(w.release().await.unwrap().is_clean());
    let line = said(&mut out, Duration::from_secs(20)).await.expect("Curator reads after");
    assert!(line.starts_with("acquired "), "{line}");
    let t0 = Instant::now();
    let r = l.acquire_shared(&key, LONG).await.expect("readers of both overlap");
    let r_fence = r.fence();
    assert!(r_fence > w_fence);
    let busy = l.acquire(&key, LONG).await;
    assert!(matches!(busy, Err(Error::Busy { .. })), "a writer beside Curator's reader: {busy:?}");
    assert!(r.release().await.unwrap().is_clean());
    let w = l.acquire(&key, LONG).wait(Wait::For(Duration::from_secs(20))).await;
    let w = w.expect("the writer after Curator's reader");
    assert!(t0.elapsed() >= Duration::from_millis(1500), "the writer overlapped the reader");
    assert_eq!(said(&mut out, LONG).await.as_deref(), Some("released"));
    assert!(w.fence() > r_fence);
    let client =
        leasehold::backends::zookeeper::ZookeeperStore::connect(&server.url("")).await.unwrap();
    let client = client.client().await.unwrap();
    let nodes = client.list_children(&format!("/leasehold/{key}")).await.unwrap();
    assert!(nodes.len() == 1 && nodes[0].contains("-__WRIT__"), "{nodes:?}");
    assert!(w.release().await.unwrap().is_clean());
    assert!(java.wait().await.unwrap().success());
}

/// Two permits: one leasehold permit and one Curator lease fill the semaphore; a third of
/// either kind waits; the lease node carries leasehold's slot, and its czxid is the fence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leasehold_permits_and_curator_leases_share_n() {
    let server = ZkServer::start();
    let store =
        leasehold::backends::zookeeper::ZookeeperStore::connect(&server.url("")).await.unwrap();
    let client = store.client().await.unwrap();
    let l = Locker::new(store);
    let key = unique_key("curator-sem");
    let a = l.acquire_permit(&key, 2, LONG).await.unwrap();
    let leases = format!("/leasehold/{key}/leases");
    let nodes = client.list_children(&leases).await.unwrap();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    assert!(nodes[0].starts_with("_c_") && nodes[0].contains("-lease-"), "{nodes:?}");
    let (data, stat) = client.get_data(&format!("{leases}/{}", nodes[0])).await.unwrap();
    let data = String::from_utf8(data).unwrap();
    assert!(data.starts_with(&format!("{}\nslot {} of 2", a.owner(), a.slot())), "{data}");
    assert_eq!(stat.czxid as u64, a.fence().get());

    let (mut java, mut out) = curator(&server, &key, 3000, "semaphore:2");
    let line = said(&mut out, Duration::from_secs(20)).await.expect("Curator takes the second");
    assert!(line.starts_with("acquired "), "{line}");
    let third = l.acquire_permit(&key, 2, LONG).await;
    assert!(matches!(third, Err(Error::Busy { .. })), "three holders of two permits: {third:?}");
    let t0 = Instant::now();
    let b = l.acquire_permit(&key, 2, LONG).wait(Wait::For(Duration::from_secs(20))).await;
    let b = b.expect("a permit once Curator's lease is returned");
    assert!(t0.elapsed() >= Duration::from_secs(1), "got a permit while Curator held the other");
    assert_ne!(a.slot(), b.slot());
    assert_eq!(said(&mut out, LONG).await.as_deref(), Some("released"));
    assert!(java.wait().await.unwrap().success());

    // Both permits are leasehold's now: a Curator lease waits for one of them.
    let (mut java, mut out) = curator(&server, &key, 100, "semaphore:2");
    queued(&server, &format!("/leasehold/{key}/locks"), "-lock-").await;
    let early = said(&mut out, Duration::from_secs(4)).await;
    assert!(early.is_none(), "Curator took a third lease of two: {early:?}");
    assert!(a.release().await.unwrap().is_clean());
    let line = said(&mut out, Duration::from_secs(20)).await.expect("Curator after a release");
    assert!(line.starts_with("acquired "), "{line}");
    assert_eq!(said(&mut out, LONG).await.as_deref(), Some("released"));
    assert!(java.wait().await.unwrap().success());
    assert!(b.release().await.unwrap().is_clean());
}
