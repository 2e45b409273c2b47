//! `run --metrics-file`: the run's metrics in the Prometheus text format, rendered by
//! `metrics-exporter-prometheus` (no HTTP listener) for node-exporter's textfile collector.
//! Every series carries `key="KEY"`, so two jobs' files side by side never collide.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;

use metrics::Unit;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// The command's exit code (or leasehold's own: 75 busy, 79 lost, …).
pub(crate) const EXIT_CODE: &str = "leasehold_run_exit_code";
/// From the start of `run` to its end.
pub(crate) const DURATION: &str = "leasehold_run_duration_seconds";
/// When the command last ran under the lease and exited 0 (kept from the previous file
/// while runs fail, skip or find the key busy).
pub(crate) const LAST_SUCCESS: &str = "leasehold_run_last_success_timestamp_seconds";
/// When this run ended.
pub(crate) const LAST_RUN: &str = "leasehold_run_last_run_timestamp_seconds";
/// 1 for this run's outcome, 0 for every other (label `outcome`).
pub(crate) const OUTCOME: &str = "leasehold_run_outcome";
/// When a run last ended with each outcome (label `outcome`; kept from the previous file).
pub(crate) const LAST_OUTCOME: &str = "leasehold_run_last_outcome_timestamp_seconds";

/// How a run ended, as the metrics tell it: a skip, a busy key, a lost lease and a failed
/// command are different things, and only the command's own success is a success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The command ran under the lease and exited 0 (and the lease was still ours at its end).
    Success,
    /// The command ran under the lease and exited non-zero (or died of a signal), or could
    /// not be executed (126/127).
    Failed,
    /// The key was busy and `-E N` said that is expected: the command did not run here.
    Skipped,
    /// The key was not acquired within --wait (75): the command did not run.
    Busy,
    /// The lease was lost while the command ran, or was not ours at its end (79).
    Lost,
    /// The store was unavailable (69): the command did not run.
    Unavailable,
    /// The store refused the configuration (78): the command did not run.
    Config,
    /// `--if-unavailable run` ran the command without a lease (its result is not known here).
    Unlocked,
    /// Nested in a run of the same key: the command ran under the parent's grant.
    Nested,
    /// Anything else of leasehold's own (64 usage, 70 supervisor died, …).
    Error,
}

impl Outcome {
    pub(crate) const ALL: [Outcome; 10] = [
        Outcome::Success,
        Outcome::Failed,
        Outcome::Skipped,
        Outcome::Busy,
        Outcome::Lost,
        Outcome::Unavailable,
        Outcome::Config,
        Outcome::Unlocked,
        Outcome::Nested,
        Outcome::Error,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failed => "failed",
            Outcome::Skipped => "skipped",
            Outcome::Busy => "busy",
            Outcome::Lost => "lost",
            Outcome::Unavailable => "unavailable",
            Outcome::Config => "config",
            Outcome::Unlocked => "unlocked",
            Outcome::Nested => "nested",
            Outcome::Error => "error",
        }
    }

    /// The outcome of a run that ended with `r`, where the run did not say otherwise: `Ok`
    /// is the command's own code, `Err` leasehold's.
    pub(crate) fn of(r: &Result<crate::exit::Exit, crate::exit::Exit>) -> Outcome {
        use crate::exit::code;
        match r {
            Ok(e) if e.code == 0 => Outcome::Success,
            Ok(_) => Outcome::Failed,
            Err(e) => match e.code {
                code::LOST => Outcome::Lost,
                code::UNAVAILABLE => Outcome::Unavailable,
                code::CONFIG => Outcome::Config,
                code::BUSY => Outcome::Busy,
                code::CANNOT_EXECUTE | code::NOT_FOUND => Outcome::Failed,
                _ => Outcome::Error,
            },
        }
    }
}

/// Histogram buckets in seconds, from a millisecond to a day: acquire waits are short, holds
/// of nightly jobs are hours.
const BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0,
    1800.0, 3600.0, 7200.0, 14400.0, 43200.0, 86400.0,
];

static FILE: OnceLock<(PathBuf, PrometheusHandle)> = OnceLock::new();

/// Installs the recorder behind `--metrics-file`, if one was asked for.
pub(crate) fn install(path: Option<PathBuf>, key: &str) {
    let Some(path) = path else { return };
    let Ok(builder) = PrometheusBuilder::new().set_buckets(BUCKETS) else { return };
    let Ok(handle) = builder.add_global_label("key", key).install_recorder() else {
        eprintln!("leasehold: warning: cannot record metrics for --metrics-file");
        return;
    };
    describe();
    let _ = FILE.set((path, handle));
}

