//! The measurements: the pause sampler and monitor, and the store's renewal round trips.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{Distribution, Recommendation, Recorder, recommend};
use crate::{Error, Locker, OwnerToken, Result};

/// What the sampler sleeps each time; the overshoot past it is the pause.
const TICK: Duration = Duration::from_millis(1);
/// The probe key's lease length: long enough that no renewal is ever late.
const PROBE_TTL: Duration = Duration::from_secs(30);
/// The time between two probe renewals (one request in flight at a time).
const PROBE_GAP: Duration = Duration::from_millis(1);

struct Inner {
    pauses: Recorder,
    over: u64,
    longest: Duration,
}

struct State {
    margin: Duration,
    inner: Mutex<Inner>,
}

impl State {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A task beside the process's work that sleeps 1 ms at a time and records how much later
/// than that it woke: the pauses this process's runtime sees (host scheduling, a blocked
/// runtime thread, a stopped or migrated VM). Pauses longer than the margin it was given are
/// counted: each could have let a lease with that margin lapse before the holder noticed.
///
/// Resolution is the runtime's timer (about 1 ms). Sampling stops when the monitor is
/// dropped.
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
        self.task.abort();
    }
}

async fn sample(state: Weak<State>) {
    loop {
        let t0 = Instant::now();
        tokio::time::sleep(TICK).await;
        let over = t0.elapsed().saturating_sub(TICK);
        let Some(s) = state.upgrade() else { return };
        let mut i = s.inner();
        i.pauses.record(over);
        if over > s.margin {
            i.over += 1;
        }
        i.longest = i.longest.max(over);
    }
}

impl PauseMonitor {
    /// Starts sampling on the current tokio runtime (which must have its time driver
    /// enabled), counting pauses longer than `margin`.
    ///
    /// Errors: [`Error::InvalidInput`] outside a tokio runtime.
    pub fn spawn(margin: Duration) -> Result<PauseMonitor> {
        let rt = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::invalid("PauseMonitor::spawn needs a tokio runtime"))?;
        let state = Arc::new(State {
            margin,
            inner: Mutex::new(Inner { pauses: Recorder::new(), over: 0, longest: Duration::ZERO }),
        });
        let task = rt.spawn(sample(Arc::downgrade(&state))).abort_handle();
        Ok(PauseMonitor { state, task })
    }

    /// The margin pauses are compared with.
    pub fn margin(&self) -> Duration {
        self.state.margin
    }

    /// The pauses seen so far.
    pub fn pauses(&self) -> Distribution {
        self.state.inner().pauses.distribution()
    }

    /// How many pauses were longer than the margin.
    pub fn over_margin(&self) -> u64 {
        self.state.inner().over
    }

    /// The longest pause seen so far.
    pub fn longest(&self) -> Duration {
        self.state.inner().longest
    }

    /// The [`recommend`]ation from the pauses seen so far, the store's renewal round trips
    /// `rtt` and the job's step `job_step`.
    pub fn recommend(&self, rtt: &Distribution, job_step: Option<Duration>) -> Recommendation {
        recommend(rtt, &self.pauses(), job_step)
    }
}

/// Samples this process's pauses for `duration` (see [`PauseMonitor`]).
///
/// Errors: [`Error::InvalidInput`] outside a tokio runtime.
pub async fn sample_pauses(duration: Duration) -> Result<Distribution> {
    let m = PauseMonitor::spawn(Duration::MAX)?;
    tokio::time::sleep(duration).await;
    Ok(m.pauses())
}

/// The round trips of renew-sized requests to `locker`'s store for `duration` (at least
/// one): a private probe key (`leasehold-size-probe-…`) is acquired once, renewed one request
/// at a time with 1 ms between them, and released at the end.
///
/// Errors: the store's, from the acquisition, a renewal or the release (the probe lease is
/// released before a renewal's error is returned; its ttl is the backstop).
pub async fn measure_renewals(locker: &Locker, duration: Duration) -> Result<Distribution> {
    let key = format!("leasehold-size-probe-{}", OwnerToken::generate()?);
    let lease = locker.acquire(&key, PROBE_TTL).auto_renew(false).await?; // it renews itself
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
    renewed?;
    let _ = released?;
    Ok(r.distribution())
}

/// Both measurements and the recommendation, as `leasehold size` prints them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Measurement {
    /// The store's renewal round trips.
    pub rtt: Distribution,
    /// This process's pauses, sampled meanwhile.
    pub pauses: Distribution,
    /// What follows from them.
    #[serde(flatten)]
    pub recommendation: Recommendation,
}

/// Measures `locker`'s renewal round trips for `duration` while a [`PauseMonitor`] samples
/// this process's pauses, and recommends a sizing for a job whose step between `admit()`
/// checks takes `job_step`.
///
/// Errors: those of [`measure_renewals`] and [`PauseMonitor::spawn`].
pub async fn measure(
    locker: &Locker,
    duration: Duration,
    job_step: Option<Duration>,
) -> Result<Measurement> {
    let monitor = PauseMonitor::spawn(Duration::MAX)?;
    let rtt = measure_renewals(locker, duration).await?;
    let pauses = monitor.pauses();
    Ok(Measurement { rtt, pauses, recommendation: recommend(&rtt, &pauses, job_step) })
}
