//! Overlap checks through store failures: several `lh-worker fenced` processes loop acquire →
//! two fenced effects on one shared resource → release, on one key, while the test fails the
//! store over; then the recorded history is checked.
//!
//! The resource is an SQLite file: leasehold's fence table, a counter, and a log of every
//! effect it accepted (`effects`: fence, owner, worker, `CLOCK_MONOTONIC` time), written in
//! the same `BEGIN IMMEDIATE` transaction as the fence check and the counter's
//! read-modify-write, so the log is the resource's own commit order. [`Report::assert_safe`]
//! reads it strictly:
//! - the effects, taken per holder (a run of one owner's effects) as intervals, pass the
//!   history checker: no two holders' accepted effects interleave, and their fences increase
//!   in commit order, across every failover;
//! - the counter equals the number of logged effects (no lost update);
//! - the holders' own critical sections (acquire → release, recorded by each worker) have
//!   fences increasing in time order, except between two that overlapped: a second holder,
//!   which a store whose failover can lose a grant may admit, is counted, not refused.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use leasehold::fence::Fencing;
use leasehold::fence::sqlite::{self, rusqlite};
use rusqlite::{Connection, TransactionBehavior, params};

use crate::history::{self, Interval, monotonic_ns};
use crate::process::Proc;

/// The resource's name in its fence table.
pub const RESOURCE: &str = "torture";

/// Opens the resource file (it must exist: [`create`]), waiting up to 10 s for its lock.
pub fn open(path: &Path) -> rusqlite::Result<Connection> {
    let db = Connection::open(path)?;
    db.busy_timeout(Duration::from_secs(10))?;
    Ok(db)
}

/// Creates the resource: the fence table, the counter at 0, the empty log.
pub fn create(path: &Path) -> leasehold::Result<()> {
    let db = open(path).map_err(sql)?;
    sqlite::install(&db)?;
    db.execute_batch(
        "CREATE TABLE effects (seq INTEGER PRIMARY KEY AUTOINCREMENT, fence INTEGER NOT NULL,
           owner TEXT NOT NULL, who TEXT NOT NULL, t_ns INTEGER NOT NULL);
         CREATE TABLE counter (id INTEGER PRIMARY KEY CHECK (id = 0), n INTEGER NOT NULL);
         INSERT INTO counter VALUES (0, 0);",
    )
    .map_err(sql)
}

fn sql(e: rusqlite::Error) -> leasehold::Error {
    leasehold::Error::Backend { backend: "sqlite", message: e.to_string(), source: Some(e.into()) }
}

/// One fenced effect of worker `who`: claim (idempotent for the same grant) and check
/// `fencing`, bump the counter and log the effect, in one transaction.
/// [`leasehold::Error::StaleFence`] when a newer grant has claimed the resource.
pub fn effect(db: &mut Connection, fencing: &Fencing, who: &str) -> leasehold::Result<()> {
    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
    sqlite::claim(&tx, RESOURCE, fencing)?;
    sqlite::check(&tx, RESOURCE, fencing)?;
    let n: i64 =
        tx.query_row("SELECT n FROM counter WHERE id = 0", [], |r| r.get(0)).map_err(sql)?;
    tx.execute("UPDATE counter SET n = ?1 WHERE id = 0", [n + 1]).map_err(sql)?;
    let fence = fencing.token().as_i64();
    tx.execute(
        "INSERT INTO effects (fence, owner, who, t_ns) VALUES (?1, ?2, ?3, ?4)",
        params![fence, fencing.owner().to_string(), who, monotonic_ns()],
    )
    .map_err(sql)?;
    sqlite::commit(tx, fencing)
}

/// An effect the resource accepted, from its log.
#[derive(Debug, Clone)]
pub struct Effect {
    /// Its place in the commit order.
    pub seq: i64,
    /// The fence it presented.
    pub fence: u64,
    /// The grant's owner token.
    pub owner: String,
    /// The worker.
    pub who: String,
    /// When it was applied (inside its transaction), `CLOCK_MONOTONIC` ns.
    pub t_ns: i64,
}

/// The log, in commit order.
pub fn effects(path: &Path) -> rusqlite::Result<Vec<Effect>> {
    let db = open(path)?;
    let mut st = db.prepare("SELECT seq, fence, owner, who, t_ns FROM effects ORDER BY seq")?;
    let rows = st.query_map([], |r| {
        Ok(Effect {
            seq: r.get(0)?,
            fence: r.get::<_, i64>(1)? as u64,
            owner: r.get(2)?,
            who: r.get(3)?,
            t_ns: r.get(4)?,
        })
    })?;
    rows.collect()
}

