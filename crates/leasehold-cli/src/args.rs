//! The command line, as clap definitions: every subcommand, its options and its help text.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::opts::{GrantOpt, StoreOpt, TimeoutOpt};
use crate::run::RunOpt;
use crate::{dur, proxy, run};

pub(crate) const EXIT_CODES: &str = "\
Exit codes:
  0    success; for `run`, the command's own exit code (128+N if it died of signal N)
  64   invalid usage or input (bad key, ttl, duration, store URL, owner token; a --grace
       or --ttl that cannot fit the lease; --permits or --shared on a store that cannot
       hold them, or together, or --permits N naming another N than the runs holding KEY)
  69   store unavailable (cannot connect, no answer within --timeout), or the outcome of a
       request is unknown; `run` never exits 69 once its command has started
  70   internal error; for `run`: its supervisor died (what the command started was killed)
  75   busy: the key was not acquired within --wait (`run -E N` picks another code)
  77   not the owner: renew/release of a lease that is no longer ours
  78   the store refused the configuration: authentication, TLS, a missing database, role
       or DB index (never counted as unavailable: `run` never runs the command)
  79   the lease was lost while the command ran; the command was terminated
  126  the command could not be executed; 127: the command was not found
A command that itself exits 69, 75, 78 or 79 is passed through as it is: leasehold prints a
`leasehold: ` line on stderr whenever the code is its own (and `-E` moves the busy code).

Store: --store URL, else --store-file PATH, else $LEASEHOLD_STORE, else the first line of
$LEASEHOLD_STORE_FILE, else sqlite://$XDG_STATE_HOME/leasehold/leasehold.db
(~/.local/state/leasehold/leasehold.db): a store per user, so two users' runs of one key do
not exclude each other. For one store per machine, point LEASEHOLD_STORE at a file all
users can write, e.g. sqlite:///var/lib/leasehold/leasehold.db (a directory with mode 1777
or a shared group with g+ws, since SQLite creates -wal and -shm files beside it).
URLs:
";

/// The end of the top-level help, after the URLs.
const AFTER_URLS: &str = "\
Keep passwords out of `ps` and shell history with --store-file or $LEASEHOLD_STORE_FILE
(a file of mode 0600 holding the URL).";

/// The top-level help's end: the exit codes, where the store comes from, and the URL of each
/// store built in, from the library's registry (each store's descriptor has its line).
pub(crate) fn after_help() -> String {
    let mut out = String::from(EXIT_CODES);
    for (usage, summary) in leasehold::url_usage() {
        // The summary in a column after the URL; on a line of its own below a long one.
        const COLUMN: usize = 53;
        let width = usage.chars().count();
        out.push_str(&format!("  {usage}"));
        if width < COLUMN - 1 {
            out.push_str(&" ".repeat(COLUMN - width));
        } else if width + summary.chars().count() < 88 {
            out.push_str("  ");
        } else {
            out.push_str(&format!("\n{}", " ".repeat(COLUMN + 2)));
        }
        out.push_str(summary);
        out.push('\n');
    }
    out + AFTER_URLS
}

