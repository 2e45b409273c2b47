//! Scenarios across OS processes, driven through the `lh-worker` binary.
//!
//! Children are started by the scenario, killed when their handle drops (also when stopped),
//! and only ever signalled by the scenario that started them.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// Where `lh-worker` finds its store URL.
pub const STORE_ENV: &str = "LH_WORKER_STORE";

use leasehold::{Error, Locker, Wait};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::conformance::unique_key;

/// A child process, SIGKILLed on drop.
pub struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Option<Lines<BufReader<ChildStdout>>>,
}

impl Proc {
    /// Starts `program args…` with piped stdin/stdout.
    pub fn spawn(program: &Path, store: &str, args: &[&str]) -> Proc {
        let mut child = Command::new(program)
            .args(args)
            // The store URL may hold a password: the environment, never argv (`ps`).
            .env(STORE_ENV, store)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().map(|o| BufReader::new(o).lines());
        Proc { child, stdin, stdout }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id().expect("child still running") as i32)
    }

    /// Freezes the process (a GC pause, a VM migration).
    pub fn stop(&self) {
        kill(self.pid(), Signal::SIGSTOP).expect("SIGSTOP");
    }

    /// Resumes it.
    pub fn cont(&self) {
        kill(self.pid(), Signal::SIGCONT).expect("SIGCONT");
    }

    /// Kills it outright.
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    /// Next line of its stdout (bounded wait).
    pub async fn line(&mut self) -> String {
        let out = self.stdout.as_mut().expect("stdout piped");
        tokio::time::timeout(Duration::from_secs(60), out.next_line())
            .await
            .expect("worker said nothing for 60 s")
            .expect("read worker stdout")
            .expect("worker closed stdout")
    }

    /// Sends a line to its stdin.
    pub async fn send(&mut self, line: &str) {
        let i = self.stdin.as_mut().expect("stdin piped");
        i.write_all(format!("{line}\n").as_bytes()).await.expect("write worker stdin");
        i.flush().await.expect("flush worker stdin");
    }

    /// Waits for exit (bounded) and returns the exit code.
    pub async fn wait(&mut self) -> i32 {
        let st = tokio::time::timeout(Duration::from_secs(180), self.child.wait())
            .await
            .expect("worker did not exit within 180 s")
            .expect("wait for worker");
        st.code().unwrap_or(-1)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(id) = self.child.id() {
            let _ = kill(Pid::from_raw(id as i32), Signal::SIGCONT);
        }
    }
}

/// Opens the protected resource of the stalled-holder scenario: one value, in a SQLite table
/// (`sqlite:PATH`) or on a store that holds one (its URL), with leasehold's fence table or
/// fence hash beside it.
pub use leasehold_harness::stores::open_resource;

/// Starts an `lh-worker hold` process: it acquires `key`, claims and writes the resource, says
/// `ready FENCE`, and on `write` writes again and says `accepted` or `rejected: …`.
fn spawn_holder(
    worker: &Path,
    url: &str,
    key: &str,
    ttl_ms: u64,
    resource: &str,
    fenced: bool,
) -> Proc {
    let ttl = ttl_ms.to_string();
    let fenced = if fenced { "1" } else { "0" };
    Proc::spawn(
        worker,
        url,
        &["hold", "--key", key, "--ttl-ms", &ttl, "--resource", resource, "--fenced", fenced],
    )
}

/// Asserts the fenced run's outcome: the resumed holder's write was refused and the
/// successor's value stands.
#[track_caller]
pub fn assert_stale_write_rejected(r: &StallReport) {
    assert!(r.fences.1 > r.fences.0, "{r:?}");
    assert!(!r.stale_write_accepted, "the resumed holder's stale write got through: {r:?}");
    assert!(r.holder_said.starts_with("rejected: stale fence"), "{r:?}");
    assert_eq!(r.final_value.as_deref(), Some("successor"), "{r:?}");
}

/// Asserts the control's outcome: without fencing the stale write landed over the
/// successor's, so the fenced assertion above is able to fail.
#[track_caller]
pub fn assert_stale_write_accepted(r: &StallReport) {
    assert!(r.stale_write_accepted, "{r:?}");
    assert_eq!(r.final_value.as_deref(), Some("holder-stale"), "{r:?}");
}

