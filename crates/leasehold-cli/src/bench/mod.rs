//! `leasehold bench`: leasehold measured side by side with a baseline in the same run.
//!
//! Every scenario runs `--runs` times; within a run the contenders alternate order, and the
//! figures reported are medians over runs (throughput) and percentiles over all samples
//! (latency). Ratios compare contenders measured in the same run, never absolute times.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use leasehold::{Locker, OwnerToken, Wait};

// Every store's baselines, counters and peers come from its kit in the harness
// (`leasehold_harness::stores::kit`): no scenario names a store.
mod family;
mod handoff;
mod hold_many;
mod many_keys;
mod plots;
mod primitives;
mod report;
mod scale;
mod table;
mod uncontended;

use leasehold_harness::baseline::{Requests, ServerView};
pub use plots::bench_plots;
pub use report::Report;

/// A store against a reference store of the same family in the same run
/// ([`family::compare`]): its figures as JSON and their text table.
pub async fn compare_with_reference(
    s: Settings,
    reference: &leasehold::StoreUrl,
) -> Result<(String, String), String> {
    let progress = Progress::new((s.runs) as u64);
    let c = family::compare(&s, reference, &progress).await?;
    progress.0.finish_and_clear();
    let json = serde_json::to_string_pretty(&c).map_err(|e| e.to_string())?;
    Ok((json, family::table(&c)))
}
pub use table::table;

pub use crate::scenarios::BenchScenario as Scenario;

/// Settings of one bench invocation.
#[derive(Debug, Clone)]
pub struct Settings {
    pub url: leasehold::StoreUrl,
    pub scenario: Scenario,
    pub tasks: usize,
    pub duration: Duration,
    pub runs: usize,
    pub leases: usize,
    /// The tokio runtime everything runs on.
    pub runtime: &'static str,
}

const TTL: Duration = Duration::from_secs(30);

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

fn us(d: Duration) -> u64 {
    (d.as_micros() as u64).clamp(1, 60_000_000)
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 { v[m] } else { (v[m - 1] + v[m]) / 2.0 }
}

/// Latency summary in microseconds; `None` for no samples.
fn pct(h: &Histogram<u64>) -> Option<report::Percentiles> {
    (!h.is_empty()).then(|| report::Percentiles {
        p50: h.value_at_quantile(0.5),
        p90: h.value_at_quantile(0.9),
        p99: h.value_at_quantile(0.99),
        p99_9: h.value_at_quantile(0.999),
        max: h.max(),
        samples: h.len(),
    })
}

/// `x` rounded to `places` decimals.
fn round_to(x: f64, places: i32) -> f64 {
    let m = 10f64.powi(places);
    (x * m).round() / m
}

/// Run by run, a baseline's cycles/s over leasehold's (leasehold's time per cycle over the
/// baseline's), to three decimals.
fn per_run_ratios(baseline: &[f64], leasehold: &[f64]) -> Vec<f64> {
    baseline.iter().zip(leasehold).map(|(b, l)| round_to(b / l, 3)).collect()
}

/// One contender's results over all runs of a scenario.
#[derive(Default)]
struct Tally {
    per_run: Vec<f64>,
    handoffs_per_run: Vec<f64>,
    acquire: Option<Histogram<u64>>,
    release: Option<Histogram<u64>>,
    handoff: Option<Histogram<u64>>,
    commands_per_acq: Vec<f64>,
}

impl Tally {
    fn add(&mut self, r: RunResult) {
        self.per_run.push(r.ops as f64 / r.elapsed.as_secs_f64());
        if let Some(h) = r.handoffs {
            self.handoffs_per_run.push(h as f64 / r.elapsed.as_secs_f64());
        }
        merge_hists(
            [&mut self.acquire, &mut self.release, &mut self.handoff],
            [r.acquire, r.release, r.handoff],
        );
        if let Some(c) = r.commands {
            self.commands_per_acq.push(c as f64 / r.ops.max(1) as f64);
        }
    }

    /// The report's row for this contender.
    fn row(&self, name: &str) -> report::Row {
        let handoffs = !self.handoffs_per_run.is_empty();
        report::Row {
            handoffs_per_s_median: handoffs.then(|| median(self.handoffs_per_run.clone()).round()),
            handoffs_per_s_runs: handoffs
                .then(|| self.handoffs_per_run.iter().map(|v| v.round()).collect()),
            acquire_us: self.acquire.as_ref().and_then(pct),
            release_us: self.release.as_ref().and_then(pct),
            handoff_us: self.handoff.as_ref().and_then(pct),
            store_commands_per_acquisition: (!self.commands_per_acq.is_empty())
                .then(|| round_to(median(self.commands_per_acq.clone()), 2)),
            ..report::Row::throughput(name, &self.per_run)
        }
    }
}

