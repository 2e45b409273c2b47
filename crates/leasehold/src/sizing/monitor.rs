//! The measurements: the pause sampler and monitor, and the store's renewal round trips.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{Distribution, Recommendation, Recorder, recommend};
use crate::{Error, Locker, OwnerToken, Result};

/// What the samplers sleep each time; the overshoot past it is the pause (or the lag).
const TICK: Duration = Duration::from_millis(1);
/// The probe key's lease length: long enough that no renewal is ever late.
const PROBE_TTL: Duration = Duration::from_secs(30);
/// The time between two probe renewals (one request in flight at a time).
const PROBE_GAP: Duration = Duration::from_millis(1);

struct Inner {
    /// Host pauses, from the OS thread.
    pauses: Recorder,
    /// The tokio runtime's own lag, from a task.
    lag: Recorder,
    over: u64,
    longest: Duration,
}

struct State {
    margin: Duration,
    stop: std::sync::atomic::AtomicBool,
    inner: Mutex<Inner>,
}

impl State {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Samples, beside the process's work, how long this host keeps a thread from running: an OS
/// thread sleeps 1 ms at a time and records how much later than that it woke (host
/// scheduling, CPU starvation, a stopped or migrated VM; resolution well under a millisecond).
/// Pauses longer than the margin it was given are counted: each could have let a lease with
/// that margin lapse before the holder noticed.
///
/// A tokio task does the same on the runtime it was spawned on, reported apart as the
/// runtime's lag ([`PauseMonitor::runtime_lag`]): that adds the timer's own granularity
/// (about 1 ms) and whatever blocks the runtime's threads (the application's doing, not the
/// host's), which the renewals, running on that runtime, also wait for. Sampling stops when
/// the monitor is dropped.
pub struct PauseMonitor {
    state: Arc<State>,
    task: tokio::task::AbortHandle,
}

impl std::fmt::Debug for PauseMonitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PauseMonitor")
            .field("margin", &self.state.margin)
            .field("over_margin", &self.over_margin())
            .finish()
    }
}

impl Drop for PauseMonitor {
    fn drop(&mut self) {
        self.state.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.task.abort();
    }
}

/// The OS thread's loop: ends when the monitor is dropped.
fn sample_thread(state: Arc<State>) {
    while !state.stop.load(std::sync::atomic::Ordering::Relaxed) {
        let t0 = Instant::now();
        std::thread::sleep(TICK);
        let over = t0.elapsed().saturating_sub(TICK);
        let mut i = state.inner();
        i.pauses.record(over);
        if over > state.margin {
            i.over += 1;
        }
        i.longest = i.longest.max(over);
    }
}

/// The runtime task's loop.
async fn sample_runtime(state: Weak<State>) {
    loop {
        let t0 = Instant::now();
        tokio::time::sleep(TICK).await;
        let over = t0.elapsed().saturating_sub(TICK);
        let Some(s) = state.upgrade() else { return };
        s.inner().lag.record(over);
    }
}

impl PauseMonitor {
    /// Starts sampling (an OS thread, and a task on the current tokio runtime, which must
    /// have its time driver enabled), counting pauses longer than `margin`.
    ///
    /// Errors: [`Error::InvalidInput`] outside a tokio runtime; [`Error::Unavailable`] if the
    /// OS refuses a thread.
    pub fn spawn(margin: Duration) -> Result<PauseMonitor> {
        let rt = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::invalid("PauseMonitor::spawn needs a tokio runtime"))?;
        let state = Arc::new(State {
            margin,
            stop: std::sync::atomic::AtomicBool::new(false),
            inner: Mutex::new(Inner {
                pauses: Recorder::new(),
                lag: Recorder::new(),
                over: 0,
                longest: Duration::ZERO,
            }),
        });
        let thread_state = state.clone();
        std::thread::Builder::new()
            .name("leasehold-pauses".into())
            .spawn(move || sample_thread(thread_state))
            .map_err(|e| {
                Error::unavailable(format!("cannot start the pause sampler: {e}"), None)
            })?;
        let task = rt.spawn(sample_runtime(Arc::downgrade(&state))).abort_handle();
        Ok(PauseMonitor { state, task })
    }

    /// The margin pauses are compared with.
    pub fn margin(&self) -> Duration {
        self.state.margin
    }

    /// The host's pauses seen so far (the OS thread's).
    pub fn pauses(&self) -> Distribution {
        self.state.inner().pauses.distribution()
    }

    /// The runtime's own lag seen so far: how late a 1 ms tokio sleep woke (timer granularity
    /// included).
    pub fn runtime_lag(&self) -> Distribution {
        self.state.inner().lag.distribution()
    }

    /// How many host pauses were longer than the margin.
    pub fn over_margin(&self) -> u64 {
        self.state.inner().over
    }

    /// The longest host pause seen so far.
    pub fn longest(&self) -> Duration {
        self.state.inner().longest
    }

    /// The [`recommend`]ation from the pauses seen so far, the store's renewal round trips
    /// `rtt` and the job's step `job_step`.
    pub fn recommend(&self, rtt: &Distribution, job_step: Option<Duration>) -> Recommendation {
        recommend(rtt, &self.pauses(), job_step)
    }
}

