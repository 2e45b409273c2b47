//! ZooKeeper: the conformance and primitives suites, the process-level scenarios, the Curator
//! node layouts (mutex, read-write lock, semaphore) and interop with Curator in a Java process,
//! a paused server, and no orphan node after an interrupted acquire.

use std::path::Path;
use std::time::{Duration, Instant};

use leasehold::{Error, Locker, LostReason, Wait};
use leasehold_testkit::conformance::unique_key;
use leasehold_testkit::stores::zookeeper::server::ZkServer;
use leasehold_testkit::{process, zk_fixture};

mod conformance {
    use leasehold_testkit::{conformance_suite, primitives_suite, zk_fixture};
    conformance_suite!(zk_fixture());
    primitives_suite!(zk_fixture());
}

mod curator;

leasehold_testkit::process_suite! {
    mutex { multi_process_mutual_exclusion: zk_fixture() }
    permits { multi_process_permits: zk_fixture() }
    // ZooKeeper has no fenced resource of its own: an SQLite file.
    stalled zk_fixture(), resource leasehold_testkit::sqlite_resource;
}

/// Nodes follow Curator's protected layout, carry the owner token, and the fence is the
/// node's czxid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_use_the_curator_layout() {
    let server = ZkServer::start();
    let store =
        leasehold::backends::zookeeper::ZookeeperStore::connect(&server.url("")).await.unwrap();
    let client = store.client().await.unwrap();
    let l = Locker::new(store);
    let key = unique_key("layout");
    let a = l.acquire(&key, Duration::from_secs(30)).await.unwrap();
    let lock = format!("/leasehold/{key}");
    let children = client.list_children(&lock).await.unwrap();
    assert_eq!(children.len(), 1, "{children:?}");
    let node = &children[0];
    let o = a.owner().to_string();
    let uuid = format!("{}-{}-{}-{}-{}", &o[0..8], &o[8..12], &o[12..16], &o[16..20], &o[20..]);
    assert!(node.starts_with(&format!("_c_{uuid}-lock-")), "{node}");
    assert_eq!(node.rsplit("lock-").next().unwrap().len(), 10, "{node}");
    let (data, stat) = client.get_data(&format!("{lock}/{node}")).await.unwrap();
    // The owner token, then who holds it (Curator puts the client's address there).
    let data = String::from_utf8(data).unwrap();
    let (owner, info) = data.split_once('\n').expect("owner, then holder info");
    assert_eq!(owner, o);
    let info = leasehold::HolderInfo::decode(info).expect("a holder info line");
    assert_eq!(info.pid, std::process::id());
    assert_eq!(stat.czxid as u64, a.fence().get());
    assert_ne!(stat.ephemeral_owner, 0, "the node must be ephemeral");
    // zkCli sees the same.
    let listed = server.cli(&["ls", &lock]);
    assert!(listed.contains(node.as_str()), "{listed}");
    assert!(a.release().await.unwrap().is_clean());
    assert!(client.list_children(&lock).await.map(|c| c.is_empty()).unwrap_or(true));
}

fn curator_classpath() -> String {
    let jars = [
        "curator-client",
        "curator-framework",
        "curator-recipes",
        "guava",
        "zookeeper",
        "zookeeper-jute",
        "slf4j-api",
        "netty-handler",
        "netty-transport",
        "netty-common",
        "netty-buffer",
        "netty-resolver",
        "netty-codec",
        "netty-transport-native-epoll",
        "netty-transport-native-unix-common",
    ];
    let cp: Vec<String> = jars.iter().map(|j| format!("/usr/share/java/{j}.jar")).collect();
    for j in &cp {
        assert!(
            Path::new(j).exists(),
            "{j} is missing: run `bash scripts/test`, which installs libcurator-recipes-java"
        );
    }
    cp.join(":")
}

/// A Java process holding Apache Curator's InterProcessMutex on `/leasehold/KEY` and leasehold
/// on KEY exclude each other, both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_leasehold_exclude_each_other() {
    use tokio::io::AsyncBufReadExt;
    let server = ZkServer::start();
    let l = Locker::connect(&server.url("")).await.unwrap();
    let key = unique_key("curator");
    let a = l.acquire(&key, Duration::from_secs(30)).await.unwrap();
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/java/CuratorLock.java");
    let mut java = tokio::process::Command::new("java")
        .args(["-cp", &curator_classpath(), src])
        .arg(format!("127.0.0.1:{}", server.port()))
        .arg(format!("/leasehold/{key}"))
        .arg("2000")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("run java");
    let mut out = tokio::io::BufReader::new(java.stdout.take().unwrap()).lines();
    // Curator queues behind us and must not get in while we hold.
    let early = tokio::time::timeout(Duration::from_secs(4), out.next_line()).await;
    assert!(early.is_err(), "Curator acquired a lock leasehold holds: {early:?}");
    let released = Instant::now();
    assert!(a.release().await.unwrap().is_clean());
    let said = tokio::time::timeout(Duration::from_secs(20), out.next_line())
        .await
        .expect("Curator acquires after release")
        .unwrap()
        .unwrap_or_default();
    assert!(said.starts_with(&format!("acquired /leasehold/{key}/_c_")), "{said}");
    // Curator holds for 2 s: leasehold must wait for it.
    let r = l.acquire(&key, Duration::from_secs(30)).await;
    assert!(matches!(r, Err(Error::Busy { .. })), "leasehold got a lock Curator holds: {r:?}");
    assert!(matches!(l.holders(Some(&key)).await, Err(Error::Busy { .. })));
    let b = l
        .acquire(&key, Duration::from_secs(30))
        .wait(Wait::For(Duration::from_secs(20)))
        .await
        .expect("leasehold after Curator");
    assert!(released.elapsed() >= Duration::from_secs(2), "leasehold overlapped Curator's hold");
    assert_eq!(out.next_line().await.unwrap().as_deref(), Some("released"));
    assert!(b.release().await.unwrap().is_clean());
    assert!(java.wait().await.unwrap().success());
}

