//! The command line, as clap definitions: every subcommand, its options and its help text.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use leasehold::Wait;

use crate::{bench, dur, proxy, run};

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
  sqlite://PATH                                        embedded lease table (the default)
  file://DIR                                           flock(2) session locks (Linux)
  redis://[USER:PASS@]HOST:PORT[/DB][?prefix=P&wait_replicas=N&wait_timeout=100ms]
  rediss://[USER:PASS@]HOST:PORT[/DB][?tls_ca=PATH]    the same over TLS
  redis-cluster://[USER:PASS@]H1:P1[,H2:P2…][?prefix=P]  Redis Cluster (seed nodes)
  redis-sentinel://[USER:PASS@]S1:P1[,S2:P2…]/SERVICE[?db=N&prefix=P&wait_replicas=N]
                                                       the primary Redis Sentinels name
  redlock://H1:P1,H2:P2,H3:P3                          Redlock over independent primaries
  postgres://USER[:PASS]@HOST:PORT/DB[?schema=S&mode=session]
  mysql://USER[:PASS]@HOST:PORT/DB[?mode=session]
  etcd://H1:P1[,H2:P2…][/PREFIX][?ttl=10s]
  zk://H1:P1[,H2:P2…][/CHROOT][?session=10s]
  nats://[USER:PASS@]H1:P1[,H2:P2…][/BUCKET][?replicas=1&storage=file]  NATS JetStream KV
Keep passwords out of `ps` and shell history with --store-file or $LEASEHOLD_STORE_FILE
(a file of mode 0600 holding the URL).";

/// Distributed locks and leases that stay correct when a holder stalls.
#[derive(Parser, Debug)]
#[command(name = "leasehold", version, after_help = EXIT_CODES)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

/// Where the store is.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct StoreOpt {
    /// Store URL (the forms are listed in `leasehold --help`); else --store-file, else
    /// $LEASEHOLD_STORE, else $LEASEHOLD_STORE_FILE, else the per-user embedded store.
    #[arg(long, value_name = "URL", conflicts_with = "store_file")]
    pub store: Option<String>,
    /// Read the store URL from the first line of PATH (e.g. a file of mode 0600), which keeps
    /// a password out of `ps` and shell history. Also $LEASEHOLD_STORE_FILE.
    #[arg(long, value_name = "PATH")]
    pub store_file: Option<PathBuf>,
}

/// The bound on every store call.
#[derive(Args, Debug, Clone, Copy)]
pub(crate) struct TimeoutOpt {
    /// Bound on connecting (name lookup, TCP, TLS, authentication) and on each store request;
    /// a store that does not answer within it is unavailable (exit 69).
    #[arg(long, default_value = "5s", value_parser = dur::parse_positive, value_name = "DUR",
          allow_hyphen_values = true)]
    pub timeout: Duration,
}

#[derive(Args, Debug)]
pub(crate) struct GrantOpt {
    /// Lease length (`run` renews it every ttl/3; at least 100ms).
    #[arg(long, default_value = "30s", value_parser = dur::parse_positive, value_name = "DUR",
          allow_hyphen_values = true)]
    pub ttl: Duration,
    /// How long to wait for a busy key: a duration or `forever` (default: try once).
    #[arg(long, default_value = "0", value_parser = parse_wait, value_name = "DUR|forever",
          allow_hyphen_values = true)]
    pub wait: Wait,
}

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
        scenario: bench::Scenario,
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
        /// (cluster.json in --out).
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
        /// The scenario.
        /// store-kill and failover start private servers of the --store URL's kind (redis,
        /// etcd; zk for store-kill) and never touch the server the URL names.
        #[arg(long, value_enum, default_value_t = crate::chaos::Scenario::StalledHolder)]
        scenario: crate::chaos::Scenario,
        /// Instead of the --store URL's kind, a private deployment this tool starts for every
        /// trial: zk-ensemble (3 ZooKeeper nodes: failover, store-kill, partition), pg-sync
        /// (PostgreSQL with a synchronous standby: failover), redlock5 (5 Redis instances:
        /// store-kill, partition of a minority), redlock5-majority (store-kill until a
        /// majority has forgotten), redis-cluster or redis-sentinel (failover losing the
        /// holder's grant: the replica cut off before it, then promoted; use --ttl 5s / 10s).
        /// A --store URL of the same kind gives its options.
        #[arg(long, value_name = "NAME")]
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

fn parse_wait(s: &str) -> Result<Wait, String> {
    match s {
        "forever" => Ok(Wait::Forever),
        _ => dur::parse(s).map(|d| if d.is_zero() { Wait::No } else { Wait::For(d) }),
    }
}