/// Distributed locks and leases that stay correct when a holder stalls.
#[derive(Parser, Debug)]
#[command(name = "leasehold", version, after_help = after_help())]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Cmd {
    /// Run CMD while holding KEY: flock(1) for a cluster.
    #[command(long_about = run::ABOUT)]
    Run {
        #[command(flatten)]
        store: StoreOpt,
        #[command(flatten)]
        timeout: TimeoutOpt,
        #[command(flatten)]
        grant: GrantOpt,
        #[command(flatten)]
        opt: RunOpt,
        /// The key to hold; several keys are all held at once (taken in sorted order, so
        /// runs naming them in any order never deadlock), one fence per key in
        /// LEASEHOLD_KEY_I / LEASEHOLD_FENCE_I / LEASEHOLD_OWNER_I.
        #[arg(required = true, num_args = 1.., value_name = "KEY")]
        keys: Vec<String>,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
    /// Acquire KEY and leave it held until its TTL ends; prints the owner token and fence.
    Acquire {
        #[command(flatten)]
        store: StoreOpt,
        #[command(flatten)]
        timeout: TimeoutOpt,
        #[command(flatten)]
        grant: GrantOpt,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// The key.
        key: String,
    },
    /// Extend KEY's lease for another TTL, if OWNER still holds it (else exit 77).
    Renew {
        #[command(flatten)]
        store: StoreOpt,
        #[command(flatten)]
        timeout: TimeoutOpt,
        /// New lease length, from now.
        #[arg(long, default_value = "30s", value_parser = dur::parse_positive,
              value_name = "DUR", allow_hyphen_values = true)]
        ttl: Duration,
        /// The owner token printed by `acquire`.
        #[arg(long, value_name = "TOKEN")]
        owner: String,
        /// The key.
        key: String,
    },
    /// Release KEY if OWNER still holds it (else exit 77, leaving the holder in place).
    Release {
        #[command(flatten)]
        store: StoreOpt,
        #[command(flatten)]
        timeout: TimeoutOpt,
        /// The owner token printed by `acquire` (`status --show-owner` shows holders' tokens).
        #[arg(long, value_name = "TOKEN")]
        owner: String,
        /// The key.
        key: String,
    },
    /// List holders: key, short owner id, fence, time left, and who holds it (host, pid,
    /// since, command) where the store keeps that.
    Status {
        #[command(flatten)]
        store: StoreOpt,
        #[command(flatten)]
        timeout: TimeoutOpt,
        /// Print JSON (`owner_id`, and the full `owner` only with --show-owner).
        #[arg(long)]
        json: bool,
        /// Show each holder's full owner token (with it, `release --owner` ends that lease).
        #[arg(long)]
        show_owner: bool,
        /// Only this key.
        key: Option<String>,
    },
    /// Read the store's real configuration and say what this deployment guarantees.
    ///
    /// Redis: persistence (appendonly, appendfsync, save), role, replicas,
    /// min-replicas-to-write, version. PostgreSQL: synchronous_commit, standbys, fsync, a
    /// transaction-pooling proxy in front. MySQL/MariaDB: flush settings, replication. etcd and
    /// ZooKeeper: members, leader, session timeout. Plus the store's clock offset where the
    /// protocol reveals it, and the settings that would change the verdict. The whole
    /// reading is bounded by 3 × --timeout.
    Doctor {
        #[command(flatten)]
        store: StoreOpt,
        #[command(flatten)]
        timeout: TimeoutOpt,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Fence an HTTP service: a reverse proxy that admits a request only under the newest
    /// grant of KEY that the store confirms.
    #[command(long_about = proxy::ABOUT)]
    FenceProxy {
        #[command(flatten)]
        store: StoreOpt,
        #[command(flatten)]
        timeout: TimeoutOpt,
        /// The lock key that guards the upstream.
        #[arg(long, value_name = "KEY")]
        key: String,
        /// Address to listen on (HOST:PORT; port 0 picks one, printed as listening=ADDR).
        #[arg(long, value_name = "ADDR")]
        listen: String,
        /// The fenced service: http://HOST:PORT.
        #[arg(long, value_name = "URL")]
        upstream: String,
    },
    /// Measure the store's renewal round trips and this host's pauses; recommend a ttl,
    /// renew interval, margin and `run --grace`, with the arithmetic.
    ///
    /// A private probe key is acquired, renewed one request at a time for --for, and
    /// released, then forgotten (no key or fence row is left behind); meanwhile an OS thread
    /// sleeping 1 ms at a time records how late it wakes (the async runtime's own lag is
    /// shown apart and not used). No observed percentile bounds a future pause: fencing
    /// stays required.
    Size {
        #[command(flatten)]
        store: StoreOpt,
        #[command(flatten)]
        timeout: TimeoutOpt,
        /// How long to measure (15 s gives the pause sampler about 14,000 samples: enough for
        /// a p99.9 resting on more than 10; shorter runs say how few it rests on).
        #[arg(long = "for", default_value = "15s", value_parser = dur::parse, value_name = "DUR",
              allow_hyphen_values = true)]
        duration: Duration,
        /// The job's longest step between `admit()` checks (for `run`: how long the command
        /// needs to stop after SIGTERM).
        #[arg(long, value_parser = dur::parse, value_name = "DUR", allow_hyphen_values = true)]
        job: Option<Duration>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Measure the store against a baseline in the same run (raw client, peer crate).
    ///
    /// Scenarios: uncontended (one task, acquire + release), handoff (--tasks contenders on
    /// one key), many-keys (64 tasks, own keys, one connection), hold-many (--leases leases
    /// with auto-renew), primitives (mutex, semaphore permit, reader). On redis:// the
    /// baselines are the raw redis-rs client doing the same round trips, redis-benchmark, and
    /// (built with --features peers) the rslock crate, and (built with --features
    /// peer-distributed-lock) the distributed-lock-redis crate's mutex, reader and semaphore
    /// in the primitives scenario; on postgres:// pgbench running leasehold's own statements;
    /// on mysql:// the raw mysql_async client sending them; on etcd:// leasehold's raw etcd
    /// gRPC client sending them and etcd's own Lock RPC (the etcdctl lock recipe).
    Bench {
        #[command(flatten)]
        store: StoreOpt,
        /// Which scenario.
        #[arg(long, value_enum, default_value = "all")]
        scenario: crate::scenarios::BenchScenario,
        /// Contending tasks in the handoff scenario.
        #[arg(long, default_value_t = 8)]
        tasks: usize,
        /// Length of each measurement.
        #[arg(long, default_value = "3s", value_parser = dur::parse, value_name = "DUR",
              allow_hyphen_values = true)]
        duration: Duration,
        /// Repetitions; figures are medians over runs.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Leases held in the hold-many scenario.
        #[arg(long, default_value_t = 100_000)]
        leases: usize,
        /// With a redis-cluster:// --store: measure this one Redis server (redis://H:P) in
        /// the same run instead of the usual baselines, and compare uncontended, handoff and
        /// many-keys cycles/s, server time per cycle per master and the key spread
        /// (cluster.json in --out). Also $LEASEHOLD_BENCH_SINGLE, which keeps a password in
        /// the URL out of `ps` and shell history.
        #[arg(long, value_name = "URL")]
        single: Option<String>,
        /// Directory for bench.json and one latency-percentile SVG per scenario.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
        /// Tokio runtime for the whole bench: `current` (one thread, like pgbench and
        /// redis-benchmark clients) or `multi` (two workers). Every contender runs on it.
        #[arg(long, value_enum, default_value = "current")]
        runtime: Runtime,
    },
    /// Run a failure against the store with real processes, check the history, draw it.
    ///
    /// stalled-holder: a holder process (SIGSTOPped past its lease) and a successor write to a
    /// fenced resource on the same store (PostgreSQL/MySQL fence tables, Redis fenced scripts,
    /// etcd transactions; an SQLite file for the others); once with the fence check, once
    /// without. stalled-holder-http: the same against a recording HTTP service the tool
    /// starts on loopback, behind `leasehold fence-proxy` (the control writes to it directly).
    /// partition: the holder reaches the store through a TCP fault proxy that starts
    /// swallowing its traffic; its lost() must fire before the store grants the key to the
    /// successor (stores on this machine's loopback only). Prints a table, writes report.json
    /// and timeline.svg to --out, exits 1 if a stale write got through WITH fencing or a
    /// partitioned holder learned of its loss too late. The resource's rows or keys are
    /// removed from the store at the end (their final value is in report.json). The store
    /// URL reaches the processes it starts through their environment, never their command
    /// line.
    Chaos {
        #[command(flatten)]
        store: StoreOpt,
        // The scenario; its help lists the stores with failure plans, read from the
        // harness's kits.
        #[arg(long, value_enum, default_value_t = crate::scenarios::ChaosScenario::StalledHolder,
              help = crate::scenarios::chaos_scenario_help())]
        scenario: crate::scenarios::ChaosScenario,
        // A private deployment; its help lists the harness's topologies (by name with -h,
        // with what each starts and runs with --help).
        #[arg(long, value_name = "NAME", help = crate::scenarios::topology_help(false),
              long_help = crate::scenarios::topology_help(true))]
        topology: Option<String>,
        /// Trials with fencing.
        #[arg(long, default_value_t = 20)]
        trials: usize,
        /// Trials of the unfenced control (default: as many as --trials); for
        /// unknown-acquire, trials of its `cut` arm.
        #[arg(long)]
        control_trials: Option<usize>,
        /// Lease length of the holder (session stores: their session timeout applies).
        #[arg(long, default_value = "500ms", value_parser = dur::parse, value_name = "DUR",
              allow_hyphen_values = true)]
        ttl: Duration,
        /// Directory for report.json and timeline.svg.
        #[arg(long, default_value = "leasehold-chaos", value_name = "DIR")]
        out: PathBuf,
        /// stalled-holder on a semaphore of N permits: the frozen holder and its successor
        /// take permits of KEY while N-1 idle holders keep the other slots, so the successor
        /// gets the frozen holder's slot (KEY#SLOT, fenced per slot) once it expires.
        /// Exit 64 on a store that cannot hold semaphores. Default: the plain mutex.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
        permits: Option<u32>,
    },
    /// Find distributed-lock bugs in Python, Java, Go, JS/TS, Rust, PHP and Ruby code
    /// (SETNX then EXPIRE, a bare DEL as release, …); exit 1 on an error-level finding.
    #[command(long_about = crate::review::about(), after_help = crate::review::EXIT_CODES)]
    Review(crate::review::ReviewArgs),
    /// Print a shell completion script (e.g. `leasehold completions bash >
    /// ~/.local/share/bash-completion/completions/leasehold`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print a man page (roff; `leasehold man run | man -l -`), or write one per command.
    Man {
        /// Write leasehold.1 and leasehold-COMMAND.1 for every command into DIR (e.g.
        /// ~/.local/share/man/man1) instead of printing. man looks in man1/ under each
        /// directory of `manpath`; a DIR it does not search gets a note on stderr. Pages are
        /// ASCII (other characters as groff escapes).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// The command whose page to print (default: the top-level page).
        command: Option<String>,
    },
    /// (internal) The holder process of `chaos`; the store URL and the resource come in
    /// LEASEHOLD_STORE and LEASEHOLD_CHAOS_RESOURCE.
    #[command(hide = true)]
    ChaosWorker {
        #[arg(long)]
        key: String,
        #[arg(long)]
        ttl_ms: u64,
        #[arg(long)]
        fenced: u8,
        /// Take one of N permits of KEY instead of KEY itself (0: the mutex).
        #[arg(long, default_value_t = 0)]
        permits: u32,
        /// 1: say `connected` once the store is open and acquire only on `go` from stdin.
        #[arg(long, default_value_t = 0)]
        gate: u8,
    },
    /// (internal) The supervisor `run` puts between itself and the command.
    #[command(hide = true)]
    Supervise {
        /// The grace between SIGTERM and SIGKILL, in milliseconds.
        #[arg(long)]
        grace_ms: u64,
        #[arg(last = true, required = true)]
        command: Vec<OsString>,
    },
}

/// The tokio runtime `bench` runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Runtime {
    /// One thread.
    Current,
    /// Two worker threads.
    Multi,
}
