//! `leasehold`: run a command under a fenced lease, and inspect or manage leases by hand.

mod bench;
mod chaos;
mod doctor;
mod dur;
mod manual;
mod proxy;
mod run;
mod shell;
mod size;
mod svg;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use leasehold::fence::{ENV_FENCE, ENV_KEY, ENV_OWNER};
use leasehold::{Error, LockKind, Locker, OwnerToken, Wait};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// sysexits(3) codes, plus our own for a lost lease.
mod code {
    pub const USAGE: u8 = 64;
    pub const UNAVAILABLE: u8 = 69;
    pub const CONFIG: u8 = 78;
    pub const SOFTWARE: u8 = 70;
    pub const BUSY: u8 = 75;
    pub const NOT_OWNER: u8 = 77;
    pub const LOST: u8 = 79;
    pub const CANNOT_EXECUTE: u8 = 126;
    pub const NOT_FOUND: u8 = 127;
}

const EXIT_CODES: &str = "\
Exit codes:
  0    success; for `run`, the command's own exit code (128+N if it died of signal N)
  64   invalid usage or input (bad key, ttl, duration, store URL, owner token)
  69   store unavailable, or the outcome of a request is unknown
  75   busy: the key was not acquired within --wait
  77   not the owner: renew/release of a lease that is no longer ours
  78   the store refused the configuration: authentication, TLS, a missing database, role
       or DB index (never counted as unavailable; `run` never runs the command)
  79   the lease was lost while the command ran; the command was terminated
  126  the command could not be executed; 127: the command was not found

Store: --store URL, else $LEASEHOLD_STORE, else sqlite://$XDG_STATE_HOME/leasehold/leasehold.db
(~/.local/state/leasehold/leasehold.db). URLs: sqlite://PATH, file://DIR,
redis://HOST:PORT[/DB][?prefix=P&wait_replicas=N&wait_timeout=100ms], redlock://H1:P1,H2:P2,H3:P3.";

/// Distributed locks and leases that stay correct when a holder stalls.
#[derive(Parser, Debug)]
#[command(name = "leasehold", version, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Args, Debug, Clone)]
struct StoreOpt {
    /// Store URL (sqlite://PATH, file://DIR, redis://HOST:PORT, redlock://H1:P1,H2:P2,H3:P3,
    /// postgres://USER@HOST:PORT/DB[?mode=session], mysql://USER@HOST:PORT/DB[?mode=session],
    /// etcd://H1:P1,H2:P2/PREFIX, zk://H1:P1,H2:P2/CHROOT).
    #[arg(long, value_name = "URL")]
    store: Option<String>,
}

#[derive(Args, Debug)]
struct GrantOpt {
    /// Lease length (`run` renews it every ttl/3).
    #[arg(long, default_value = "30s", value_parser = dur::parse, value_name = "DUR")]
    ttl: Duration,
    /// How long to wait for a busy key: a duration or `forever` (default: try once).
    #[arg(long, default_value = "0", value_parser = parse_wait, value_name = "DUR|forever")]
    wait: Wait,
}

