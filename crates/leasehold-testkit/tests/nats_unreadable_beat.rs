//! A holder's heartbeat bucket that a contender (or the pruning task) cannot read is not a
//! heartbeat that expired. Reading a bucket not yet open in this process asks JetStream for
//! its stream; only the server's "stream not found" means the bucket, and the heartbeats in
//! it, are gone. Any other failure (here JetStream's API for that one stream answering "no
//! responders", as a server restarting or not yet ready does) used to be read as "gone": the
//! contender took the live holder's key (two holders at once), and a pruning task purged the
//! live holder's grant.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use leasehold::backends::nats::tools::{self, async_nats};
use leasehold::{Error, Locker};
use leasehold_testkit::spawn::free_port;

use async_nats::jetstream::{self, stream::LastRawMessageErrorKind};

/// The holder's TTL and the stream of its heartbeat bucket (`tools::heartbeat_bucket`).
const HOLDER_TTL: Duration = Duration::from_secs(30);

/// A private `nats-server -js` from a config file, so that the test can reload it; killed on
/// drop.
struct Server {
    port: u16,
    dir: tempfile::TempDir,
    child: Child,
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        write_config(dir.path(), port, "");
        let log = std::fs::File::create(dir.path().join("nats.log")).unwrap();
        let child = Command::new("nats-server")
            .arg("-c")
            .arg(dir.path().join("nats.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("nats-server on PATH");
        Server { port, dir, child }
    }

    fn url(&self, suffix: &str) -> String {
        format!("nats://127.0.0.1:{}{suffix}", self.port)
    }

    /// Rewrites the config with `extra` and makes the server reload it (SIGHUP).
    fn reload(&self, extra: &str) {
        write_config(self.dir.path(), self.port, extra);
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    }
}

/// The server's config file in `dir`: its port, its JetStream store, and `extra`.
fn write_config(dir: &std::path::Path, port: u16, extra: &str) {
    let store = dir.join("js");
    let conf = format!(
        "listen: \"127.0.0.1:{port}\"\njetstream {{ store_dir: \"{}\" }}\n{extra}\n",
        store.display()
    );
    std::fs::write(dir.join("nats.conf"), conf).unwrap();
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Connects, retrying for up to 10 s while the server starts.
async fn connect(url: &str) -> Locker {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        match Locker::connect(url).await {
            Ok(l) => return l,
            Err(_) if Instant::now() < until => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("the private server does not serve: {e}"),
        }
    }
}

/// The sequence of `key`'s last message in the grants' stream, `None` when it has none.
async fn last_seq(stream: &jetstream::stream::Stream, key: &str) -> Option<u64> {
    match stream.get_last_raw_message_by_subject(&tools::grant_subject("leasehold", key)).await {
        Ok(m) => Some(m.sequence),
        Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => None,
        Err(e) => panic!("reading {key}: {e}"),
    }
}

/// Waits (at most 20 s) until `key`'s record is purged from the grants' stream.
async fn purged(stream: &jetstream::stream::Stream, key: &str) {
    let until = Instant::now() + Duration::from_secs(20);
    while last_seq(stream, key).await.is_some() {
        assert!(Instant::now() < until, "{key}'s marker was never purged");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_heartbeat_bucket_is_not_an_expired_heartbeat() {
    let server = tokio::task::spawn_blocking(Server::start).await.unwrap();
    let holder = connect(&server.url("")).await;
    let held = holder.acquire("k", HOLDER_TTL).await.unwrap();
    let first = holder.acquire("m1", HOLDER_TTL).await.unwrap();
    assert!(first.release().await.unwrap().is_clean());

    // From now on, asking JetStream for the holder's heartbeat stream finds no responder
    // (every other request, the holder's renewals included, is answered as before).
    let (beats, _) = tools::heartbeat_bucket("leasehold", HOLDER_TTL);
    let info = format!("$JS.API.STREAM.INFO.KV_{beats}");
    server.reload(&format!("mappings = {{ \"{info}\": \"leasehold.nowhere\" }}"));
    let client = async_nats::connect(server.url("")).await.unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        match client.request(info.clone(), "".into()).await {
            Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders => break,
            r => assert!(Instant::now() < until, "the reload did not apply: {r:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A contender (whose own pruning task forgets past 1 s) is not granted the held key.
    let contender = connect(&server.url("?horizon=1s")).await;
    let r = contender.acquire("k", Duration::from_secs(2)).await;
    assert!(
        matches!(r, Err(Error::Unavailable { .. })),
        "a live holder's key taken on an unreadable heartbeat: {:?}",
        r.map(|l| l.fence())
    );

    // Two later pruning rounds of the contender's store (each purges a released key's marker
    // older than the horizon) have examined the held key's grant: it is kept.
    let stream = jetstream::new(client).get_stream("KV_leasehold").await.unwrap();
    purged(&stream, "m1").await;
    let second = holder.acquire("m2", HOLDER_TTL).await.unwrap();
    assert!(second.release().await.unwrap().is_clean());
    purged(&stream, "m2").await;
    assert!(last_seq(&stream, "k").await.is_some(), "a live holder's grant was purged");
    assert!(!held.is_lost());
    let holders = holder.holders(Some("k")).await.unwrap();
    assert_eq!(holders.len(), 1, "still held: {holders:?}");
    assert!(held.release().await.unwrap().is_clean());
}