/// A paused server: `admit()` turns false well before the session could expire, and `lost()`
/// fires, before the server (once resumed) expires the session and hands the lock on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_server_turns_admit_false_before_session_expiry() {
    let server = ZkServer::start();
    let l = Locker::connect(&server.url("?session=3s")).await.unwrap();
    let key = unique_key("paused");
    let a = l.acquire(&key, Duration::from_secs(30)).await.unwrap();
    let t0 = Instant::now();
    server.stop();
    while a.admit() {
        assert!(t0.elapsed() < Duration::from_secs(3), "admit() still true at the session timeout");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let admit_false_at = t0.elapsed();
    let reason = tokio::time::timeout(Duration::from_secs(10), a.lost()).await.expect("lost()");
    let lost_at = t0.elapsed();
    server.cont();
    assert!(matches!(reason, LostReason::SessionEnded(_)), "{reason:?}");
    assert!(admit_false_at < Duration::from_millis(2000), "admit false after {admit_false_at:?}");
    assert!(lost_at < Duration::from_secs(3), "lost() after {lost_at:?}, past the session timeout");
    let b = l
        .acquire(&key, Duration::from_secs(30))
        .wait(Wait::For(Duration::from_secs(20)))
        .await
        .expect("a new session gets the lock once the old one expired");
    assert!(b.fence() > a.fence());
    assert!(b.release().await.unwrap().is_clean());
}

/// An acquire whose create is interrupted by a connection loss (the server frozen with the
/// request in flight) finds its own node afterwards instead of creating a second one, and
/// leaves nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_create_leaves_no_orphan() {
    let server = ZkServer::start();
    let store = leasehold::backends::zookeeper::ZookeeperStore::connect(&server.url("?session=4s"))
        .await
        .unwrap();
    let client = store.client().await.unwrap();
    let l = Locker::new(store);
    let key = unique_key("interrupted");
    let lock = format!("/leasehold/{key}");
    // Make the lock node exist so the frozen request is the create itself.
    let warm = l.acquire(&key, Duration::from_secs(30)).await.unwrap();
    assert!(warm.release().await.unwrap().is_clean());
    server.stop();
    let task = {
        let (l, key) = (l.clone(), key.clone());
        tokio::spawn(async move {
            l.acquire(&key, Duration::from_secs(30)).wait(Wait::For(Duration::from_secs(20))).await
        })
    };
    tokio::time::sleep(Duration::from_millis(2000)).await; // the client gives up on the connection
    server.cont();
    let lease = task.await.unwrap().expect("acquired after the reconnect");
    let children = client.list_children(&lock).await.unwrap();
    assert_eq!(children.len(), 1, "an orphan node was left: {children:?}");
    assert!(lease.release().await.unwrap().is_clean());
    assert!(client.list_children(&lock).await.map(|c| c.is_empty()).unwrap_or(true));
}

/// A stale release never deletes the successor's grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_release_does_not_delete_the_successor() {
    let fx = zk_fixture().await;
    process::stale_release_keeps_successor(&fx.locker, &fx.url).await;
}

#[tokio::test]
async fn bad_urls_and_keys_are_typed_errors() {
    for bad in ["zk://", "zk://127.0.0.1", "zk://127.0.0.1:1?session=1h2", "zk://127.0.0.1:1?x=1"] {
        let r = Locker::connect(bad).await;
        assert!(matches!(r, Err(Error::InvalidInput(_))), "{bad}: {r:?}");
    }
    let fx = zk_fixture().await;
    for key in ["a//b", "trailing/", "a/../b", "bell\u{7}"] {
        let r = fx.locker.acquire(key, Duration::from_secs(30)).await;
        assert!(matches!(r, Err(Error::InvalidInput(_))), "{key:?}: {r:?}");
    }
}

