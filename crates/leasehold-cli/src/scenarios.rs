//! The scenarios `leasehold chaos` and `leasehold bench` run, as `--scenario` names them:
//! compiled into every build, so the command line and `--help` read the same when the tools
//! themselves are compiled out (features `chaos` and `bench`).

/// `chaos --scenario`'s help: the stores whose private servers `store-kill` and `failover`
/// start, as the harness's kits say (none in a build without the `chaos` feature).
pub fn chaos_scenario_help() -> String {
    format!(
        "The scenario. store-kill and failover start private servers of the --store URL's kind \
         ({}) and never touch the server the URL names.",
        with_plans()
    )
}

/// `chaos --topology`'s help: the harness's topologies, by name or (`long`) with what each
/// starts and runs.
pub fn topology_help(long: bool) -> String {
    format!(
        "Instead of the --store URL's kind, a private deployment this tool starts for every \
         trial: {}. A --store URL of the same kind gives its options.",
        topologies(long)
    )
}

#[cfg(feature = "chaos")]
fn with_plans() -> String {
    use leasehold_harness::stores::with_plan;
    let names = |failover| with_plan(failover).iter().map(|(s, _)| *s).collect::<Vec<_>>();
    format!("store-kill: {}; failover: {}", names(false).join(", "), names(true).join(", "))
}

#[cfg(not(feature = "chaos"))]
fn with_plans() -> String {
    NO_CHAOS.to_owned()
}

#[cfg(feature = "chaos")]
fn topologies(long: bool) -> String {
    use leasehold_harness::stores::topology;
    if long { topology::described() } else { topology::names() }
}

#[cfg(not(feature = "chaos"))]
fn topologies(_long: bool) -> String {
    NO_CHAOS.to_owned()
}

/// What the lists say in a build without `chaos`.
#[cfg(not(feature = "chaos"))]
const NO_CHAOS: &str = "none in this build: the feature `chaos` is off";

/// The scenarios `bench` runs, as `--scenario` spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchScenario {
    /// One task, acquire + release of one free key, back to back.
    Uncontended,
    /// `--tasks` tasks contending for one key with an empty critical section.
    Handoff,
    /// 64 tasks, each on its own key, over one connection.
    ManyKeys,
    /// `--leases` leases held with auto-renew on one connection.
    HoldMany,
    /// One task: the mutex, a permit of a semaphore of 3 and a reader, each acquire +
    /// release of a free key, interleaved in the same run.
    Primitives,
    /// All of the above.
    All,
    /// `--leases` distinct keys locked once each (acquire, fenced write, release), and the
    /// store's memory or table size before, after the last key and after the horizon (the
    /// store URL's `horizon=`); redis:// and postgres:// only, not part of `all`.
    Scale,
}

/// The scenarios `chaos` runs, as `--scenario` spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChaosScenario {
    /// A holder frozen past its lease (SIGSTOP) writes after its successor.
    StalledHolder,
    /// The same, the resource an HTTP service behind `leasehold fence-proxy`.
    StalledHolderHttp,
    /// The holder frozen inside its fence-checked transaction.
    StalledHolderTx,
    /// The holder cut off from the store by a fault proxy, still running.
    Partition,
    /// A private store server killed under the holder.
    StoreKill,
    /// A private primary lost, its replica promoted.
    Failover,
    /// Acquires whose replies never come.
    UnknownAcquire,
}

#[cfg(feature = "chaos")]
impl ChaosScenario {
    /// Whether the holder loses the store (and should notice) rather than freezing.
    pub fn cuts_the_holder_off(self) -> bool {
        matches!(
            self,
            ChaosScenario::Partition | ChaosScenario::StoreKill | ChaosScenario::Failover
        )
    }

    /// Whether the store itself fails (a private server the tool started).
    pub fn fails_the_store(self) -> bool {
        matches!(self, ChaosScenario::StoreKill | ChaosScenario::Failover)
    }
}

impl std::fmt::Display for ChaosScenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use clap::ValueEnum;
        match self.to_possible_value() {
            Some(v) => f.pad(v.get_name()),
            None => write!(f, "{self:?}"),
        }
    }
}
