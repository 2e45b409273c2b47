//! One task on one store: the mutex, a permit of a 3-permit semaphore and a reader, each an
//! acquire + release of a free key, interleaved in the same run; a primitive the store
//! refuses is skipped with the store's reason. Where the store's kit has a peer crate's three
//! ([`leasehold_harness::stores::StoreKit::primitive_peer`], a build feature), they take turns
//! in the same slices, and each leasehold primitive's time per cycle is paired with the peer's.

use super::{
    BenchResult, Contender, KitRaw, Leasehold, Progress, RunResult, SLICES, Settings, TTL, Tally,
    counted, cycles, median, per_run_ratios, report, unique,
};
use leasehold::{Locker, Wait};
use leasehold_harness::baseline::{PeerPrimitive, PrimitivePeer, ServerView};
use std::time::Duration;

/// The semaphore's number of permits.
pub(super) const PERMITS: u32 = 3;

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
}

/// Who runs a primitive: leasehold, or the peer crate.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Leasehold,
    /// The store kit's peer crate.
    Peer,
}

/// One contender of this scenario.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Who {
    prim: Prim,
    side: Side,
}

impl Who {
    /// The peer's primitive of this contender's kind.
    fn of(self, peer: &PrimitivePeer) -> &PeerPrimitive {
        match self.prim {
            Prim::Mutex => &peer.mutex,
            Prim::Permit => &peer.permit,
            Prim::Reader => &peer.reader,
        }
    }

    fn label(self, peer: Option<&PrimitivePeer>) -> String {
        match (self.side, peer) {
            (Side::Peer, Some(p)) => self.of(p).label.clone(),
            _ => self.prim.label().to_owned(),
        }
    }

    /// The requests this contender's client sends, by the names the server counts them by.
    fn requests(
        self,
        view: &dyn ServerView,
        peer: Option<&PrimitivePeer>,
    ) -> &'static [&'static str] {
        match (self.side, peer) {
            (Side::Peer, Some(p)) => self.of(p).requests,
            _ => view.leasehold_requests(),
        }
    }

    /// Back-to-back cycles for `d` on this contender's own key of a run keyed `key`.
    async fn cycles(
        self,
        locker: &Locker,
        peer: Option<&PrimitivePeer>,
        key: &str,
        d: Duration,
    ) -> BenchResult<RunResult> {
        let key = self.prim.key(key);
        match self.side {
            Side::Leasehold => match self.prim {
                Prim::Mutex => cycles(&Leasehold(locker.clone()), &key, d).await,
                Prim::Permit => cycles(&PermitOf(locker.clone()), &key, d).await,
                Prim::Reader => cycles(&Reader(locker.clone()), &key, d).await,
            },
            Side::Peer => {
                let p = peer.ok_or("no peer crate on this store")?;
                cycles(&KitRaw(self.of(p).client.clone()), &format!("{key}:dl"), d).await
            }
        }
    }

    /// [`Self::cycles`], with the client requests the server counted meanwhile where it
    /// counts them.
    async fn counted(
        self,
        locker: &Locker,
        peer: Option<&PrimitivePeer>,
        view: Option<&dyn ServerView>,
        key: &str,
        d: Duration,
    ) -> BenchResult<RunResult> {
        let Some(v) = view else { return self.cycles(locker, peer, key, d).await };
        let (mut res, c) =
            counted(v, self.requests(v, peer), self.cycles(locker, peer, key, d)).await?;
        res.commands = Some(c.calls);
        Ok(res)
    }
}

pub(super) async fn primitives(
    s: &Settings,
    locker: &Locker,
    view: Option<&dyn ServerView>,
    peer: Option<&PrimitivePeer>,
    p: &Progress,
) -> BenchResult<report::Primitives> {
    // Warm up each primitive once; the store's refusal (`Unsupported`) skips it.
    let warm = Duration::from_millis(200);
    let (mut ran, mut skipped) = (Vec::new(), Vec::new());
    for prim in Prim::ALL {
        let who = Who { prim, side: Side::Leasehold };
        match who.cycles(locker, None, &unique("warm"), warm).await {
            Ok(_) => ran.push(who),
            Err(e) if prim != Prim::Mutex && refused(locker, prim) => {
                skipped.push(report::Skipped { primitive: prim.name(), reason: e })
            }
            Err(e) => return Err(e),
        }
    }
    if peer.is_some() {
        for prim in Prim::ALL {
            let who = Who { prim, side: Side::Peer };
            who.cycles(locker, peer, &unique("warm"), warm).await?;
            ran.push(who);
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
                let res = ran[who].counted(locker, peer, view, &key, slice).await?;
                acc[who].merge(res);
            }
        }
        for (t, r) in tallies.iter_mut().zip(acc) {
            t.add(r);
        }
    }
    let tally = |prim: Prim, side: Side| {
        ran.iter().position(|w| *w == Who { prim, side }).map(|i| &tallies[i])
    };
    let mutex = tally(Prim::Mutex, Side::Leasehold).expect("the mutex always runs");
    let ratio = |prim: Prim| {
        let t = tally(prim, Side::Leasehold)?;
        let per_run = per_run_ratios(&mutex.per_run, &t.per_run);
        Some((median(per_run.clone()), per_run))
    };
    let (permit, reader) = (ratio(Prim::Permit), ratio(Prim::Reader));
    // leasehold's time per cycle over the peer's, primitive by primitive, run by run.
    let vs_peer = Prim::ALL
        .into_iter()
        .filter_map(|prim| {
            let (lh, peer) = (tally(prim, Side::Leasehold)?, tally(prim, Side::Peer)?);
            let per_run = per_run_ratios(&peer.per_run, &lh.per_run);
            Some(report::Ratio { baseline: prim.name(), median: median(per_run.clone()), per_run })
        })
        .collect();
    Ok(report::Primitives {
        what: "one task: mutex, a permit of a semaphore of 3, a reader, each acquire + release of a free key, interleaved in the same run",
        contenders: ran.iter().zip(&tallies).map(|(w, t)| t.row(&w.label(peer))).collect(),
        skipped,
        permit_time_per_cycle_vs_mutex: permit.as_ref().map(|r| r.0),
        per_run_ratios_permit: permit.map(|r| r.1),
        reader_time_per_cycle_vs_mutex: reader.as_ref().map(|r| r.0),
        per_run_ratios_reader: reader.map(|r| r.1),
        peer: peer.map(|p| p.name),
        leasehold_time_per_cycle_vs_peer: vs_peer,
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