/// `run --if-unavailable`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum IfUnavailable {
    /// Exit 69 (fail closed).
    Fail,
    /// Run the command without a lease (fail open).
    Run,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run CMD while holding KEY: flock(1) for a cluster.
    ///
    /// Exports LEASEHOLD_KEY, LEASEHOLD_FENCE and LEASEHOLD_OWNER to the command and renews
    /// the lease every ttl/3. If the lease is lost, or a renewal cannot be confirmed before
    /// the local deadline, the command's process group gets SIGTERM, then SIGKILL after
    /// --grace, and leasehold exits 79. On lease stores the local deadline is placed --grace
    /// earlier (up to ttl/2), so the SIGKILL lands before the store can hand the key to
    /// anyone else. SIGINT, SIGTERM and SIGHUP are forwarded to the command's process group.
    ///
    /// Nested in a `run` of the same KEY on the same store (LEASEHOLD_KEY, LEASEHOLD_OWNER
    /// and LEASEHOLD_STORE_ID in the environment, and the store confirming that grant), the
    /// command runs at once under the parent's grant, with the same fence, instead of waiting
    /// on its own parent. A nested run of another key acquires as usual.
    Run {
        #[command(flatten)]
        store: StoreOpt,
        #[command(flatten)]
        grant: GrantOpt,
        /// Time between SIGTERM and SIGKILL when the lease is lost.
        #[arg(long, default_value = "5s", value_parser = dur::parse, value_name = "DUR")]
        grace: Duration,
        /// When the store cannot be reached or does not answer in time: `fail` (exit 69), or
        /// `run` the command anyway, without a lease or LEASEHOLD_FENCE, after a warning (fail
        /// open: a slow store's holder may run alongside). Busy and store errors (a READONLY
        /// replica, a SQL error) never count as unavailable: they exit 75 and 69.
        #[arg(long, value_enum, default_value = "fail", value_name = "fail|run")]
        if_unavailable: IfUnavailable,
        /// At exit, write the run's metrics (acquire wait, hold time, renewals, losses…) to
        /// PATH in the Prometheus text format, e.g. for node-exporter's textfile collector.
        #[arg(long, value_name = "PATH")]
        metrics_file: Option<std::path::PathBuf>,
        /// The key to hold.
        key: String,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
    /// Acquire KEY and leave it held until its TTL ends; prints the owner token and fence.
    Acquire {
        #[command(flatten)]
        store: StoreOpt,
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
        /// New lease length, from now.
        #[arg(long, default_value = "30s", value_parser = dur::parse, value_name = "DUR")]
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
        /// The owner token printed by `acquire`.
        #[arg(long, value_name = "TOKEN")]
        owner: String,
        /// The key.
        key: String,
    },
    /// Measure the store against a baseline in the same run (raw client, peer crate).
    ///
    /// Scenarios: uncontended (one task, acquire + release), handoff (--tasks contenders on
    /// one key), many-keys (64 tasks, own keys, one connection), hold-many (--leases leases
    /// with auto-renew). On redis:// the baselines are the raw redis-rs client doing the same
    /// round trips, redis-benchmark, and (built with --features peers) the rslock crate; on
    /// postgres:// pgbench running leasehold's own statements; on mysql:// the raw
    /// mysql_async client sending them; on etcd:// leasehold's raw etcd gRPC client sending them and etcd's
    /// own Lock RPC (the etcdctl lock recipe).
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
        #[arg(long, default_value = "3s", value_parser = dur::parse, value_name = "DUR")]
        duration: Duration,
        /// Repetitions; figures are medians over runs.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Leases held in the hold-many scenario.
        #[arg(long, default_value_t = 100_000)]
        leases: usize,
        /// Directory for bench.json and one latency-percentile SVG per scenario.
        #[arg(long, value_name = "DIR")]
        out: Option<std::path::PathBuf>,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
        /// Tokio runtime for the whole bench: `current` (one thread, like pgbench and
        /// redis-benchmark clients) or `multi` (two workers). Every contender runs on it.
        #[arg(long, value_enum, default_value = "current")]
        runtime: Runtime,
    },
    /// Read the store's real configuration and say what this deployment guarantees.
    ///
    /// Redis: persistence (appendonly, appendfsync, save), role, replicas,
    /// min-replicas-to-write, version. PostgreSQL: synchronous_commit, standbys, fsync, a
    /// transaction-pooling proxy in front. MySQL/MariaDB: flush settings, replication. etcd and
    /// ZooKeeper: members, leader, session timeout. Plus the store's clock offset where the
    /// protocol reveals it, and the settings that would change the verdict.
    Doctor {
        #[command(flatten)]
        store: StoreOpt,
        /// Print JSON.
        #[arg(long)]
        json: bool,
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
    /// partitioned holder learned of its loss too late.
    Chaos {
        #[command(flatten)]
        store: StoreOpt,
        /// The scenario: stalled-holder, stalled-holder-http, partition, store-kill, failover
        /// or unknown-acquire.
        /// store-kill and failover start private servers of the --store URL's kind (redis,
        /// etcd; zk for store-kill) and never touch the server the URL names.
        #[arg(long, default_value = "stalled-holder")]
        scenario: String,
        /// Trials with fencing.
        #[arg(long, default_value_t = 20)]
        trials: usize,
        /// Trials of the unfenced control (default: as many as --trials); for
        /// unknown-acquire, trials of its `cut` arm.
        #[arg(long)]
        control_trials: Option<usize>,
        /// Lease length of the holder (session stores: their session timeout applies).
        #[arg(long, default_value = "500ms", value_parser = dur::parse, value_name = "DUR")]
        ttl: Duration,
        /// Directory for report.json and timeline.svg.
        #[arg(long, default_value = "leasehold-chaos", value_name = "DIR")]
        out: std::path::PathBuf,
    },
    /// (internal) The holder process of `chaos`.
    #[command(hide = true)]
    ChaosWorker {
        #[command(flatten)]
        store: StoreOpt,
        #[arg(long)]
        key: String,
        #[arg(long)]
        ttl_ms: u64,
        #[arg(long)]
        resource: String,
        #[arg(long)]
        fenced: u8,
    },
    /// Fence an HTTP service: a reverse proxy that admits a request only under the newest
    /// grant of KEY that the store confirms.
    #[command(long_about = proxy::ABOUT)]
    FenceProxy {
        #[command(flatten)]
        store: StoreOpt,
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
    /// Print a shell completion script (e.g. `leasehold completions bash >
    /// ~/.local/share/bash-completion/completions/leasehold`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff; `leasehold man | man -l -`).
    Man,
    /// Measure the store's renewal round trips and this host's pauses; recommend a ttl,
    /// renew interval, margin and `run --grace`, with the arithmetic.
    ///
    /// A private probe key is acquired, renewed one request at a time for --for, and
    /// released; meanwhile a task sleeping 1 ms at a time records how late it wakes. No
    /// observed percentile bounds a future pause: fencing stays required.
    Size {
        #[command(flatten)]
        store: StoreOpt,
        /// How long to measure (15 s gives the pause sampler about 14,000 samples: enough for
        /// a p99.9 resting on more than 10; shorter runs say how few it rests on).
        #[arg(long = "for", default_value = "15s", value_parser = dur::parse, value_name = "DUR")]
        duration: Duration,
        /// The job's longest step between `admit()` checks (for `run`: how long the command
        /// needs to stop after SIGTERM).
        #[arg(long, value_parser = dur::parse, value_name = "DUR")]
        job: Option<Duration>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List holders: key, owner, fence, time left.
    Status {
        #[command(flatten)]
        store: StoreOpt,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Only this key.
        key: Option<String>,
    },
}

/// The tokio runtime `bench` runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Runtime {
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

/// How a command ends: an exit code and, unless it is a success, one line for stderr.
struct Exit {
    code: u8,
    msg: Option<String>,
}

impl Exit {
    fn ok(code: u8) -> Self {
        Exit { code, msg: None }
    }
    fn fail(code: u8, msg: impl Into<String>) -> Self {
        Exit { code, msg: Some(msg.into()) }
    }
}

impl From<Error> for Exit {
    fn from(e: Error) -> Self {
        let code = match &e {
            Error::InvalidInput(_) => code::USAGE,
            Error::Busy { .. } | Error::HeldByThisLocker { .. } => code::BUSY,
            Error::NotOwner { .. } => code::NOT_OWNER,
            Error::Lost { .. } => code::LOST,
            Error::Config { .. } => code::CONFIG,
            _ => code::UNAVAILABLE,
        };
        // The whole chain on one line.
        let mut msg = e.to_string();
        let mut src = std::error::Error::source(&e);
        while let Some(cause) = src {
            let text = cause.to_string();
            if !msg.contains(&text) {
                msg = format!("{msg}: {text}");
            }
            src = cause.source();
        }
        Exit::fail(code, msg.replace('\n', " "))
    }
}

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        eprintln!("leasehold: internal error: {info}");
    }));
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return ExitCode::from(clap_exit(e)),
    };
    match &cli.cmd {
        Cmd::Completions { shell } => return shell::completions(*shell),
        Cmd::Man => return shell::man(),
        _ => {}
    }
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing_subscriber::filter::LevelFilter::WARN)
        .with_target(false)
        .without_time()
        .try_init();
    let rt = match &cli.cmd {
        Cmd::Bench { runtime: Runtime::Current, .. } => {
            tokio::runtime::Builder::new_current_thread().enable_all().build()
        }
        _ => tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build(),
    };
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("leasehold: cannot start the runtime: {e}");
            return ExitCode::from(code::SOFTWARE);
        }
    };
    let exit = rt.block_on(dispatch(cli.cmd));
    if let Some(msg) = &exit.msg {
        eprintln!("leasehold: {msg}");
    }
    // Background releases and the like get a moment, never a hang.
    rt.shutdown_timeout(Duration::from_millis(500));
    ExitCode::from(exit.code)
}

