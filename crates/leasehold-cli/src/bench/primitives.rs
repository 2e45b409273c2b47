//! One task on one store: the mutex, a permit of a 3-permit semaphore and a reader, each an
//! acquire + release of a free key, interleaved in the same run; a primitive the store
//! refuses is skipped with the store's reason.

use super::{
    BenchResult, Contender, Leasehold, Progress, RunResult, SLICES, Settings, TTL, Tally, cycles,
    median, per_run_ratios, report, unique,
};
use leasehold::{Locker, Wait};
use std::time::Duration;

/// The semaphore's number of permits.
const PERMITS: u32 = 3;

fn wait_of(wait: Duration) -> Wait {
    if wait.is_zero() { Wait::No } else { Wait::For(wait) }
}

/// A clean release, or why not.
fn released(r: leasehold::Result<leasehold::Released>) -> BenchResult<()> {
    match r {
        Ok(leasehold::Released::Clean) => Ok(()),
        Ok(leasehold::Released::MayHaveOverlapped) => {
            Err("release found the grant not ours".into())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// One permit of a semaphore of [`PERMITS`] on the key.
#[derive(Clone)]
struct PermitOf(Locker);

impl Contender for PermitOf {
    type Guard = leasehold::Permit;
    async fn acquire(&self, key: &str, wait: Duration) -> BenchResult<Option<Self::Guard>> {
        match self.0.acquire_permit(key, PERMITS, TTL).wait(wait_of(wait)).await {
            Ok(p) => Ok(Some(p)),
            Err(leasehold::Error::Busy { .. }) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }
    async fn release(&self, p: Self::Guard) -> BenchResult<()> {
        released(p.release().await)
    }
}

/// A reader's (shared) grant of the key.
#[derive(Clone)]
struct Reader(Locker);

impl Contender for Reader {
    type Guard = leasehold::Lease;
    async fn acquire(&self, key: &str, wait: Duration) -> BenchResult<Option<Self::Guard>> {
        match self.0.acquire_shared(key, TTL).wait(wait_of(wait)).await {
            Ok(l) => Ok(Some(l)),
            Err(leasehold::Error::Busy { .. }) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }
    async fn release(&self, l: Self::Guard) -> BenchResult<()> {
        released(l.release().await)
    }
}

/// Which primitive a contender of this scenario is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Prim {
    Mutex,
    Permit,
    Reader,
}

impl Prim {
    const ALL: [Prim; 3] = [Prim::Mutex, Prim::Permit, Prim::Reader];

    fn label(self) -> &'static str {
        match self {
            Prim::Mutex => "leasehold mutex: acquire + release of a free key",
            Prim::Permit => "leasehold semaphore of 3: acquire_permit + release, all permits free",
            Prim::Reader => "leasehold reader: acquire_shared + release of a free key",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Prim::Mutex => "mutex",
            Prim::Permit => "semaphore (3 permits)",
            Prim::Reader => "reader (shared grant)",
        }
    }

    /// The key this primitive cycles on in a run keyed `key` (each its own).
    fn key(self, key: &str) -> String {
        match self {
            Prim::Mutex => key.to_owned(),
            Prim::Permit => format!("{key}:sem"),
            Prim::Reader => format!("{key}:rw"),
        }
    }

    async fn cycles(self, locker: &Locker, key: &str, d: Duration) -> BenchResult<RunResult> {
        let key = self.key(key);
        match self {
            Prim::Mutex => cycles(&Leasehold(locker.clone()), &key, d).await,
            Prim::Permit => cycles(&PermitOf(locker.clone()), &key, d).await,
            Prim::Reader => cycles(&Reader(locker.clone()), &key, d).await,
        }
    }
}

pub(super) async fn primitives(
    s: &Settings,
    locker: &Locker,
    p: &Progress,
) -> BenchResult<report::Primitives> {
    // Warm up each primitive once; the store's refusal (`Unsupported`) skips it.
    let warm = Duration::from_millis(200);
    let (mut ran, mut skipped) = (Vec::new(), Vec::new());
    for prim in Prim::ALL {
        match prim.cycles(locker, &unique("warm"), warm).await {
            Ok(_) => ran.push(prim),
            Err(e) if prim != Prim::Mutex && refused(locker, prim) => {
                skipped.push(report::Skipped { primitive: prim.name(), reason: e })
            }
            Err(e) => return Err(e),
        }
    }
    let mut tallies: Vec<Tally> = ran.iter().map(|_| Tally::default()).collect();
    let n = ran.len();
    for run in 0..s.runs {
        p.step(format!("primitives run {}/{}", run + 1, s.runs));
        let key = unique("prim");
        let mut acc: Vec<RunResult> = (0..n).map(|_| RunResult::default()).collect();
        let slice = s.duration / SLICES;
        // Take turns in slices, rotating who goes first by slice and by run.
        for i in 0..SLICES as usize {
            for turn in 0..n {
                let who = (turn + i + run) % n;
                acc[who].merge(ran[who].cycles(locker, &key, slice).await?);
            }
        }
        for (t, r) in tallies.iter_mut().zip(acc) {
            t.add(r);
        }
    }
    let mutex = &tallies[0];
    let ratio = |prim: Prim| {
        let t = &tallies[ran.iter().position(|p| *p == prim)?];
        let per_run = per_run_ratios(&mutex.per_run, &t.per_run);
        Some((median(per_run.clone()), per_run))
    };
    let (permit, reader) = (ratio(Prim::Permit), ratio(Prim::Reader));
    Ok(report::Primitives {
        what: "one task: mutex, a permit of a semaphore of 3, a reader, each acquire + release of a free key, interleaved in the same run",
        contenders: ran.iter().zip(&tallies).map(|(p, t)| t.row(p.label())).collect(),
        skipped,
        permit_time_per_cycle_vs_mutex: permit.as_ref().map(|r| r.0),
        per_run_ratios_permit: permit.map(|r| r.1),
        reader_time_per_cycle_vs_mutex: reader.as_ref().map(|r| r.0),
        per_run_ratios_reader: reader.map(|r| r.1),
    })
}

/// Whether the store says it cannot hold `prim` (its guarantees), so that its error is its
/// refusal rather than a failure.
fn refused(locker: &Locker, prim: Prim) -> bool {
    let p = locker.guarantees().primitives;
    match prim {
        Prim::Mutex => false,
        Prim::Permit => !p.permits,
        Prim::Reader => !p.shared,
    }
}