/// No herd: with 8 waiters in 8 sessions, each watches its own predecessor (one watch per
/// node, as the server's `wchp` lists them), and one release wakes one waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_waiter_watches_only_its_predecessor() {
    let server = ZkServer::start();
    let url = server.url("");
    let key = unique_key("herd");
    let lock = format!("/leasehold/{key}");
    let holder = Locker::connect(&url).await.unwrap();
    let a = holder.acquire(&key, Duration::from_secs(30)).await.unwrap();
    let mut waiters = Vec::new();
    for _ in 0..8 {
        let l = Locker::connect(&url).await.unwrap();
        let key = key.clone();
        waiters.push(tokio::spawn(async move {
            let lease = l
                .acquire(&key, Duration::from_secs(30))
                .wait(Wait::For(Duration::from_secs(30)))
                .await;
            (l, lease)
        }));
    }
    // Watches on lock nodes, as the server reports them (path, then the sessions under it).
    let watched = || {
        let out = server.four("wchp");
        let mut paths: Vec<(String, usize)> = Vec::new();
        for line in out.lines() {
            if line.starts_with('/') {
                paths.push((line.to_string(), 0));
            } else if line.trim().starts_with("0x")
                && let Some(last) = paths.last_mut()
            {
                last.1 += 1;
            }
        }
        paths.retain(|(p, _)| p.starts_with(&lock));
        paths
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut w = watched();
    while w.len() < 8 {
        assert!(Instant::now() < deadline, "waiters never all queued: {w:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        w = watched();
    }
    assert_eq!(w.len(), 8, "one watched node per waiter: {w:?}");
    assert!(w.iter().all(|(_, n)| *n == 1), "a node watched by several sessions: {w:?}");
    assert!(a.release().await.unwrap().is_clean());
    // Exactly one waiter gets in; the other seven keep their single watches.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(waiters.iter().filter(|t| t.is_finished()).count(), 1);
    let w = watched();
    assert_eq!(w.len(), 7, "{w:?}");
    // Let them all through, one by one.
    for t in waiters {
        let (_l, lease) = t.await.unwrap();
        let _ = lease;
    }
}

/// A `zk://` URL naming a server that is not there, or one that does not answer (frozen),
/// answers at the connect limit, not after the session timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_or_frozen_server_answers_within_the_connect_limit() {
    let dead = format!("zk://127.0.0.1:{}?session=1m", leasehold_testkit::spawn::free_port());
    let t = Instant::now();
    let e = Locker::connect_within(&dead, Duration::from_secs(2)).await.expect_err("no server");
    assert!(e.is_unavailable() && !e.is_config(), "{e:?}");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "the 2 s connect limit, not the 1 min session: {:?}",
        t.elapsed()
    );

    let server = ZkServer::start();
    server.stop();
    let t = Instant::now();
    let r = Locker::connect_within(&server.url("?session=1m"), Duration::from_secs(2)).await;
    let waited = t.elapsed();
    server.cont();
    let e = r.expect_err("a frozen server cannot open a session");
    assert!(e.is_unavailable() && !e.is_config(), "{e:?}");
    assert!(
        waited < Duration::from_secs(5),
        "the 2 s connect limit, not the 1 min session: {waited:?}"
    );
}

/// A chroot the server's ACLs do not let this client create under is a configuration error,
/// never an outage a job may run through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chroot_that_cannot_be_created_is_config() {
    let server = ZkServer::start();
    // zkCli.sh exits 0 whatever happened, and under load its `create` can miss: check it did.
    let made = (0..5).any(|_| {
        server.cli(&["create", "/readonly", "x", "world:anyone:r"]);
        server.cli(&["getAcl", "/readonly"]).contains("world")
    });
    assert!(made, "zkCli.sh could not create /readonly");
    let l = Locker::connect(&server.url("/readonly/app")).await.unwrap();
    let e = l.acquire("k", Duration::from_secs(30)).await.expect_err("nothing can be created");
    assert!(e.is_config() && !e.is_unavailable(), "{e:?}");
}

/// A waiter frozen (SIGSTOP) past its ZooKeeper session held nothing: resumed, it waits on with a new
/// session and gets the key when the holder releases, or answers busy when its wait runs out.
/// It used to fail "store unavailable".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_frozen_past_its_session_waits_on() {
    let server = ZkServer::start();
    let url = server.url("?session=2s");
    let l = Locker::connect(&url).await.unwrap();
    let worker = std::path::Path::new(env!("CARGO_BIN_EXE_lh-worker"));
    process::waiter_frozen_past_its_session(&l, &url, worker, Duration::from_secs(2)).await;
}

/// The torture run with workers frozen past their sessions in turn (holding or waiting): the
/// history is safe and no acquire fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torture_workers_frozen_past_their_sessions() {
    let server = ZkServer::start();
    let worker = std::path::Path::new(env!("CARGO_BIN_EXE_lh-worker"));
    let key = unique_key("torture-frozen");
    // 6 s: the client's connect must answer within 2/5 of it, for every worker and every new
    // session, also on a loaded machine.
    let session = Duration::from_secs(6);
    let url = server.url("?session=6s");
    leasehold_testkit::torture::frozen_past_sessions(worker, &url, &key, session).await;
}
