//! `leasehold`: run a command under a fenced lease, and inspect or manage leases by hand.

mod args;
#[cfg(feature = "bench")]
mod bench;
#[cfg(feature = "chaos")]
mod chaos;
mod doctor;
mod dur;
mod exit;
mod manual;
mod opts;
mod proxy;
mod review;
mod run;
mod scenarios;
mod shell;
mod size;
mod status;
mod store;
#[cfg(any(feature = "bench", feature = "chaos"))]
mod svg;
mod tools;

use std::process::ExitCode;
use std::time::Duration;

use args::{Cli, Cmd, Runtime};
use clap::Parser;
use exit::{Exit, code};
use opts::{StoreOpt, TimeoutOpt};

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        eprintln!("leasehold: internal error: {info}");
    }));
    // `review` is a linter: its usage errors exit 2, as its other errors do.
    let review = std::env::args_os().nth(1).is_some_and(|a| a == "review");
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if review => return ExitCode::from(clap_exit(e, 2, "leasehold review --help")),
        Err(e) => return ExitCode::from(clap_exit(e, code::USAGE, "leasehold --help")),
    };
    match cli.cmd {
        Cmd::Completions { shell } => shell::completions(shell),
        // No runtime: it reads files.
        Cmd::Review(args) => ExitCode::from(review::main(args)),
        Cmd::Man { dir, command } => shell::man(dir, command),
        // Single-threaded, before any runtime: it forks the command and sets its death signal.
        Cmd::Supervise { grace_ms, command } => {
            ExitCode::from(run::supervise::main(Duration::from_millis(grace_ms), command))
        }
        cmd => dispatch_in_runtime(cmd),
    }
}

fn dispatch_in_runtime(cmd: Cmd) -> ExitCode {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    // Only leasehold's own warnings: a driver's log line (async-nats prints "authorization
    // violation" on a wrong password) would repeat, unredacted and out of order, what the
    // typed error leasehold prints says with the store's URL's password removed.
    let own = tracing_subscriber::filter::Targets::new()
        .with_target("leasehold", tracing_subscriber::filter::LevelFilter::WARN);
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing_subscriber::filter::LevelFilter::WARN)
        .with_target(false)
        .without_time()
        .finish()
        .with(own)
        .try_init();
    let rt = match &cmd {
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
    let exit = rt.block_on(dispatch(cmd));
    if let Some(msg) = &exit.msg {
        eprintln!("leasehold: {msg}");
    }
    // Background releases and the like get a moment, never a hang.
    rt.shutdown_timeout(Duration::from_millis(500));
    ExitCode::from(exit.code)
}

/// Help and version go to stdout with 0; every other parse error is one line pointing at
/// `help`, and `usage` (64; 2 for `review`).
fn clap_exit(e: clap::Error, usage: u8, help: &str) -> u8 {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            0
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            eprint!("{}", e.render());
            usage
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
            eprintln!("leasehold: {line} (see '{help}')");
            usage
        }
    }
}

async fn doctor_cmd(
    opt: StoreOpt,
    TimeoutOpt { timeout }: TimeoutOpt,
    json: bool,
) -> Result<Exit, Exit> {
    let (store, locker) = store::open(&opt, timeout).await?;
    let url = store.url;
    let limit = timeout * 3;
    let probed = tokio::time::timeout(limit + timeout, doctor::run(&url, &locker, limit))
        .await
        .unwrap_or_else(|_| {
            Err(leasehold::Error::Unavailable {
                message: format!(
                    "{} did not answer within {} (3 × --timeout)",
                    url,
                    dur::human(limit)
                ),
                source: None,
            })
        });
    match probed {
        Ok(report) => {
            if json {
                println!("{}", doctor::json(&url, &locker, &report));
            } else {
                print!("{}", doctor::text(&url, &locker, &report));
            }
            Ok(Exit::ok(0))
        }
        Err(e) => {
            let e = Exit::from(e);
            Err(Exit::fail(e.code, format!("doctor: {}", e.msg.unwrap_or_default())))
        }
    }
}

async fn dispatch(cmd: Cmd) -> Exit {
    let r = match cmd {
        Cmd::Run { store, timeout, grant, opt, keys, command } => {
            run::metrics::install(opt.metrics_file.clone(), &keys.join(" "));
            let started = std::time::Instant::now();
            let (r, outcome) = run::run(store, timeout, grant, &opt, keys, command).await;
            run::metrics::flush(outcome, r.as_ref().map_or_else(|e| e.code, |e| e.code), started);
            r
        }
        Cmd::Acquire { store, timeout, grant, json, key } => {
            manual::acquire(store, timeout, grant, json, key).await
        }
        Cmd::Renew { store, timeout, ttl, owner, key } => {
            manual::renew(store, timeout, ttl, owner, key).await
        }
        Cmd::Release { store, timeout, owner, key } => {
            manual::release(store, timeout, owner, key).await
        }
        Cmd::Status { store, timeout, json, show_owner, key } => {
            status::status(store, timeout, status::Show { json, show_owner }, key).await
        }
        // Answered in main, before a runtime starts.
        Cmd::Completions { .. } | Cmd::Man { .. } | Cmd::Supervise { .. } | Cmd::Review(_) => {
            Ok(Exit::ok(0))
        }
        Cmd::Doctor { store, timeout, json } => doctor_cmd(store, timeout, json).await,
        Cmd::Size { store, timeout, duration, job, json } => {
            size::size(store, timeout, duration, job, json).await
        }
        Cmd::Chaos { store, scenario, topology, trials, control_trials, ttl, out, permits } => {
            let control = control_trials.unwrap_or(trials);
            tools::chaos(store, (scenario, topology, permits), (trials, control), ttl, out).await
        }
        Cmd::ChaosWorker { key, ttl_ms, fenced, permits, gate } => {
            tools::chaos_worker(&key, ttl_ms, fenced, permits, gate).await
        }
        Cmd::FenceProxy { store, timeout, key, listen, upstream } => {
            proxy::fence_proxy(store, timeout, key, listen, upstream).await
        }
        Cmd::Bench {
            store,
            scenario,
            tasks,
            duration,
            runs,
            leases,
            single,
            out,
            json,
            runtime,
        } => {
            let b = (store, scenario, tasks, duration, runs, leases, out, json, runtime);
            tools::bench(b.0, b.1, b.2, b.3, b.4, b.5, single, b.6, b.7, b.8).await
        }
    };
    r.unwrap_or_else(|e| e)
}
