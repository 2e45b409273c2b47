//! The `chaos` and `bench` commands as the command line gives them, each when its cargo
//! feature is built in; without it, the command exits 64 naming the feature (as `review`
//! does). They are the only commands that need the harness crate.

use std::path::PathBuf;
use std::time::Duration;

use crate::args::Runtime;
#[cfg(feature = "bench")]
use crate::bench;
#[cfg(feature = "chaos")]
use crate::chaos;
use crate::exit::{Exit, code};
use crate::opts::StoreOpt;
use crate::scenarios::{BenchScenario, ChaosScenario};
#[cfg(any(feature = "bench", feature = "chaos"))]
use crate::store;

/// The exit of a command compiled out of this build.
#[cfg(not(all(feature = "bench", feature = "chaos")))]
fn not_built(command: &str) -> Exit {
    Exit::fail(
        code::USAGE,
        format!(
            "{command} is not in this build: enable the cargo feature \"{command}\" (cargo \
             install leasehold-cli --features {command})"
        ),
    )
}

/// `leasehold chaos`: checks the options, runs the scenario, prints its table and where the
/// report went; exit 1 when the run's verdict fails.
#[cfg(feature = "chaos")]
pub(crate) async fn chaos(
    opt: StoreOpt,
    (scenario, topology, permits): (ChaosScenario, Option<String>, Option<u32>),
    (trials, control_trials): (usize, usize),
    ttl: Duration,
    out: PathBuf,
) -> Result<Exit, Exit> {
    if trials == 0 || ttl.is_zero() {
        return Err(Exit::fail(code::USAGE, "--trials and --ttl must be positive"));
    }
    if permits.is_some() && (scenario != ChaosScenario::StalledHolder || topology.is_some()) {
        return Err(Exit::fail(
            code::USAGE,
            "--permits runs the stalled-holder scenario on the --store URL only",
        ));
    }
    let url = store::resolve(&opt)?.url;
    let locker = match permits {
        Some(n) => Some(chaos::check_permits(&url, n, ttl).await?),
        None => None,
    };
    let out2 = out.clone();
    let settings = chaos::Settings {
        url,
        scenario,
        trials,
        control_trials,
        ttl,
        out: out2,
        topology,
        permits,
        locker,
    };
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

/// `chaos-worker`: a holder process of a chaos trial.
#[cfg(feature = "chaos")]
pub(crate) async fn chaos_worker(
    key: &str,
    ttl_ms: u64,
    fenced: u8,
    permits: u32,
    gate: u8,
) -> Result<Exit, Exit> {
    chaos::worker_cmd(key, ttl_ms, fenced, permits, gate).await
}

/// `leasehold bench`: checks the options, runs the scenarios, prints the table or the JSON
/// report and writes it (and its charts) to `--out`.
#[cfg(feature = "bench")]
#[allow(clippy::too_many_arguments)]
pub(crate) async fn bench(
    store: StoreOpt,
    scenario: BenchScenario,
    tasks: usize,
    duration: Duration,
    runs: usize,
    leases: usize,
    single: Option<String>,
    out: Option<PathBuf>,
    json: bool,
    runtime: Runtime,
) -> Result<Exit, Exit> {
    if tasks == 0 || runs == 0 || leases == 0 || duration.is_zero() {
        return Err(Exit::fail(
            code::USAGE,
            "--tasks, --runs, --leases and --duration must be positive",
        ));
    }
    let url = store::resolve(&store)?.url;
    let runtime = match runtime {
        Runtime::Current => "current_thread",
        Runtime::Multi => "multi_thread (2 workers)",
    };
    let settings = bench::Settings { url, scenario, tasks, duration, runs, leases, runtime };
    // The reference may carry a password: $LEASEHOLD_BENCH_SINGLE keeps it out of `ps`.
    let single = single.or_else(|| std::env::var(ENV_SINGLE).ok().filter(|s| !s.is_empty()));
    if let Some(single) = single {
        return cluster_bench(settings, &single, out, json).await;
    }
    let report = bench::run(settings)
        .await
        .map_err(|e| Exit::fail(code::UNAVAILABLE, format!("bench: {e}")))?;
    let text = serde_json::to_string_pretty(&report)
        .map_err(|e| Exit::fail(code::UNAVAILABLE, format!("bench: {e}")))?;
    if let Some(dir) = out {
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(&dir)?;
            std::fs::write(dir.join("bench.json"), format!("{text}\n"))?;
            for (name, svg) in bench::bench_plots(&report) {
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

/// Where `bench` reads its reference store when `--single` is not given.
#[cfg(feature = "bench")]
const ENV_SINGLE: &str = "LEASEHOLD_BENCH_SINGLE";

/// `bench --single`: the store against a reference of its family
/// ([`bench::compare_with_reference`]).
#[cfg(feature = "bench")]
async fn cluster_bench(
    settings: bench::Settings,
    single: &str,
    out: Option<PathBuf>,
    json: bool,
) -> Result<Exit, Exit> {
    let single = leasehold::StoreUrl::parse(single)
        .map_err(|e| Exit::fail(code::USAGE, format!("--single: {e}")))?;
    let (text, table) = bench::compare_with_reference(settings, &single)
        .await
        .map_err(|e| Exit::fail(code::UNAVAILABLE, format!("bench: {e}")))?;
    if let Some(dir) = out {
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(dir.join("cluster.json"), format!("{text}\n")))
            .map_err(|e| {
                Exit::fail(code::UNAVAILABLE, format!("cannot write {}: {e}", dir.display()))
            })?;
    }
    if json {
        println!("{text}")
    } else {
        print!("{table}")
    }
    Ok(Exit::ok(0))
}

/// `chaos`, compiled out.
#[cfg(not(feature = "chaos"))]
pub(crate) async fn chaos(
    _: StoreOpt,
    _: (ChaosScenario, Option<String>, Option<u32>),
    _: (usize, usize),
    _: Duration,
    _: PathBuf,
) -> Result<Exit, Exit> {
    Err(not_built("chaos"))
}

/// `chaos-worker`, compiled out.
#[cfg(not(feature = "chaos"))]
pub(crate) async fn chaos_worker(_: &str, _: u64, _: u8, _: u32, _: u8) -> Result<Exit, Exit> {
    Err(not_built("chaos"))
}

/// `bench`, compiled out.
#[cfg(not(feature = "bench"))]
#[allow(clippy::too_many_arguments)]
pub(crate) async fn bench(
    _: StoreOpt,
    _: BenchScenario,
    _: usize,
    _: Duration,
    _: usize,
    _: usize,
    _: Option<String>,
    _: Option<PathBuf>,
    _: bool,
    _: Runtime,
) -> Result<Exit, Exit> {
    Err(not_built("bench"))
}