/// Help and version go to stdout with 0; every other parse error is one line and 64.
fn clap_exit(e: clap::Error) -> u8 {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            0
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            eprint!("{}", e.render());
            code::USAGE
        }
        _ => {
            let text = e.render().to_string();
            let line: Vec<&str> = text
                .lines()
                .map(str::trim)
                .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
                .filter(|l| !l.is_empty())
                .collect();
            let line = line.join(" ");
            let line = line.strip_prefix("error: ").unwrap_or(&line);
            eprintln!("leasehold: {line} (see 'leasehold --help')");
            code::USAGE
        }
    }
}

fn store_url(opt: StoreOpt) -> Result<String, Exit> {
    if let Some(s) = opt.store {
        return Ok(s);
    }
    if let Ok(s) = std::env::var("LEASEHOLD_STORE")
        && !s.is_empty()
    {
        return Ok(s);
    }
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(std::path::PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".local/state"))
        })
        .ok_or_else(|| {
            Exit::fail(
                code::USAGE,
                "no --store, no $LEASEHOLD_STORE, and no $HOME for the default store",
            )
        })?;
    Ok(format!("sqlite://{}", state.join("leasehold").join("leasehold.db").display()))
}

async fn chaos_cmd(
    opt: StoreOpt,
    scenario: String,
    (trials, control_trials): (usize, usize),
    ttl: Duration,
    out: std::path::PathBuf,
) -> Result<Exit, Exit> {
    if trials == 0 || ttl.is_zero() {
        return Err(Exit::fail(code::USAGE, "--trials and --ttl must be positive"));
    }
    let url = store_url(opt)?;
    let settings = chaos::Settings { url, scenario, trials, control_trials, ttl, out: out.clone() };
    let report = chaos::run(settings)
        .await
        .map_err(|e| Exit::fail(code::UNAVAILABLE, format!("chaos: {e}")))?;
    print!("{}", chaos::table(&report));
    println!(
        "
report: {0}/report.json · timeline: {0}/timeline.svg",
        out.display()
    );
    match chaos::verdict(&report) {
        Ok(()) => Ok(Exit::ok(0)),
        Err(e) => Err(Exit::fail(1, format!("chaos: {e}"))),
    }
}