/// Samples this host's pauses for `duration` (see [`PauseMonitor`]).
///
/// Errors: those of [`PauseMonitor::spawn`].
pub async fn sample_pauses(duration: Duration) -> Result<Distribution> {
    let m = PauseMonitor::spawn(Duration::MAX)?;
    tokio::time::sleep(duration).await;
    Ok(m.pauses())
}

/// The round trips of renew-sized requests to `locker`'s store for `duration` (at least
/// one): a private probe key (`leasehold-size-probe-…`) is acquired once, renewed one request
/// at a time with 1 ms between them, released at the end, and then forgotten by the store
/// ([`crate::store::Store::forget`]: no fence counter or row of it is left behind).
///
/// Errors: the store's, from the acquisition, a renewal, the release or the clean-up (the
/// probe lease is released before a renewal's error is returned; its ttl is the backstop).
pub async fn measure_renewals(locker: &Locker, duration: Duration) -> Result<Distribution> {
    let key = crate::Key::new(format!("leasehold-size-probe-{}", OwnerToken::generate()?))?;
    let lease = locker.acquire(key.as_str(), PROBE_TTL).auto_renew(false).await?; // it renews itself
    let mut r = Recorder::new();
    let end = Instant::now() + duration;
    let renewed = loop {
        let t = Instant::now();
        if let Err(e) = lease.renew().await {
            break Err(e);
        }
        r.record(t.elapsed());
        if Instant::now() >= end {
            break Ok(());
        }
        tokio::time::sleep(PROBE_GAP).await;
    };
    let released = lease.release().await;
    let forgotten = match &released {
        Ok(_) => locker.forget(&key).await,
        Err(_) => Ok(()),
    };
    renewed?;
    let _ = released?;
    forgotten?;
    Ok(r.distribution())
}

/// The host's load when a measurement ended: the 1, 5 and 15 minute load averages
/// (`/proc/loadavg`; `None` where the OS has none) and the CPUs this process may use.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Load {
    /// 1, 5 and 15 minute load averages.
    pub average: Option<[f64; 3]>,
    /// CPUs available to this process.
    pub cpus: usize,
}

impl Load {
    /// Reads the load now.
    pub fn now() -> Load {
        let average = std::fs::read_to_string("/proc/loadavg").ok().and_then(|s| {
            let mut it = s.split_whitespace().map(|v| v.parse::<f64>().ok());
            Some([it.next()??, it.next()??, it.next()??])
        });
        Load { average, cpus: std::thread::available_parallelism().map_or(1, |n| n.get()) }
    }
}

/// Both measurements and the recommendation, as `leasehold size` prints them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Measurement {
    /// The store's renewal round trips.
    pub rtt: Distribution,
    /// The host's pauses (an OS thread's), sampled meanwhile.
    pub pauses: Distribution,
    /// The tokio runtime's own lag, sampled meanwhile (not used by the rule).
    pub runtime_lag: Distribution,
    /// The host's load at the end.
    pub load: Load,
    /// What follows from them.
    #[serde(flatten)]
    pub recommendation: Recommendation,
}

/// Measures `locker`'s renewal round trips for `duration` while a [`PauseMonitor`] samples
/// this host's pauses and the runtime's lag, and recommends a sizing for a job whose step
/// between `admit()` checks takes `job_step`. The recommendation also warns about a loaded
/// host and about percentiles resting on too few samples.
///
/// Errors: those of [`measure_renewals`] and [`PauseMonitor::spawn`].
pub async fn measure(
    locker: &Locker,
    duration: Duration,
    job_step: Option<Duration>,
) -> Result<Measurement> {
    let monitor = PauseMonitor::spawn(Duration::MAX)?;
    let rtt = measure_renewals(locker, duration).await?;
    let (pauses, runtime_lag) = (monitor.pauses(), monitor.runtime_lag());
    let load = Load::now();
    let mut recommendation = recommend(&rtt, &pauses, job_step);
    recommendation.warnings.extend(super::load_warning(&load));
    Ok(Measurement { rtt, pauses, runtime_lag, load, recommendation })
}