/// The resumed holder's release answered "not ours" (its lease or session ended while it was
/// frozen), not an error: `leasehold run` exits 79 (lost), not 69 (unavailable).
#[track_caller]
pub fn assert_release_said_not_ours(r: &StallReport) {
    assert_eq!(r.holder_released, "released false", "{r:?}");
}

/// `procs` worker processes × `iters` critical sections on one key: the recorded history must
/// show no overlap, fences increasing in time order, and no lost update on a shared counter.
pub async fn multi_process_mutex(url: &str, worker: &Path, procs: usize, iters: usize) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("multi-process");
    let counter = dir.path().join("counter");
    let iters_s = iters.to_string();
    let mut children: Vec<Proc> = (0..procs)
        .map(|i| {
            let hist = dir.path().join(format!("p{i}.hist"));
            Proc::spawn(
                worker,
                url,
                &[
                    "mutex",
                    "--key",
                    &key,
                    "--iters",
                    &iters_s,
                    "--history",
                    hist.to_str().unwrap(),
                    "--counter",
                    counter.to_str().unwrap(),
                ],
            )
        })
        .collect();
    for (i, c) in children.iter_mut().enumerate() {
        assert_eq!(c.wait().await, 0, "worker {i} failed");
    }
    let report = crate::history::check_dir(dir.path()).unwrap();
    assert_eq!(report.intervals, procs * iters, "{report:?}");
    assert!(report.ok(), "mutual exclusion violated across processes: {report:#?}");
    let n: usize = std::fs::read_to_string(&counter).unwrap().trim().parse().unwrap();
    assert_eq!(n, procs * iters, "lost updates on the shared counter");
}

/// `procs` processes take one of `permits` permits `iters` times each: the history checker
/// finds every slot exclusive with fences growing per slot, and never more than `permits`
/// critical sections at once across all slots.
pub async fn multi_process_permits(
    url: &str,
    worker: &Path,
    procs: usize,
    iters: usize,
    permits: u32,
) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("multi-process-permits");
    let (iters_s, n_s) = (iters.to_string(), permits.to_string());
    let mut children: Vec<Proc> = (0..procs)
        .map(|i| {
            let who = format!("p{i}");
            Proc::spawn(
                worker,
                url,
                &[
                    "permit",
                    "--key",
                    &key,
                    "--permits",
                    &n_s,
                    "--iters",
                    &iters_s,
                    "--dir",
                    dir.path().to_str().unwrap(),
                    "--who",
                    &who,
                ],
            )
        })
        .collect();
    for (i, c) in children.iter_mut().enumerate() {
        assert_eq!(c.wait().await, 0, "worker {i} failed");
    }
    let mut all = Vec::new();
    let mut seen = 0;
    for slot in std::fs::read_dir(dir.path()).unwrap() {
        let slot = slot.unwrap().path();
        let report = crate::history::check_dir(&slot).unwrap();
        assert!(report.ok(), "{} not exclusive across processes: {report:#?}", slot.display());
        seen += report.intervals;
        let mut r = crate::history::Report::default();
        for f in std::fs::read_dir(&slot).unwrap() {
            let f = f.unwrap().path();
            all.extend(crate::history::parse("", &std::fs::read_to_string(&f).unwrap(), &mut r));
        }
        let name = slot.file_name().unwrap().to_string_lossy().into_owned();
        let s: u32 = name.trim_start_matches("slot").parse().unwrap();
        assert!(s < permits, "slot {s} of {permits}");
    }
    assert_eq!(seen, procs * iters);
    let mut ev: Vec<(i64, i32)> = all.iter().flat_map(|i| [(i.enter, 1), (i.exit, -1)]).collect();
    ev.sort();
    let (mut now, mut most) = (0, 0);
    for (_, d) in ev {
        now += d;
        most = most.max(now);
    }
    assert!(most as u32 <= permits, "{most} permit holders at once across processes");
}

/// What the stalled-holder scenario observed.
#[derive(Debug)]
pub struct StallReport {
    /// Whether the resumed holder's write was applied.
    pub stale_write_accepted: bool,
    /// What the holder printed about it.
    pub holder_said: String,
    /// What the holder's final release answered (`released false`: not ours any more).
    pub holder_released: String,
    /// The resource's final value.
    pub final_value: Option<String>,
    /// The holder's and the successor's fences.
    pub fences: (u64, u64),
}