async fn doctor_cmd(opt: StoreOpt, json: bool) -> Result<Exit, Exit> {
    let url = store_url(opt.clone())?;
    let locker = connect(opt).await?;
    match doctor::run(&url).await {
        Ok(report) => {
            if json {
                println!("{}", doctor::json(&url, &locker, &report));
            } else {
                print!("{}", doctor::text(&url, &locker, &report));
            }
            Ok(Exit::ok(0))
        }
        Err(e) => Err(Exit::fail(code::UNAVAILABLE, format!("doctor: {e}"))),
    }
}

async fn connect(opt: StoreOpt) -> Result<Locker, Exit> {
    let url = store_url(opt)?;
    Ok(Locker::connect(&url).await?)
}

async fn dispatch(cmd: Cmd) -> Exit {
    let r = match cmd {
        Cmd::Run { store, grant, grace, if_unavailable, metrics_file, key, command } => {
            run::install_metrics(metrics_file);
            let r = run::run(store, grant, grace, if_unavailable, key, command).await;
            run::flush_metrics();
            r
        }
        Cmd::Acquire { store, grant, json, key } => manual::acquire(store, grant, json, key).await,
        Cmd::Renew { store, ttl, owner, key } => manual::renew(store, ttl, owner, key).await,
        Cmd::Release { store, owner, key } => manual::release(store, owner, key).await,
        Cmd::Status { store, json, key } => manual::status(store, json, key).await,
        // Answered in main, before a runtime starts.
        Cmd::Completions { .. } | Cmd::Man => Ok(Exit::ok(0)),
        Cmd::Doctor { store, json } => doctor_cmd(store, json).await,
        Cmd::Size { store, duration, job, json } => size::size(store, duration, job, json).await,
        Cmd::Chaos { store, scenario, trials, control_trials, ttl, out } => {
            let control = control_trials.unwrap_or(trials);
            chaos_cmd(store, scenario, (trials, control), ttl, out).await
        }
        Cmd::ChaosWorker { store, key, ttl_ms, resource, fenced } => match store_url(store) {
            Ok(url) => {
                let ttl = Duration::from_millis(ttl_ms);
                Ok(Exit::ok(chaos::worker(&url, &key, ttl, &resource, fenced == 1).await as u8))
            }
            Err(e) => Err(e),
        },
        Cmd::FenceProxy { store, key, listen, upstream } => {
            proxy::fence_proxy(store, key, listen, upstream).await
        }
        Cmd::Bench { store, scenario, tasks, duration, runs, leases, out, json, runtime } => {
            bench_cmd(store, scenario, tasks, duration, runs, leases, out, json, runtime).await
        }
    };
    r.unwrap_or_else(|e| e)
}