/// What a worker counted (its `done` line).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Grants it got.
    pub holds: u64,
    /// Its effects the resource accepted.
    pub effects: u64,
    /// Its effects the resource refused (stale fence).
    pub refused: u64,
    /// Holds whose lease was lost by their end.
    pub lost: u64,
    /// Releases that found the grant no longer its own (it may have overlapped a successor).
    pub overlapped: u64,
    /// Acquires or releases whose outcome was unknown.
    pub unknown: u64,
    /// Acquires that failed (no primary for a while, say).
    pub acquire_errors: u64,
    /// Acquires that found the key held for their whole wait.
    pub busy: u64,
    /// Releases that failed.
    pub release_errors: u64,
}

impl Counts {
    const NAMES: [&'static str; 9] = [
        "holds",
        "effects",
        "refused",
        "lost",
        "overlapped",
        "unknown",
        "acquire_errors",
        "busy",
        "release_errors",
    ];

    fn fields(&mut self) -> [&mut u64; 9] {
        [
            &mut self.holds,
            &mut self.effects,
            &mut self.refused,
            &mut self.lost,
            &mut self.overlapped,
            &mut self.unknown,
            &mut self.acquire_errors,
            &mut self.busy,
            &mut self.release_errors,
        ]
    }

    /// Parses a `done` line's counts (`holds=3 effects=6 …`).
    pub fn parse(s: &str) -> Option<Counts> {
        let mut c = Counts::default();
        let mut seen = 0;
        for pair in s.split_whitespace() {
            let (k, v) = pair.split_once('=')?;
            let i = Self::NAMES.iter().position(|n| *n == k)?;
            *c.fields()[i] = v.parse().ok()?;
            seen += 1;
        }
        (seen == Self::NAMES.len()).then_some(c)
    }
}

impl std::ops::Add for Counts {
    type Output = Counts;
    fn add(mut self, mut o: Counts) -> Counts {
        for (a, b) in self.fields().into_iter().zip(o.fields()) {
            *a += *b;
        }
        self
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut c = *self;
        let parts: Vec<String> =
            Self::NAMES.iter().zip(c.fields()).map(|(n, v)| format!("{n}={v}")).collect();
        f.write_str(&parts.join(" "))
    }
}

/// The workers of one run, their resource and their histories.
pub struct Workers {
    procs: Vec<Proc>,
    dir: tempfile::TempDir,
}

impl Workers {
    /// Starts `n` `lh-worker fenced` processes (`p0`, `p1`, …) on `key` through `url`, with
    /// leases of `ttl`, on a fresh resource.
    pub fn start(worker: &Path, url: &str, key: &str, n: usize, ttl: Duration) -> Workers {
        let dir = tempfile::tempdir().expect("temp dir");
        let resource = dir.path().join("resource.db");
        create(&resource).expect("create the resource");
        let ttl_ms = ttl.as_millis().to_string();
        let procs = (0..n)
            .map(|i| {
                let hist = dir.path().join(format!("p{i}.hist"));
                Proc::spawn(
                    worker,
                    url,
                    &[
                        "fenced",
                        "--key",
                        key,
                        "--ttl-ms",
                        &ttl_ms,
                        "--resource",
                        resource.to_str().unwrap(),
                        "--history",
                        hist.to_str().unwrap(),
                        "--who",
                        &format!("p{i}"),
                    ],
                )
            })
            .collect();
        Workers { procs, dir }
    }

    /// The resource file.
    pub fn resource(&self) -> PathBuf {
        self.dir.path().join("resource.db")
    }

    /// The effects logged so far.
    pub fn effects(&self) -> Vec<Effect> {
        effects(&self.resource()).expect("read the effects log")
    }

