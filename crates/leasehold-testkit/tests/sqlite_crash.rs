//! Crash consistency of the embedded store (`docs/design.md` §4.2, "SQLite durability"):
//! processes killed with SIGKILL at random points of a loop that spends its time in the
//! store's write transactions (grant, renewal, release), many of them mid-commit, leave the
//! file consistent, exclusion intact and fences growing. A process crash loses no commit under
//! `synchronous=NORMAL` (the WAL frames are in the page cache once `write` returns); a power
//! loss can lose the last commits, which no test here can produce.

use std::path::Path;
use std::time::{Duration, Instant};

use leasehold_testkit::history::{self, Interval, monotonic_ns};
use leasehold_testkit::process::Proc;
use leasehold_testkit::torture;

/// Kills in one run.
const KILLS: usize = 12;
/// Workers looping on the key at any time.
const WORKERS: usize = 3;

/// A tiny xorshift generator: kill times and victims vary per run; the seed is printed, so
/// a failing run can be read against its kills.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn spawn(worker: &Path, url: &str, dir: &Path, resource: &Path, who: &str) -> Proc {
    let hist = dir.join(format!("{who}.hist"));
    Proc::spawn(
        worker,
        url,
        &[
            "fenced",
            "--key",
            "crash",
            "--ttl-ms",
            "400",
            "--resource",
            resource.to_str().unwrap(),
            "--history",
            hist.to_str().unwrap(),
            "--who",
            who,
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_commit_keeps_exclusion_and_fence_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("leases.db");
    let url = format!("sqlite://{}", db.display());
    let resource = dir.path().join("resource.db");
    torture::create(&resource).unwrap();
    let worker = Path::new(env!("CARGO_BIN_EXE_lh-worker"));
    let seed = (monotonic_ns() as u64) | 1;
    eprintln!("seed {seed}");
    let mut rng = Rng(seed);
    let mut procs: Vec<(String, Proc)> = (0..WORKERS)
        .map(|i| {
            let who = format!("p{i}");
            (who.clone(), spawn(worker, &url, dir.path(), &resource, &who))
        })
        .collect();
    // Who was killed, and a time after its death (CLOCK_MONOTONIC ns).
    let mut killed: Vec<(String, i64)> = Vec::new();
    for k in 0..KILLS {
        // Progress first: the key is not stuck behind anything a killed process left
        // (a dead holder's lease expires after its 400 ms ttl).
        let before = torture::effects(&resource).unwrap().len();
        let deadline = Instant::now() + Duration::from_secs(20);
        while torture::effects(&resource).unwrap().len() < before + 2 {
            assert!(Instant::now() < deadline, "no progress within 20 s after kill {k}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_micros(rng.next() % 30_000)).await;
        let i = (rng.next() % WORKERS as u64) as usize;
        let (who, mut p) = procs.remove(i);
        p.kill().await;
        killed.push((who, monotonic_ns()));
        let who = format!("p{i}k{k}");
        procs.insert(i, (who.clone(), spawn(worker, &url, dir.path(), &resource, &who)));
    }
    let before = torture::effects(&resource).unwrap().len();
    let deadline = Instant::now() + Duration::from_secs(20);
    while torture::effects(&resource).unwrap().len() < before + 4 {
        assert!(Instant::now() < deadline, "no progress within 20 s after the last kill");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for (who, p) in &mut procs {
        p.send("stop").await;
        let done = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                if p.line().await.starts_with("done ") {
                    return;
                }
            }
        })
        .await;
        assert!(done.is_ok(), "{who} did not finish within 30 s of stop");
        assert_eq!(p.wait().await, 0, "{who} did not exit cleanly");
    }

    // The holders' own critical sections: a killed holder's ends at its death at the latest.
    let mut report = history::Report::default();
    let mut all: Vec<Interval> = Vec::new();
    let mut max_fence = 0;
    let mut holders_killed = 0;
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "hist") {
            continue;
        }
        let who = p.file_stem().unwrap().to_string_lossy().into_owned();
        let mut text = std::fs::read_to_string(&p).unwrap();
        // A write cut by the kill leaves a partial last line.
        if !text.is_empty() && !text.ends_with('\n') {
            text.truncate(text.rfind('\n').map_or(0, |n| n + 1));
        }
        if let Some((_, t)) = killed.iter().find(|(w, _)| *w == who) {
            let last = text.lines().last().unwrap_or("");
            if let ["enter", _, fence] = last.split(' ').collect::<Vec<_>>()[..] {
                text.push_str(&format!("exit {t} {fence}\n"));
                holders_killed += 1;
            }
        }
        for iv in history::parse(&who, &text, &mut report) {
            max_fence = max_fence.max(iv.fence);
            all.push(iv);
        }
    }
    let report = history::check(all, report);
    eprintln!("{} kills, {holders_killed} of them while holding", killed.len());
    assert!(report.intervals > KILLS, "{report:?}");
    assert!(report.ok(), "exclusion or fence order broken by the kills: {report:#?}");

    // The resource's commit order: no two holders' effects interleave, fences increase.
    let effects = torture::effects(&resource).unwrap();
    let mut runs: Vec<Interval> = Vec::new();
    for e in &effects {
        match runs.last_mut() {
            Some(last) if last.who == e.owner => last.exit = e.t_ns,
            _ => runs.push(Interval {
                who: e.owner.clone(),
                enter: e.t_ns,
                exit: e.t_ns,
                fence: e.fence,
            }),
        }
    }
    let by_holder = history::check(runs, history::Report::default());
    assert!(by_holder.ok(), "accepted effects interleaved or out of fence order: {by_holder:#?}");

    // The file is intact, and the next grant's fence is above every fence handed out.
    let c = torture::open(&db).unwrap();
    let ok: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(ok, "ok");
    drop(c);
    let l = leasehold::Locker::connect(&url).await.unwrap();
    let lease = l
        .acquire("crash", Duration::from_secs(5))
        .wait(leasehold::Wait::For(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(lease.fence().get() > max_fence, "{} after {max_fence}", lease.fence());
    assert!(lease.release().await.unwrap().is_clean());
}