#[derive(Default)]
struct RunResult {
    ops: u64,
    /// Acquisitions by a different task than the previous holder (handoff scenario).
    handoffs: Option<u64>,
    elapsed: Duration,
    acquire: Option<Histogram<u64>>,
    release: Option<Histogram<u64>>,
    handoff: Option<Histogram<u64>>,
    /// Store requests the server counted during the run (its kit's [`ServerView`]), if known.
    commands: Option<u64>,
}

impl RunResult {
    /// Adds another slice of the same contender's run.
    fn merge(&mut self, o: RunResult) {
        self.ops += o.ops;
        self.elapsed += o.elapsed;
        if let Some(h) = o.handoffs {
            *self.handoffs.get_or_insert(0) += h;
        }
        if let Some(c) = o.commands {
            *self.commands.get_or_insert(0) += c;
        }
        merge_hists(
            [&mut self.acquire, &mut self.release, &mut self.handoff],
            [o.acquire, o.release, o.handoff],
        );
    }
}

/// Runs `f` and returns its output with the requests named `names` that the server `view`
/// counted meanwhile.
async fn counted<T>(
    view: &dyn ServerView,
    names: &[&str],
    f: impl Future<Output = BenchResult<T>>,
) -> BenchResult<(T, Requests)> {
    let before = view.requests(names).await?;
    let out = f.await?;
    Ok((out, view.requests(names).await?.since(before)))
}

/// Adds each histogram of `theirs` into the one of `mine` at the same place.
fn merge_hists<const N: usize>(
    mine: [&mut Option<Histogram<u64>>; N],
    theirs: [Option<Histogram<u64>>; N],
) {
    for (m, t) in mine.into_iter().zip(theirs) {
        match (m.as_mut(), t) {
            (Some(m), Some(t)) => m.add(t).expect("same bounds"),
            (None, Some(t)) => *m = Some(t),
            _ => {}
        }
    }
}

/// In-process contenders of one run take turns in this many slices of the run's duration
/// (rotating who goes first), so a change in the machine's load hits them alike rather than
/// whichever contender's block it fell in.
const SLICES: u32 = 10;

type BenchResult<T> = Result<T, String>;

/// Progress on stderr (drawn only on a terminal).
struct Progress(indicatif::ProgressBar);

impl Progress {
    fn new(total: u64) -> Self {
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Progress(bar)
    }
    fn step(&self, msg: String) {
        self.0.set_message(msg);
        self.0.inc(1);
    }
}

/// Runs the bench; returns its report.
pub async fn run(s: Settings) -> BenchResult<Report> {
    let locker = connect(&s.url).await?;
    let scheme = s.url.scheme();
    let kit = leasehold_harness::stores::kit(scheme);
    // What the bench can read of the store's server (version, request counters), if its kit
    // can read anything.
    let view = kit.server_view(&s.url).await?;
    let view = view.as_deref();
    let all = s.scenario == Scenario::All;
    let want = |sc: Scenario| all || s.scenario == sc;
    let scenarios: Vec<Scenario> = [
        Scenario::Uncontended,
        Scenario::Handoff,
        Scenario::ManyKeys,
        Scenario::HoldMany,
        Scenario::Primitives,
        Scenario::Scale,
    ]
    .into_iter()
    .filter(|sc| *sc != Scenario::Scale || s.scenario == Scenario::Scale)
    .filter(|sc| want(*sc))
    .collect();
    let progress = Progress::new((scenarios.len() * s.runs) as u64);
    let mut report = Report {
        store: s.url.to_string(),
        backend: locker.guarantees().backend,
        runs: s.runs,
        runtime: s.runtime,
        duration_s: s.duration.as_secs_f64(),
        server_version: match view {
            Some(v) => Some(v.version().await),
            None => None,
        },
        machine: machine(),
        scenarios: report::Scenarios::default(),
    };
    let ran = &mut report.scenarios;
    for sc in scenarios {
        match sc {
            Scenario::Uncontended => {
                // The store's raw baselines, as its kit in the harness has them.
                let raws = kit.baselines(&s.url).await?;
                let native = kit.native_loads(&s.url)?;
                ran.uncontended = Some(
                    uncontended::uncontended(&s, &locker, &raws, &native, view, &progress).await?,
                );
            }
            Scenario::Handoff => {
                // The store's own lock recipe and peers, one client per task, as its kit has
                // them.
                let peers = kit.handoff_baselines(&s.url, s.tasks).await?;
                ran.handoff = Some(handoff::handoff(&s, &locker, &peers, view, &progress).await?);
            }
            Scenario::ManyKeys => {
                let raws = kit.many_keys_baselines(&s.url).await?;
                let load = kit.request_load(&s.url)?;
                ran.many_keys = Some(
                    many_keys::many_keys(&s, &locker, &raws, load.as_deref(), &progress).await?,
                );
            }
            Scenario::HoldMany => {
                ran.hold_many = Some(hold_many::hold_many(&s, &locker, view, &progress).await?);
            }
            Scenario::Primitives => {
                let peer = kit.primitive_peer(&s.url, primitives::PERMITS).await?;
                ran.primitives = Some(
                    primitives::primitives(&s, &locker, view, peer.as_ref(), &progress).await?,
                );
            }
            Scenario::Scale => ran.scale = Some(scale::scale(&s, &locker, &progress).await?),
            Scenario::All => unreachable!("expanded above"),
        }
    }
    progress.0.finish_and_clear();
    Ok(report)
}

