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
/// When a run last ended with 0 (kept from the previous file while runs fail).
pub(crate) const LAST_SUCCESS: &str = "leasehold_run_last_success_timestamp_seconds";
/// When this run ended.
pub(crate) const LAST_RUN: &str = "leasehold_run_last_run_timestamp_seconds";

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
    metrics::describe_gauge!(LAST_SUCCESS, s, "When a run last exited 0 (Unix time).");
    metrics::describe_gauge!(LAST_RUN, s, "When the last run ended (Unix time).");
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

/// Records the run's end and writes the file (atomically: a collector never reads half a
/// file). A failure is a warning: the command's outcome matters more.
pub(crate) fn flush(code: u8, started: Instant) {
    let Some((path, handle)) = FILE.get() else { return };
    let now = unix_now();
    metrics::gauge!(EXIT_CODE).set(f64::from(code));
    metrics::gauge!(DURATION).set(started.elapsed().as_secs_f64());
    metrics::gauge!(LAST_RUN).set(now);
    let last = if code == 0 {
        Some(now)
    } else {
        std::fs::read_to_string(path).ok().and_then(|t| previous(&t, LAST_SUCCESS))
    };
    if let Some(t) = last {
        metrics::gauge!(LAST_SUCCESS).set(t);
    }
    write(path, handle);
}

/// Before `run` replaces itself with the command (nested, or failing open): what is known so
/// far, since nothing runs after.
pub(crate) fn flush_before_exec() {
    if let Some((path, handle)) = FILE.get() {
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
}