#[allow(clippy::too_many_arguments)]
async fn bench_cmd(
    store: StoreOpt,
    scenario: bench::Scenario,
    tasks: usize,
    duration: Duration,
    runs: usize,
    leases: usize,
    out: Option<std::path::PathBuf>,
    json: bool,
    runtime: Runtime,
) -> Result<Exit, Exit> {
    if tasks == 0 || runs == 0 || leases == 0 || duration.is_zero() {
        return Err(Exit::fail(
            code::USAGE,
            "--tasks, --runs, --leases and --duration must be positive",
        ));
    }
    let url = store_url(store)?;
    let runtime = match runtime {
        Runtime::Current => "current_thread",
        Runtime::Multi => "multi_thread (2 workers)",
    };
    let settings = bench::Settings { url, scenario, tasks, duration, runs, leases, runtime };
    let report = bench::run(settings)
        .await
        .map_err(|e| Exit::fail(code::UNAVAILABLE, format!("bench: {e}")))?;
    let text = serde_json::to_string_pretty(&report)
        .map_err(|e| Exit::fail(code::UNAVAILABLE, format!("bench: {e}")))?;
    if let Some(dir) = out {
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(&dir)?;
            std::fs::write(dir.join("bench.json"), format!("{text}\n"))?;
            for (name, svg) in svg::bench_plots(&report) {
                std::fs::write(dir.join(name), svg)?;
            }
            Ok(())
        };
        write().map_err(|e| {
            Exit::fail(code::UNAVAILABLE, format!("cannot write {}: {e}", dir.display()))
        })?;
    }
    if json {
        println!("{text}");
    } else {
        print!("{}", bench::table(&report));
    }
    Ok(Exit::ok(0))
}