/// The stalled holder (`docs/design.md` §1): a holder (a separate process) takes the lease with auto-renew, claims the
/// resource and writes; it is SIGSTOPped past its TTL; a successor acquires, claims and
/// writes; the holder is resumed and writes again. With `fenced`, every write is checked
/// against the fence table; without, none is (the control).
pub async fn stalled_holder(
    locker: &Locker,
    url: &str,
    worker: &Path,
    resource_spec: &str,
    fenced: bool,
) -> StallReport {
    let mut res = open_resource(resource_spec).await;
    let key = unique_key("stalled");
    let ttl = Duration::from_millis(1000);
    let mut holder = spawn_holder(worker, url, &key, ttl.as_millis() as u64, resource_spec, fenced);
    let ready = holder.line().await;
    let holder_fence: u64 = ready
        .strip_prefix("ready ")
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| panic!("holder said {ready:?}"));
    holder.stop();

    // The successor gets the key only once the store has expired the frozen holder's lease.
    let lease = locker
        .acquire(&key, Duration::from_secs(30))
        .wait(Wait::For(Duration::from_secs(30)))
        .await
        .expect("successor acquires after the frozen holder's lease expired");
    assert!(lease.fence().get() > holder_fence);
    let fencing = lease.fencing();
    if fenced {
        res.claim(&fencing).await.expect("successor claims");
    }
    res.write(fenced.then_some(&fencing), "successor").await.expect("successor writes");

    holder.cont();
    holder.send("write").await;
    let said = holder.line().await;
    let released = holder.line().await;
    assert_eq!(holder.wait().await, 0, "holder worker failed");
    let final_value = res.read().await;
    assert!(lease.release().await.unwrap().is_clean());
    StallReport {
        stale_write_accepted: said == "accepted",
        holder_said: said,
        holder_released: released,
        final_value,
        fences: (holder_fence, fencing.token().get()),
    }
}

/// A stale release (the old holder's, retried after a successor acquired), sent through the
/// same store and through a second store as another process would, answers not-owner and
/// leaves the successor's grant in place.
pub async fn stale_release_keeps_successor(locker: &Locker, url: &str) {
    let key = unique_key("stale-release");
    let a = locker.acquire(&key, Duration::from_secs(30)).await.unwrap();
    let a_owner = a.owner();
    assert!(a.release().await.unwrap().is_clean());
    let b = locker.acquire(&key, Duration::from_secs(30)).await.unwrap();
    assert!(!locker.release_by_owner(&key, &a_owner).await.unwrap());
    let other = Locker::connect(url).await.unwrap();
    assert!(!other.release_by_owner(&key, &a_owner).await.unwrap());
    let h = locker.holders(Some(&key)).await.unwrap();
    assert_eq!(h.iter().map(|h| h.owner).collect::<Vec<_>>(), vec![b.owner()]);
    assert_eq!(h[0].fence, Some(b.fence()));
    assert!(b.release().await.unwrap().is_clean());
}

/// Session stores: a frozen holder keeps its lock (nothing expires while the process lives),
/// and its death hands the lock over promptly.
pub async fn stalled_session_holder_keeps_lock(locker: &Locker, url: &str, worker: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let spec = format!("sqlite:{}", dir.path().join("resource.db").display());
    let key = unique_key("stalled-session");
    let mut holder = spawn_holder(worker, url, &key, 500, &spec, true);
    let ready = holder.line().await;
    assert!(ready.starts_with("ready "), "holder said {ready:?}");
    holder.stop();
    let r =
        locker.acquire(&key, Duration::from_secs(30)).wait(Wait::For(Duration::from_secs(2))).await;
    assert!(matches!(r, Err(Error::Busy { .. })), "a frozen session holder lost its lock: {r:?}");
    holder.kill().await;
    let lease = locker
        .acquire(&key, Duration::from_secs(30))
        .wait(Wait::For(Duration::from_secs(10)))
        .await
        .expect("the holder's death releases the lock");
    assert!(lease.release().await.unwrap().is_clean());
}

