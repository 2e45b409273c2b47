//! Sizing a lease from evidence: measure the store's renewal round trips and the pauses this
//! process sees, then derive the ttl, renew interval, safety margin and `leasehold run`
//! grace from them, with the arithmetic.
//!
//! - [`measure_renewals`]: the round-trip distribution of renew-sized requests (one private
//!   probe key, acquired once, renewed one request at a time, released and forgotten at the
//!   end, so nothing of it stays in the store).
//! - [`sample_pauses`] and [`PauseMonitor`]: an OS thread that sleeps 1 ms and records the
//!   overshoot (the host's pauses), and beside it a tokio task doing the same (the runtime's
//!   own lag, reported apart). The monitor runs beside a process's work for as long as it
//!   lives and counts the pauses longer than a lease's margin (each one could have let the
//!   lease lapse unnoticed until the next await point).
//! - [`recommend`]: the rule below, a pure function of the measured distributions.
//!
//! No observed percentile bounds a future pause (a VM migration, a swap storm, a stop-the-world
//! collection can last longer than anything measured), so a recommendation lowers the odds of
//! losing a lease and never replaces fencing: the resource must still check the fence
//! ([`crate::fence`]).
//!
//! # The rule
//!
//! With `P` the longest pause seen, `R` the longest renewal round trip seen (a percentile
//! would drop the very outliers a lease must survive; the p99.9 is shown beside them), `J`
//! the job's step between
//! [`crate::Lease::admit`] checks (0 if unknown), headroom `h` = [`HEADROOM`] and drift `d` =
//! [`DRIFT`] (the library's default), and the local deadline `t_sent + ttl·(1 − d) − margin`:
//!
//! - `margin = J + h·max(P, R)`: [`crate::Lease::admit`] turns false `margin` before the local
//!   deadline, so a step admitted at the last moment still ends, with a pause or a round trip
//!   of slack twice over, before the holder's authority does.
//! - auto-renew runs every `ttl/3`. If the renewal at `ttl/3` fails, the one at `2·ttl/3`
//!   (delayed by up to a pause, answered within a round trip) must still land before the local
//!   deadline: `ttl·(1 − d) − margin − 2·ttl/3 ≥ P + R`, so
//!   `ttl ≥ 3·(P + R + margin) / (1 − 3d)`.
//! - `grace = J + h·max(P, R)` (the command finishes its step after SIGTERM); without a job
//!   step, `leasehold run`'s default grace, [`RUN_GRACE`] (a command's clean-up after SIGTERM
//!   takes longer than a few milliseconds). `leasehold run` moves its local deadline
//!   `min(ttl/10, 2 s) + grace` early, so the same inequality is solved with that margin as
//!   well.
//! - the ttl is the larger of the two, at least [`MIN_TTL`], rounded up (to 100 ms below 10 s,
//!   else to 1 s); the renew interval is a third of it.

mod monitor;

pub use monitor::{Load, Measurement, PauseMonitor, measure, measure_renewals, sample_pauses};

use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// The slack factor applied to the worst measured pause or round trip.
pub const HEADROOM: f64 = 2.0;
/// The clock drift assumed between this host and the store: the library's default
/// ([`crate::Acquire::drift`]).
pub const DRIFT: f64 = 0.01;
/// `leasehold run`'s default `--grace`: the grace assumed when no job step is given.
pub const RUN_GRACE: Duration = Duration::from_secs(5);
/// The shortest ttl recommended: below it one unlucky pause loses the lease, and a shorter
/// lease buys little.
pub const MIN_TTL: Duration = Duration::from_secs(1);

/// A measured latency distribution, in microseconds (HDR histogram, 3 significant digits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Distribution {
    /// Number of samples.
    pub samples: u64,
    /// Median.
    pub p50_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Largest sample.
    pub max_us: u64,
}

impl Distribution {
    /// The distribution of `samples` (any order); all zeros when there are none.
    pub fn from_samples(samples: impl IntoIterator<Item = Duration>) -> Distribution {
        let mut r = Recorder::new();
        for s in samples {
            r.record(s);
        }
        r.distribution()
    }
}

/// Records durations into an HDR histogram (1 µs to 1 h; longer values are clamped).
pub(crate) struct Recorder(Histogram<u64>);

const HIGHEST_US: u64 = 3_600_000_000;

impl Recorder {
    pub fn new() -> Recorder {
        Recorder(Histogram::new_with_bounds(1, HIGHEST_US, 3).expect("valid histogram bounds"))
    }

    pub fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX).clamp(1, HIGHEST_US);
        // In bounds by the clamp, so this cannot fail.
        let _ = self.0.record(us);
    }

    pub fn distribution(&self) -> Distribution {
        let h = &self.0;
        if h.is_empty() {
            return Distribution::default();
        }
        Distribution {
            samples: h.len(),
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
        }
    }
}

