//! `leasehold-model`: runs the protocol model with the bounds given, prints the state counts,
//! the run time and every property's outcome (with the shortest trace of each discovery).
//! `scripts/model` runs it with the deeper bounds `docs/model.md` records.
//!
//! ```text
//! leasehold-model [lock|fence|faults|liveness|deep|liveness-deep|lock3|fence3|faults3|deep3]
//!                 [--clients N]
//!                 [--horizon N] [--ttl N] [--margin N] [--drift-every N] [--lossy 0|1]
//!                 [--acquisitions N] [--effects N] [--failovers N] [--skew N]
//!                 [--broken NAME] [--threads N] [--limit STATES] [--traces] [--symmetry]
//! ```
//!
//! `--symmetry` (safety runs): depth-first, one state per renumbering of the clients.
//! With `--broken NAME` the run stops at the first violation and prints its trace (BFS: a
//! shortest one). Exit status 0 when every `always`/`eventually` property holds and every
//! `sometimes` one is reached (a broken rule's run: when a violation was found).
//!
//! ```text
//! ```

use std::process::ExitCode;
use std::time::Instant;

use leasehold_model::{Broken, Config, Protocol, props, trace};
use stateright::{Checker, HasDiscoveries, Model};

fn broken(name: &str) -> Option<Broken> {
    Broken::ALL
        .into_iter()
        .chain([Broken::Nothing])
        .find(|b| format!("{b:?}").eq_ignore_ascii_case(name))
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1).peekable();
    let preset = args.peek().cloned().unwrap_or_default();
    // NAME3: the same bounds with three clients (one acquire each where two would be out of
    // reach), checked with symmetry.
    let three = |c: Config, acquisitions| Config { clients: 3, acquisitions, ..c };
    let mut symmetry = preset.ends_with('3');
    let mut cfg = match preset.as_str() {
        "lock" => Config::lock(),
        "fence" => Config::fence(),
        "faults" => Config::faults(),
        "liveness" => Config::liveness(),
        "deep" => Config::deep(),
        "liveness-deep" => Config::liveness_deep(),
        "lock3" => three(Config::lock(), 1),
        "fence3" => three(Config::fence(), 2),
        "faults3" => three(Config::faults(), 1),
        "deep3" => three(Config::deep(), 1),
        _ => Config::lock(),
    };
    if !preset.starts_with("--") && !preset.is_empty() {
        args.next();
    }
    let mut threads = 2;
    let mut traces = false;
    let mut limit: Option<usize> = None;
    let mut until_failure = false;
    while let Some(flag) = args.next() {
        if flag == "--traces" {
            traces = true;
            continue;
        }
        if flag == "--symmetry" {
            symmetry = true;
            continue;
        }
        let Some(value) = args.next() else {
            eprintln!("{flag} needs a value");
            return ExitCode::from(64);
        };
        let n = value.parse::<u8>();
        match (flag.as_str(), n) {
            ("--clients", Ok(n)) => cfg.clients = n,
            ("--horizon", Ok(n)) => cfg.horizon = n,
            ("--ttl", Ok(n)) => cfg.ttl = n,
            ("--acquisitions", Ok(n)) => cfg.acquisitions = n,
            ("--effects", Ok(n)) => cfg.effects = n,
            ("--failovers", Ok(n)) => cfg.failovers = n,
            ("--skew", Ok(n)) => cfg.max_skew = n,
            ("--drift-every", Ok(n)) => cfg.drift_every = n,
            ("--margin", Ok(n)) => cfg.margin = n,
            ("--lossy", Ok(n)) => cfg.lossy = n != 0,
            ("--threads", Ok(n)) => threads = usize::from(n),
            ("--limit", _) => limit = value.parse().ok(),
            ("--broken", _) => match broken(&value) {
                Some(b) => {
                    cfg.broken = b;
                    until_failure = b != Broken::Nothing;
                }
                None => {
                    eprintln!("unknown rule {value:?}; one of {:?}", Broken::ALL);
                    return ExitCode::from(64);
                }
            },
            _ => {
                eprintln!("bad argument {flag} {value}");
                return ExitCode::from(64);
            }
        }
    }
    println!("bounds: {cfg:?}");
    let model = Protocol::new(cfg);
    let started = Instant::now();
    let mut builder = model.clone().checker().threads(threads);
    if let Some(n) = limit {
        builder = builder.target_state_count(n);
    }
    if until_failure {
        builder = builder.finish_when(HasDiscoveries::AnyFailures);
    }
    let run = Run { model: &model, started, threads, traces, until_failure };
    let ok = if symmetry && model.config.liveness.is_none() {
        run.report(
            builder.symmetry_fn(leasehold_model::representative).spawn_dfs().join(),
            "DFS, symmetry",
        )
    } else {
        run.report(builder.spawn_bfs().join(), "BFS")
    };
    if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

struct Run<'a> {
    model: &'a Protocol,
    started: Instant,
    threads: usize,
    traces: bool,
    until_failure: bool,
}

impl Run<'_> {
    /// Prints the counts and each property's outcome; whether the run went as it should.
    fn report(&self, checker: impl Checker<Protocol>, search: &str) -> bool {
        let (model, until_failure) = (self.model, self.until_failure);
        let failures = props::failures(model);
        println!(
            "states: {} generated, {} unique, max depth {}, {:.1} s on {} threads ({search})",
            checker.state_count(),
            checker.unique_state_count(),
            checker.max_depth(),
            self.started.elapsed().as_secs_f64(),
            self.threads
        );
        let mut failed = false;
        for name in model.properties().iter().map(|p| p.name) {
            let found = checker.discovery(name);
            let bad = failures.contains(&name);
            let verdict = match (&found, bad) {
                // A broken rule's run stops at its first violation.
                (None, _) if until_failure => "-",
                (None, true) => "holds",
                (Some(_), true) => "VIOLATED",
                (Some(_), false) => "reached",
                (None, false) => "NOT REACHED",
            };
            failed |= !until_failure && found.is_some() == bad;
            println!("  {verdict:<11} {name}");
            if found.is_some() && (self.traces || bad) {
                // A shortest one: the run's own path need not be.
                if let Some(path) = props::shortest(model, name, 40) {
                    print!("{}", trace::render(model, &path));
                }
            }
        }
        let violated = failures.iter().any(|n| checker.discovery(n).is_some());
        if until_failure { violated } else { !failed }
    }
}