fn describe() {
    use leasehold::telemetry as t;
    let s = Unit::Seconds;
    metrics::describe_histogram!(t::ACQUIRE_WAIT, s, "From the acquire call to its answer.");
    metrics::describe_histogram!(t::HOLD, s, "From the grant to its release, drop or loss.");
    metrics::describe_histogram!(t::HANDOFF_WAIT, s, "From a key let go to its next grant here.");
    metrics::describe_histogram!(t::RENEWAL, s, "One renewal round trip.");
    metrics::describe_counter!(t::GRANTS, "Grants.");
    metrics::describe_counter!(t::BUSY, "Busy answers.");
    metrics::describe_counter!(t::LOSSES, "Leases lost, not counting their own release.");
    metrics::describe_counter!(t::RENEWAL_FAILURES, "Renewals that did not confirm.");
    metrics::describe_counter!(t::UNKNOWN, "Requests whose answer never came.");
    metrics::describe_counter!(t::ORPHAN_CLEANUPS, "Cleanups after an unknown acquire.");
    metrics::describe_gauge!(EXIT_CODE, "Exit code of the last run (the command's, or 75/79/…).");
    metrics::describe_gauge!(DURATION, s, "How long the last run took, start to end.");
    metrics::describe_gauge!(
        LAST_SUCCESS,
        s,
        "When the command last ran under the lease and exited 0 (Unix time); a skip, a busy \
         key or a failed command is not a success."
    );
    metrics::describe_gauge!(LAST_RUN, s, "When the last run ended (Unix time).");
    metrics::describe_gauge!(
        OUTCOME,
        "1 for the last run's outcome, 0 for the others: success, failed, skipped (busy, -E), \
         busy, lost, unavailable, config, unlocked (--if-unavailable run), nested, error."
    );
    metrics::describe_gauge!(
        LAST_OUTCOME,
        s,
        "When a run last ended with this outcome (Unix time)."
    );
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The value of `name` in an earlier file (any labels), if it has one.
fn previous(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.strip_prefix(name).is_some_and(|r| r.starts_with(['{', ' '])))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The value of `name{…,outcome="OUTCOME"}` in an earlier file, if it has one.
fn previous_of(text: &str, name: &str, outcome: Outcome) -> Option<f64> {
    let label = format!("outcome=\"{}\"", outcome.as_str());
    text.lines()
        .filter(|l| l.strip_prefix(name).is_some_and(|r| r.starts_with('{')))
        .find(|l| l.split_once('}').is_some_and(|(labels, _)| labels.contains(&label)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The outcome gauges, this run's outcome timestamp, and the timestamps carried over from
/// the file's previous version (the last success only from a success).
fn record_outcome(path: &std::path::Path, outcome: Outcome, now: f64) {
    let before = std::fs::read_to_string(path).unwrap_or_default();
    for o in Outcome::ALL {
        let label = [("outcome", o.as_str())];
        metrics::gauge!(OUTCOME, &label).set(if o == outcome { 1.0 } else { 0.0 });
        let at = if o == outcome { Some(now) } else { previous_of(&before, LAST_OUTCOME, o) };
        if let Some(t) = at {
            metrics::gauge!(LAST_OUTCOME, &label).set(t);
        }
    }
    let last = match outcome {
        Outcome::Success => Some(now),
        _ => previous(&before, LAST_SUCCESS),
    };
    if let Some(t) = last {
        metrics::gauge!(LAST_SUCCESS).set(t);
    }
}

/// Records the run's end and writes the file (atomically: a collector never reads half a
/// file). A failure is a warning: the command's outcome matters more.
pub(crate) fn flush(outcome: Outcome, code: u8, started: Instant) {
    let Some((path, handle)) = FILE.get() else { return };
    let now = unix_now();
    metrics::gauge!(EXIT_CODE).set(f64::from(code));
    metrics::gauge!(DURATION).set(started.elapsed().as_secs_f64());
    metrics::gauge!(LAST_RUN).set(now);
    record_outcome(path, outcome, now);
    write(path, handle);
}

/// Before `run` replaces itself with the command (nested, or failing open): what is known so
/// far, since nothing runs after (no exit code: the command's is not known here).
pub(crate) fn flush_before_exec(outcome: Outcome) {
    if let Some((path, handle)) = FILE.get() {
        let now = unix_now();
        metrics::gauge!(LAST_RUN).set(now);
        record_outcome(path, outcome, now);
        write(path, handle);
    }
}

fn write(path: &std::path::Path, handle: &PrometheusHandle) {
    let mut tmp = path.to_path_buf().into_os_string();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let written = std::fs::write(&tmp, handle.render()).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        eprintln!("leasehold: warning: cannot write --metrics-file {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_previous_success_is_read_back() {
        let text =
            "# HELP x\nleasehold_run_last_success_timestamp_seconds{key=\"a\"} 1700000000.5\n";
        assert_eq!(previous(text, LAST_SUCCESS), Some(1_700_000_000.5));
        assert_eq!(previous("leasehold_run_exit_code{key=\"a\"} 3\n", LAST_SUCCESS), None);
    }

    #[test]
    fn each_outcomes_last_time_is_read_back_by_its_label() {
        let text = "leasehold_run_last_outcome_timestamp_seconds{key=\"a\",outcome=\"busy\"} 5\n\
                    leasehold_run_last_outcome_timestamp_seconds{key=\"a\",outcome=\"failed\"} 7\n";
        assert_eq!(previous_of(text, LAST_OUTCOME, Outcome::Failed), Some(7.0));
        assert_eq!(previous_of(text, LAST_OUTCOME, Outcome::Busy), Some(5.0));
        assert_eq!(previous_of(text, LAST_OUTCOME, Outcome::Success), None);
    }

    #[test]
    fn only_the_commands_own_zero_is_a_success() {
        use crate::exit::Exit;
        assert_eq!(Outcome::of(&Ok(Exit::ok(0))), Outcome::Success);
        assert_eq!(Outcome::of(&Ok(Exit::ok(75))), Outcome::Failed, "the command's own 75");
        assert_eq!(Outcome::of(&Err(Exit::ok(0))), Outcome::Error, "leasehold's 0 (-E 0)");
        assert_eq!(Outcome::of(&Err(Exit::fail(75, "busy"))), Outcome::Busy);
        assert_eq!(Outcome::of(&Err(Exit::fail(79, "lost"))), Outcome::Lost);
        assert_eq!(Outcome::of(&Err(Exit::fail(127, "no"))), Outcome::Failed);
    }
}