/// What [`recommend`] derives, with the arithmetic that led there.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Recommendation {
    /// The lease length to request (whole milliseconds, as every figure here; serialized
    /// as `ttl_ms`, a number of milliseconds, as the other durations are).
    #[serde(rename = "ttl_ms", serialize_with = "ser_ms")]
    pub ttl: Duration,
    /// The renew interval: a third of the ttl, the interval auto-renew uses.
    #[serde(rename = "renew_every_ms", serialize_with = "ser_ms")]
    pub renew_every: Duration,
    /// The safety margin to pass to [`crate::Acquire::margin`].
    #[serde(rename = "margin_ms", serialize_with = "ser_ms")]
    pub margin: Duration,
    /// The `--grace` for `leasehold run` with this ttl.
    #[serde(rename = "grace_ms", serialize_with = "ser_ms")]
    pub grace: Duration,
    /// What the library's default margin, `min(ttl/10, 2 s)`, would be for this ttl.
    #[serde(rename = "default_margin_ms", serialize_with = "ser_ms")]
    pub default_margin: Duration,
    /// The headroom factor used.
    pub headroom: f64,
    /// The drift assumed.
    pub drift: f64,
    /// The job step between `admit()` checks that was counted, if one was given.
    #[serde(rename = "job_step_ms", serialize_with = "opt_ms")]
    pub job_step: Option<Duration>,
    /// The arithmetic, one step per line.
    pub arithmetic: Vec<String>,
    /// What makes the figures less trustworthy: percentiles resting on few samples, a loaded
    /// host.
    pub warnings: Vec<String>,
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn opt_ms<S: serde::Serializer>(
    d: &Option<Duration>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match d {
        Some(d) => ser_ms(d, s),
        None => s.serialize_none(),
    }
}

/// The samples beyond a percentile `q` of `n` samples that it rests on; below
/// [`ENOUGH_BEYOND`] the percentile is close to a single sample.
pub fn samples_beyond(n: u64, q: f64) -> u64 {
    ((n as f64) * (1.0 - q)).floor() as u64
}

/// How many samples beyond a percentile make it worth quoting.
pub const ENOUGH_BEYOND: u64 = 10;

/// A warning for each percentile of `d` (named `what`) that rests on fewer than
/// [`ENOUGH_BEYOND`] samples beyond it.
fn sample_warnings(what: &str, d: &Distribution) -> Vec<String> {
    let mut out = Vec::new();
    for (name, q) in [("p99.9", 0.999), ("p99", 0.99)] {
        let beyond = samples_beyond(d.samples, q);
        if beyond < ENOUGH_BEYOND {
            let need = (ENOUGH_BEYOND as f64 / (1.0 - q)).ceil() as u64;
            out.push(format!(
                "{what} {name} rests on {} samples ({beyond} beyond it): it is close to a single \
                 sample; {need} samples would give {ENOUGH_BEYOND} (measure longer)",
                d.samples
            ));
            break; // the coarser percentile is said once
        }
    }
    out
}

/// A warning when the host ran more work than it has CPUs while measuring.
pub(crate) fn load_warning(load: &Load) -> Option<String> {
    let [one, ..] = load.average?;
    (one > load.cpus as f64).then(|| {
        format!(
            "the host was loaded while measuring (load average {one:.2} on {} CPUs): pauses \
             here are what a job sees under this load, and longer ones come with more; \
             measure under the load the job will run with",
            load.cpus
        )
    })
}

/// The statement every recommendation carries.
pub const NO_BOUND: &str = "no observed percentile bounds a future pause (a VM migration, \
    swapping, a long collection can outlast anything measured here): these figures lower the \
    odds of losing a lease, and fencing stays required for correctness";

fn ms(us: u64) -> String {
    format!("{:.3} ms", us as f64 / 1000.0)
}

fn ceil_ms(us: f64) -> u64 {
    (us / 1000.0).ceil().max(1.0) as u64
}

/// Rounds a ttl up: to 100 ms below 10 s, else to whole seconds.
fn round_ttl(ms: u64) -> u64 {
    let step = if ms < 10_000 { 100 } else { 1000 };
    ms.div_ceil(step).saturating_mul(step)
}

/// The smallest ttl (µs) with `ttl·(1 − 3d) ≥ 3·(p + r + g + min(ttl/10, 2 s))`: the
/// two-renewal rule under `leasehold run`'s margin.
fn run_ttl_us(p: f64, r: f64, g: f64) -> f64 {
    let short = 3.0 * (p + r + g) / (1.0 - 3.0 * DRIFT - 0.3);
    if short / 10.0 <= 2e6 { short } else { 3.0 * (p + r + g + 2e6) / (1.0 - 3.0 * DRIFT) }
}