    /// Waits (bounded by `limit`, panicking after it naming `what`) until the log has an
    /// effect `pred` accepts; that effect.
    pub async fn wait_for(
        &self,
        what: &str,
        limit: Duration,
        pred: impl Fn(&Effect) -> bool,
    ) -> Effect {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(e) = self.effects().into_iter().find(|e| pred(e)) {
                return e;
            }
            assert!(Instant::now() < deadline, "no effect {what} within {limit:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits (bounded) until `more` effects were logged after the `since`-th.
    pub async fn wait_effects(&self, since: usize, more: usize, limit: Duration) -> usize {
        let what = format!("number {} (after {since})", since + more);
        let e = self.wait_for(&what, limit, |e| e.seq as usize >= since + more).await;
        e.seq as usize
    }

    /// Sends `line` to worker `i`.
    pub async fn send(&mut self, i: usize, line: &str) {
        self.procs[i].send(line).await;
    }

    /// The next line worker `i` prints (bounded).
    pub async fn line(&mut self, i: usize) -> String {
        self.procs[i].line().await
    }

    /// Freezes worker `i` (SIGSTOP) for `pause`, then resumes it: a GC pause or a VM
    /// migration, in whatever it was doing (waiting, holding, releasing).
    pub async fn freeze(&self, i: usize, pause: Duration) {
        self.procs[i].stop();
        tokio::time::sleep(pause).await;
        self.procs[i].cont();
    }

    /// Tells every worker to stop, waits (bounded by `limit` each: a worker that does not
    /// finish is a hang) for their `done` lines and exits, and checks the history.
    pub async fn stop(mut self, limit: Duration) -> Report {
        for p in &mut self.procs {
            p.send("stop").await;
        }
        let mut counts = Vec::new();
        for (i, p) in self.procs.iter_mut().enumerate() {
            let done = tokio::time::timeout(limit, async {
                loop {
                    let l = p.line().await;
                    if let Some(rest) = l.strip_prefix("done ") {
                        return rest.to_owned();
                    }
                }
            })
            .await
            .unwrap_or_else(|_| panic!("worker p{i} did not finish within {limit:?} of stop"));
            let code = tokio::time::timeout(limit, p.wait()).await;
            assert_eq!(code.ok(), Some(0), "worker p{i} did not exit cleanly");
            counts.push(Counts::parse(&done).unwrap_or_else(|| panic!("p{i} said {done:?}")));
        }
        let effects = self.effects();
        let db = open(&self.resource()).unwrap();
        let counter: i64 = db.query_row("SELECT n FROM counter", [], |r| r.get(0)).unwrap();
        let mut intervals: Vec<Interval> = Vec::new();
        for e in &effects {
            match intervals.last_mut() {
                Some(last) if last.who == e.owner => last.exit = e.t_ns,
                _ => intervals.push(Interval {
                    who: e.owner.clone(),
                    enter: e.t_ns,
                    exit: e.t_ns,
                    fence: e.fence,
                }),
            }
        }
        let by_holder = history::check(intervals, history::Report::default());
        let holds = history::check_dir(self.dir.path()).expect("read the holders' histories");
        Report { counts, effects, counter, by_holder, holds }
    }
}

/// Session stores whose session lives on the server (etcd, ZooKeeper; `url` asks for a
/// short one, `session`): three workers loop on one key while each in turn is frozen past its
/// session, holding or (mostly, two of three being behind the holder) waiting. A frozen holder
/// loses its grant, and its late effect is refused; a frozen waiter held nothing and waits on
/// with a new session. So: the history is safe, and no acquire failed (before, every waiter
/// resumed past its session failed "store unavailable"); one may find the key busy for its
/// whole wait (frozen itself, then behind a frozen holder), as `run` may answer 75.
pub async fn frozen_past_sessions(worker: &Path, url: &str, key: &str, session: Duration) {
    let w = Workers::start(worker, url, key, 3, Duration::from_secs(10));
    let t = Duration::from_secs(60);
    let mut seen = w.wait_effects(0, 6, t).await;
    for round in 0..3 {
        w.freeze(round % 3, session + session / 2 + Duration::from_secs(1)).await;
        seen = w.wait_effects(seen, 6, t).await;
    }
    let report = w.stop(t).await;
    report.assert_safe();
    let total = report.total();
    assert_eq!(total.acquire_errors, 0, "an acquire failed though the store was up: {total}");
    assert_eq!(total.release_errors, 0, "{total}");
}

/// What a run recorded.
#[derive(Debug)]
pub struct Report {
    /// Each worker's counts.
    pub counts: Vec<Counts>,
    /// The effects the resource accepted, in commit order.
    pub effects: Vec<Effect>,
    /// The resource's counter.
    pub counter: i64,
    /// The accepted effects per holder, as checked by the history checker.
    pub by_holder: history::Report,
    /// The holders' critical sections (acquire → release), as checked by it.
    pub holds: history::Report,
}

impl Report {
    /// The workers' counts summed.
    pub fn total(&self) -> Counts {
        self.counts.iter().fold(Counts::default(), |a, b| a + *b)
    }

    /// Asserts what a fenced resource must show whatever the store's failover did (see the
    /// module doc).
    #[track_caller]
    pub fn assert_safe(&self) {
        let r = &self.by_holder;
        assert!(r.ok(), "accepted effects interleaved or out of fence order: {r:#?}");
        assert_eq!(self.counter as usize, self.effects.len(), "lost updates on the counter");
        let total = self.total();
        assert_eq!(total.effects as usize, self.effects.len(), "{total}");
        let h = &self.holds;
        assert!(h.malformed.is_empty(), "{:?}", h.malformed);
        assert_eq!(h.intervals as u64, total.holds, "{total}");
        for inv in &h.fence_inversions {
            assert!(
                h.overlaps.contains(inv),
                "fences went back between two holds that did not overlap: {inv:?}"
            );
        }
    }
}
