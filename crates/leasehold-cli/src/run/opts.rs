//! What `run` does beyond the grant, as its command-line options.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::dur;

/// `run --if-unavailable`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IfUnavailable {
    /// Exit 69 (fail closed).
    Fail,
    /// Run the command without a lease (fail open).
    Run,
}

/// What `run` does beyond the grant.
#[derive(Args, Debug)]
pub(crate) struct RunOpt {
    /// Time between SIGTERM and SIGKILL when the lease runs out, when `run` itself gets
    /// SIGTERM (as systemd's stop timeout), and for what the command leaves running at exit
    /// [default: 5s, or the most that fits the ttl]. It must fit: SIGKILL lands before the store may grant the key to
    /// anyone else, so the local deadline is placed grace + slack (ttl/10, at most 2s) before
    /// the lease's end, and it must still leave two renewals (2·ttl/3) before it: grace ≤
    /// ttl·(1 − 0.01) − 2·ttl/3 − slack, else exit 64 with the arithmetic.
    #[arg(long, value_parser = dur::parse, value_name = "DUR", allow_hyphen_values = true)]
    pub grace: Option<Duration>,
    /// Keep the key until DUR after the grant, even when the command ends sooner, so the
    /// same line run by cron on every host runs once per period (ShedLock's
    /// lockAtLeastFor). Lease stores: one owner-checked renewal to the time left, then exit
    /// (the store expires the key). Session stores (file, PostgreSQL/MySQL session locks,
    /// etcd, ZooKeeper), where the lock ends with the process: leasehold stays in the
    /// foreground holding it until then (SIGINT/SIGTERM/SIGHUP release it at once).
    #[arg(long, value_parser = dur::parse, value_name = "DUR", allow_hyphen_values = true)]
    pub at_least: Option<Duration>,
    /// Exit code when the key is busy (default 75), as flock's -E; with it, busy prints
    /// nothing. The command's own codes are always passed through unchanged.
    #[arg(short = 'E', long, value_name = "N")]
    pub conflict_exit_code: Option<u8>,
    /// When the store cannot be reached or does not answer within --timeout: `fail` (exit
    /// 69), or `run` the command anyway, without a lease or LEASEHOLD_FENCE, after a warning
    /// (fail open: a slow store's holder may run alongside). Only an outage counts: busy
    /// exits 75, a refused configuration (authentication, TLS, missing database) exits 78,
    /// and neither ever runs the command.
    #[arg(long, value_enum, default_value = "fail", value_name = "fail|run")]
    pub if_unavailable: IfUnavailable,
    /// At exit, write the run's metrics to PATH in the Prometheus text format, for
    /// node-exporter's textfile collector (written atomically; every series has the label
    /// key=KEY, so two jobs' files side by side do not collide): acquire wait, hold time,
    /// renewals, losses, and leasehold_run_exit_code, leasehold_run_duration_seconds,
    /// leasehold_run_outcome{outcome} (1 for this run's: success, failed, skipped (busy
    /// with -E), busy, lost, unavailable, config, unlocked (--if-unavailable run), nested,
    /// error; 0 for the others), leasehold_run_last_outcome_timestamp_seconds{outcome}, and
    /// leasehold_run_last_success_timestamp_seconds: the command's own success only (a skip,
    /// a busy key, a lost lease or a failed job never moves it); the timestamps are kept
    /// from the previous file.
    #[arg(long, value_name = "PATH")]
    pub metrics_file: Option<PathBuf>,
    /// Hold one of N permits of KEY (a semaphore, as consul lock -n): at most N runs hold
    /// KEY at once, each in a slot of its own, KEY#0 … KEY#(N-1), with that slot's own
    /// fence. Exports LEASEHOLD_SLOT (the slot, 0..N), LEASEHOLD_PERMITS (N), and
    /// LEASEHOLD_KEY / LEASEHOLD_FENCE / LEASEHOLD_OWNER of the slot (KEY#SLOT). Runs
    /// naming another N for a KEY held are refused (exit 64); so is a store that cannot
    /// hold semaphores (`leasehold doctor` says which can).
    #[arg(short = 'n', long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub permits: Option<u32>,
    /// Hold KEY as a reader (as flock -s): readers run together, a plain `run` of KEY is
    /// the writer and runs alone; a writer waiting keeps new readers out until it has run,
    /// where the store can (sqlite, redis). Exports LEASEHOLD_MODE=shared and the reader's
    /// own fence. Exit 64 on a store that cannot hold readers, and with --permits (a
    /// semaphore has no readers).
    #[arg(short = 's', long, conflicts_with = "permits")]
    pub shared: bool,
    /// Record nothing about this holder beside the grant. By default `run` records its host,
    /// pid, start time and command line (at most 256 bytes; arguments that look like secrets
    /// redacted: URL userinfo, values of --password/-p/--token/--secret/--*key*-style flags
    /// and of NAME=VALUE pairs with such names, Authorization headers) for `status` and a busy
    /// run's message. Also LEASEHOLD_NO_HOLDER_INFO=1.
    #[arg(long)]
    pub no_holder_info: bool,
}