/// Session stores whose session lives on the server (etcd, ZooKeeper): a waiter frozen past
/// its session (`url` gives it a short one, `session`) held nothing, so on resuming it waits
/// on with a new session: it gets the key once the holder releases, with a larger fence. It
/// used to fail "store unavailable" (its queue place had gone with the session). A second
/// waiter frozen the same way, whose wait runs out while the key is still held, answers busy.
pub async fn waiter_frozen_past_its_session(
    locker: &Locker,
    url: &str,
    worker: &Path,
    session: Duration,
) {
    let key = unique_key("frozen-waiter");
    let holder = locker.acquire(&key, Duration::from_secs(30)).await.unwrap();
    let frozen = |wait_ms: &str| {
        let mut w = Proc::spawn(worker, url, &["wait", "--key", &key, "--wait-ms", wait_ms]);
        async move {
            assert_eq!(w.line().await, "waiting");
            // In the queue behind the holder, then frozen well past its session.
            tokio::time::sleep(Duration::from_secs(1)).await;
            w.stop();
            tokio::time::sleep(session * 2 + Duration::from_secs(2)).await;
            w.cont();
            w
        }
    };
    // Frozen, resumed, then the holder releases within its wait: it gets the key.
    let mut waiter = frozen("60000").await;
    tokio::time::sleep(session + Duration::from_secs(1)).await;
    let held = holder.fence().get();
    assert!(holder.release().await.unwrap().is_clean());
    let got = waiter.line().await;
    let fence: u64 = match got.strip_prefix("acquired ") {
        Some(f) => f.parse().unwrap(),
        None => panic!("a waiter resumed past its session said {got:?}, not acquired"),
    };
    assert!(fence > held, "fence {fence} after {held}");
    assert_eq!(waiter.line().await, "released true");
    assert_eq!(waiter.wait().await, 0);

    // Frozen, resumed, and its wait runs out with the key still held: busy, no error.
    let holder = locker.acquire(&key, Duration::from_secs(30)).await.unwrap();
    let wait = session * 2 + Duration::from_secs(6);
    let mut waiter = frozen(&wait.as_millis().to_string()).await;
    assert_eq!(waiter.line().await, "busy");
    assert_eq!(waiter.wait().await, 0);
    assert!(holder.release().await.unwrap().is_clean());
}

/// A process whose `main` returns `Err` from a `?` that dropped a lease (the `lh-exit`
/// binary, on a multi-threaded runtime, and on a current-thread one that follows the
/// documented `Locker::close` pattern) leaves the key free at once: no holder, and a one-shot
/// acquire gets it. Without `close`, a current-thread `main` leaves it held (what the docs
/// warn about: the runtime ends before the background release runs).
pub async fn exit_with_lease_releases(l: &Locker, url: &str, exit_bin: &Path) {
    let key = unique_key("exit-current-thread-no-close");
    let out = Command::new(exit_bin)
        .args([url, key.as_str(), "current-thread-no-close"])
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(30), out).await.expect("lh-exit").unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stdout).starts_with("held "));
    let held = l.acquire(&key, Duration::from_secs(30)).await;
    assert!(
        matches!(held, Err(leasehold::Error::Busy { .. })),
        "without close() a current-thread main is documented to leave the key held: {held:?}"
    );
    for flavor in ["multi-thread", "current-thread"] {
        let key = unique_key(&format!("exit-{flavor}"));
        let out =
            Command::new(exit_bin).args([url, key.as_str(), flavor]).kill_on_drop(true).output();
        let out = tokio::time::timeout(Duration::from_secs(30), out)
            .await
            .expect("lh-exit finished")
            .expect("lh-exit ran");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success() && stdout.starts_with("held "), "{flavor}: {out:?}");
        let h = l.holders(Some(&key)).await;
        assert!(
            matches!(&h, Ok(h) if h.is_empty()),
            "{flavor}: the key is still held after the process returned from main: {h:?}"
        );
        let again = l.acquire(&key, Duration::from_secs(30)).await;
        let again = again.unwrap_or_else(|e| panic!("{flavor}: not free at once: {e}"));
        assert!(again.release().await.unwrap().is_clean());
    }
}