fn machine() -> report::Machine {
    let cpu = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|c| {
        c.lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|m| m.trim_start_matches([' ', '\t', ':']).to_string())
    });
    report::Machine {
        cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        cpu,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_string()),
    }
}

fn unique(prefix: &str) -> String {
    format!("bench:{prefix}:{}", OwnerToken::generate().map(|o| o.to_string()).unwrap_or_default())
}

/// One way of taking and giving back a key; the same loops measure every contender.
trait Contender: Clone + Send + Sync + 'static {
    type Guard: Send;
    /// Takes `key`, waiting up to `wait` (zero: one attempt). `Ok(None)`: not granted.
    fn acquire(
        &self,
        key: &str,
        wait: Duration,
    ) -> impl Future<Output = BenchResult<Option<Self::Guard>>> + Send;
    /// Gives it back; an error if it was no longer ours.
    fn release(&self, guard: Self::Guard) -> impl Future<Output = BenchResult<()>> + Send;
}

/// leasehold through `Locker` and `Lease`.
#[derive(Clone)]
struct Leasehold(Locker);

impl Contender for Leasehold {
    type Guard = leasehold::Lease;
    async fn acquire(&self, key: &str, wait: Duration) -> BenchResult<Option<leasehold::Lease>> {
        let w = if wait.is_zero() { Wait::No } else { Wait::For(wait) };
        match self.0.acquire(key, TTL).wait(w).await {
            Ok(l) => Ok(Some(l)),
            Err(leasehold::Error::Busy { .. }) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }
    async fn release(&self, lease: leasehold::Lease) -> BenchResult<()> {
        match lease.release().await {
            Ok(leasehold::Released::Clean) => Ok(()),
            Ok(leasehold::Released::MayHaveOverlapped) => {
                Err("release found the lease not ours".into())
            }
            Err(e) => Err(e.to_string()),
        }
    }
}

/// A store's raw-client baseline from its kit in the harness
/// ([`leasehold_harness::baseline::RawClient`]): one attempt, or waiting where the client can.
#[derive(Clone)]
struct KitRaw(Arc<dyn leasehold_harness::baseline::RawClient>);

impl Contender for KitRaw {
    type Guard = Box<dyn leasehold_harness::baseline::RawHeld>;
    async fn acquire(&self, key: &str, wait: Duration) -> BenchResult<Option<Self::Guard>> {
        self.0.acquire_within(key, wait).await
    }
    async fn release(&self, held: Self::Guard) -> BenchResult<()> {
        held.release().await
    }
}

/// leasehold's store trait called directly: no `Locker`, no `Lease` (one attempt only).
#[derive(Clone)]
struct StoreOnly(Arc<dyn leasehold::store::Store>);

impl Contender for StoreOnly {
    type Guard = (leasehold::Key, OwnerToken);
    async fn acquire(&self, key: &str, _wait: Duration) -> BenchResult<Option<Self::Guard>> {
        let k = leasehold::Key::new(key).map_err(|e| e.to_string())?;
        let owner = OwnerToken::generate().map_err(|e| e.to_string())?;
        let req = leasehold_harness::baseline::mutex_request(&k, &owner, TTL);
        match self.0.try_acquire(&req).await.map_err(|e| e.to_string())? {
            leasehold::store::Attempt::Granted(_) => Ok(Some((k, owner))),
            _ => Ok(None),
        }
    }
    async fn release(&self, (k, owner): Self::Guard) -> BenchResult<()> {
        self.0.release(&k, &owner).await.map(|_| ()).map_err(|e| e.to_string())
    }
}

/// Back-to-back acquire + release of a free `key` for `d`.
async fn cycles<C: Contender>(c: &C, key: &str, d: Duration) -> BenchResult<RunResult> {
    let (mut acq, mut rel) = (hist(), hist());
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed() < d {
        let t0 = Instant::now();
        let g = c.acquire(key, Duration::ZERO).await?.ok_or("a free key was busy")?;
        let t1 = Instant::now();
        c.release(g).await?;
        acq.record(us(t1 - t0)).ok();
        rel.record(us(t1.elapsed())).ok();
        n += 1;
    }
    Ok(RunResult {
        ops: n,
        elapsed: start.elapsed(),
        acquire: Some(acq),
        release: Some(rel),
        ..Default::default()
    })
}

/// A locker on `url`, bounded by the default connect timeout.
pub(crate) async fn connect(url: &leasehold::StoreUrl) -> BenchResult<Locker> {
    Locker::open(url, leasehold::DEFAULT_CONNECT_TIMEOUT).await.map_err(|e| e.to_string())
}