/// The recommendation for a store whose renewal round trips are `rtt`, on a host whose
/// pauses are `pauses`, for a job whose step between `admit()` checks takes `job_step`. A
/// pure function: see the [module docs](self) for the rule.
pub fn recommend(
    rtt: &Distribution,
    pauses: &Distribution,
    job_step: Option<Duration>,
) -> Recommendation {
    let (p, r) = (pauses.max_us.max(pauses.p999_us), rtt.max_us.max(rtt.p999_us));
    let j = job_step.map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    let mut a = Vec::new();
    a.push(format!(
        "P = longest pause = {} (p99.9 {}); R = longest renewal round trip = {} (p99.9 {}); \
         J = job step = {}{}",
        ms(p),
        ms(pauses.p999_us),
        ms(r),
        ms(rtt.p999_us),
        ms(j),
        if job_step.is_none() {
            " (no --job given: count your step between admit() checks)"
        } else {
            ""
        }
    ));
    let slack = HEADROOM * p.max(r) as f64;
    let margin_ms = ceil_ms(j as f64 + slack);
    a.push(format!(
        "margin = J + {HEADROOM}·max(P, R) = {} + {} = {margin_ms} ms (rounded up)",
        ms(j),
        ms(slack as u64)
    ));
    let grace_ms = match job_step {
        Some(_) => {
            a.push(format!("grace (run) = J + {HEADROOM}·max(P, R) = {margin_ms} ms"));
            margin_ms
        }
        None => {
            let g = RUN_GRACE.as_millis() as u64;
            a.push(format!(
                "grace (run) = run's default, {g} ms (no --job given; a job that stops within J \
                 of SIGTERM needs only J + {HEADROOM}·max(P, R))"
            ));
            g
        }
    };
    let (pf, rf) = (p as f64, r as f64);
    let lib = 3.0 * (pf + rf + margin_ms as f64 * 1000.0) / (1.0 - 3.0 * DRIFT);
    a.push(format!(
        "library: ttl ≥ 3·(P + R + margin)/(1 − 3·{DRIFT}) = 3·({} + {} + {margin_ms} ms)/{:.2} \
         = {}",
        ms(p),
        ms(r),
        1.0 - 3.0 * DRIFT,
        ms(lib as u64)
    ));
    let run = run_ttl_us(pf, rf, grace_ms as f64 * 1000.0);
    a.push(format!(
        "run: margin = min(ttl/10, 2 s) + grace, so ttl ≥ 3·(P + R + grace + min(ttl/10, 2 s))\
         /(1 − 3·{DRIFT}) = {}",
        ms(run as u64)
    ));
    let need = ceil_ms(lib.max(run));
    let ttl_ms = round_ttl(need.max(MIN_TTL.as_millis() as u64));
    a.push(format!(
        "ttl = max(library, run, {} ms) = {need} ms, rounded up = {ttl_ms} ms",
        MIN_TTL.as_millis()
    ));
    let renew_every_ms = ttl_ms / 3;
    a.push(format!("renew every ttl/3 = {renew_every_ms} ms"));
    let room = ttl_ms as f64 * (1.0 - DRIFT) - margin_ms as f64 - 2.0 * renew_every_ms as f64;
    a.push(format!(
        "check: after a failed renewal, the next is sent at 2·ttl/3 and has \
         ttl·(1 − {DRIFT}) − margin − 2·ttl/3 = {room:.1} ms before the local deadline, \
         ≥ P + R = {}",
        ms(p.saturating_add(r))
    ));
    let default_margin_ms = crate::default_margin(Duration::from_millis(ttl_ms)).as_millis() as u64;
    a.push(format!(
        "the default margin for this ttl would be min(ttl/10, 2 s) = {default_margin_ms} ms; {}",
        if default_margin_ms >= margin_ms {
            "it covers the margin above"
        } else {
            "pass the margin above explicitly (Acquire::margin)"
        }
    ));
    Recommendation {
        ttl: Duration::from_millis(ttl_ms),
        renew_every: Duration::from_millis(renew_every_ms),
        margin: Duration::from_millis(margin_ms),
        grace: Duration::from_millis(grace_ms),
        default_margin: Duration::from_millis(default_margin_ms),
        headroom: HEADROOM,
        drift: DRIFT,
        job_step: job_step
            .map(|d| Duration::from_millis(d.as_millis().try_into().unwrap_or(u64::MAX))),
        arithmetic: a,
        warnings: [sample_warnings("pause", pauses), sample_warnings("renewal round-trip", rtt)]
            .concat(),
    }
}

impl fmt::Display for Recommendation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "recommended: ttl {} ms, renew every {} ms, margin {} ms, grace (run) {} ms",
            self.ttl.as_millis(),
            self.renew_every.as_millis(),
            self.margin.as_millis(),
            self.grace.as_millis()
        )?;
        writeln!(f, "arithmetic:")?;
        for line in &self.arithmetic {
            writeln!(f, "  {line}")?;
        }
        for w in &self.warnings {
            writeln!(f, "warning: {w}")?;
        }
        write!(f, "note: {NO_BOUND}")
    }
}

#[cfg(test)]
mod tests;
