//! The typed report of a `leasehold bench` run: `bench.json` and `--json` are it serialized,
//! and the text table ([`super::table`]) and the latency SVGs ([`super::bench_plots`])
//! read the same values. Field names are the JSON's; absent figures (a baseline this store
//! has none of) are left out, figures a contender could not produce are `null`.

use serde::Serialize;

/// Everything one `leasehold bench` invocation measured.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The store URL, its password redacted.
    pub store: String,
    /// The store's backend name (its guarantees' `backend`).
    pub backend: &'static str,
    pub runs: usize,
    /// The tokio runtime every contender ran on.
    pub runtime: &'static str,
    pub duration_s: f64,
    /// The server's version, where the bench can ask it (its kit's server view).
    pub server_version: Option<String>,
    pub machine: Machine,
    pub scenarios: Scenarios,
}

/// The machine the bench ran on.
#[derive(Debug, Serialize)]
pub struct Machine {
    pub cpus: usize,
    pub cpu: Option<String>,
    pub kernel: Option<String>,
}

/// The scenarios that ran, in the order the table and the JSON list them (by name).
#[derive(Debug, Default, Serialize)]
pub struct Scenarios {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handoff: Option<Handoff>,
    #[serde(rename = "hold-many", skip_serializing_if = "Option::is_none")]
    pub hold_many: Option<HoldMany>,
    #[serde(rename = "many-keys", skip_serializing_if = "Option::is_none")]
    pub many_keys: Option<ManyKeys>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub primitives: Option<Primitives>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uncontended: Option<Uncontended>,
    /// Not a contender race: printed on its own ([`super::scale::text`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale: Option<super::scale::Scale>,
}

/// One scenario that ran, borrowed from [`Scenarios`]: what the table and the charts read of
/// every scenario alike.
#[derive(Debug, Clone, Copy)]
pub enum Ran<'a> {
    Handoff(&'a Handoff),
    HoldMany(&'a HoldMany),
    ManyKeys(&'a ManyKeys),
    Primitives(&'a Primitives),
    Uncontended(&'a Uncontended),
}

impl Scenarios {
    /// The scenarios that ran, in order.
    pub fn ran(&self) -> Vec<Ran<'_>> {
        [
            self.handoff.as_ref().map(Ran::Handoff),
            self.hold_many.as_ref().map(Ran::HoldMany),
            self.many_keys.as_ref().map(Ran::ManyKeys),
            self.primitives.as_ref().map(Ran::Primitives),
            self.uncontended.as_ref().map(Ran::Uncontended),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

impl<'a> Ran<'a> {
    /// The scenario's name, as `--scenario` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Ran::Handoff(_) => "handoff",
            Ran::HoldMany(_) => "hold-many",
            Ran::ManyKeys(_) => "many-keys",
            Ran::Primitives(_) => "primitives",
            Ran::Uncontended(_) => "uncontended",
        }
    }

    /// One line saying what it measures.
    pub fn what(self) -> &'a str {
        match self {
            Ran::Handoff(s) => &s.what,
            Ran::HoldMany(s) => &s.what,
            Ran::ManyKeys(s) => &s.what,
            Ran::Primitives(s) => s.what,
            Ran::Uncontended(s) => s.what,
        }
    }

    /// One row per contender (none for `hold-many`).
    pub fn contenders(self) -> &'a [Row] {
        match self {
            Ran::Handoff(s) => &s.contenders,
            Ran::HoldMany(_) => &[],
            Ran::ManyKeys(s) => &s.contenders,
            Ran::Primitives(s) => &s.contenders,
            Ran::Uncontended(s) => &s.contenders,
        }
    }

    /// The latency its chart plots, and that latency's name: the handoff wait in `handoff`,
    /// the acquire latency elsewhere.
    pub fn plotted(self) -> (fn(&Row) -> Option<&Percentiles>, &'static str) {
        fn handoff(r: &Row) -> Option<&Percentiles> {
            r.handoff_us.as_ref()
        }
        fn acquire(r: &Row) -> Option<&Percentiles> {
            r.acquire_us.as_ref()
        }
        match self {
            Ran::Handoff(_) => (handoff, "handoff wait"),
            _ => (acquire, "acquire latency"),
        }
    }
}

/// One contender's results over all runs of a scenario.
#[derive(Debug, Serialize)]
pub struct Row {
    pub contender: String,
    pub ops_per_s_median: f64,
    pub ops_per_s_runs: Vec<f64>,
    pub handoffs_per_s_median: Option<f64>,
    pub handoffs_per_s_runs: Option<Vec<f64>>,
    pub acquire_us: Option<Percentiles>,
    pub release_us: Option<Percentiles>,
    pub handoff_us: Option<Percentiles>,
    pub store_commands_per_acquisition: Option<f64>,
}

impl Row {
    /// A row with throughput only (a baseline run as another process: the store's load tool).
    pub fn throughput(contender: &str, per_run: &[f64]) -> Row {
        Row {
            contender: contender.to_owned(),
            ops_per_s_median: super::median(per_run.to_vec()).round(),
            ops_per_s_runs: per_run.iter().map(|v| v.round()).collect(),
            handoffs_per_s_median: None,
            handoffs_per_s_runs: None,
            acquire_us: None,
            release_us: None,
            handoff_us: None,
            store_commands_per_acquisition: None,
        }
    }
}

/// A latency summary in microseconds over all samples.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Percentiles {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub max: u64,
    pub samples: u64,
}

impl Percentiles {
    /// `p50/p90/p99/p99.9/max`, as the table prints it and the chart plots it.
    pub fn points(&self) -> [u64; 5] {
        [self.p50, self.p90, self.p99, self.p99_9, self.max]
    }
}

/// `uncontended`: one task, acquire + release of one free key, back to back.
#[derive(Debug, Serialize)]
pub struct Uncontended {
    pub what: &'static str,
    pub contenders: Vec<Row>,
    /// leasehold's time per cycle over the raw client's (the kit's
    /// [`leasehold_harness::baseline::Paired::Headline`] baseline): the median of the per-run
    /// ratios that follow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leasehold_time_per_cycle_vs_raw: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_run_ratios: Option<Vec<f64>>,
    /// The same against the raw client sending leasehold's very requests, where the headline
    /// is the store's bare recipe ([`leasehold_harness::baseline::Paired::SameRequests`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leasehold_time_per_cycle_vs_raw_fenced: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_run_ratios_fenced: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_us_per_request: Option<ServerTime>,
    /// leasehold's time per cycle over each of the store's load tool's scripts
    /// ([`leasehold_harness::baseline::NativeLoad`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leasehold_time_per_cycle_vs_native_load: Option<Vec<Ratio>>,
}

/// Server time per request (the kit's [`leasehold_harness::baseline::ServerView`]): of
/// leasehold's grant or release, and of the headline raw client's grant; medians over runs,
/// in µs.
#[derive(Debug, Serialize)]
pub struct ServerTime {
    /// leasehold's grant or release.
    pub leasehold: f64,
    /// The headline raw client's grant.
    pub raw: f64,
    /// What counted them, and how the two requests are named, for the table.
    #[serde(skip)]
    pub words: [&'static str; 3],
}

/// leasehold against one baseline: the median of the per-run ratios, and those ratios.
#[derive(Debug, Serialize)]
pub struct Ratio {
    pub baseline: &'static str,
    pub median: f64,
    pub per_run: Vec<f64>,
}

/// `primitives`: the mutex, a semaphore's permit and a reader on the same store, one task.
#[derive(Debug, Serialize)]
pub struct Primitives {
    pub what: &'static str,
    pub contenders: Vec<Row>,
    /// The primitives the store refused, with its reason (no row for them).
    pub skipped: Vec<Skipped>,
    /// A permit's time per cycle over the mutex's: the median of the per-run ratios.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permit_time_per_cycle_vs_mutex: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_run_ratios_permit: Option<Vec<f64>>,
    /// A reader's time per cycle over the mutex's: the median of the per-run ratios.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reader_time_per_cycle_vs_mutex: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_run_ratios_reader: Option<Vec<f64>>,
    /// The peer crate measured in the same runs (the kit's, built with its feature), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<&'static str>,
    /// Per primitive (`baseline` names it), leasehold's time per cycle over the peer's: the
    /// median of the per-run ratios, and those ratios. Empty without a peer.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub leasehold_time_per_cycle_vs_peer: Vec<Ratio>,
}

/// A primitive the store refused, and the store's words.
#[derive(Debug, Serialize)]
pub struct Skipped {
    pub primitive: &'static str,
    pub reason: String,
}

/// `handoff`: tasks contending for one key.
#[derive(Debug, Serialize)]
pub struct Handoff {
    pub what: String,
    pub contenders: Vec<Row>,
    /// leasehold's handoffs/s over the store's own lock recipe's (its kit's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leasehold_handoffs_vs_own_lock: Option<f64>,
    /// leasehold's handoffs/s over the peer crate's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leasehold_handoffs_vs_peer: Option<f64>,
}

/// `many-keys`: 64 tasks, each on its own key, over one connection.
#[derive(Debug, Serialize)]
pub struct ManyKeys {
    pub what: String,
    pub contenders: Vec<Row>,
    /// Each contender's cycles/s over half of the store's load tool's requests/s (a cycle is
    /// two requests): leasehold, the headline raw client, the raw client sending leasehold's
    /// requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leasehold_cycles_vs_half_request_load: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_cycles_vs_half_request_load: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_fenced_cycles_vs_half_request_load: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_load: Option<LoadRate>,
    /// How the table's ratio lines name the load tool, the headline raw client and the raw
    /// client sending leasehold's requests.
    #[serde(skip)]
    pub ratio_names: [&'static str; 3],
}

/// The store's load tool's request rate in the same run
/// ([`leasehold_harness::baseline::RequestLoad`]).
#[derive(Debug, Serialize)]
pub struct LoadRate {
    pub command: &'static str,
    pub ops_per_s_median: f64,
    pub ops_per_s_runs: Vec<f64>,
}

/// `hold-many`: many leases held with auto-renew.
#[derive(Debug, Serialize)]
pub struct HoldMany {
    pub what: String,
    pub runs: Vec<HoldRun>,
}

/// One run of `hold-many`.
#[derive(Debug, Serialize)]
pub struct HoldRun {
    pub leases: usize,
    pub acquire_all_s: f64,
    pub held_s: f64,
    pub lost: usize,
    /// `ttl −` the time left on the sampled leases at its largest, where the server can say
    /// (its kit's server view).
    pub oldest_renewal_seen_ms: Option<u64>,
    pub pttl_samples: u64,
    pub renew_interval_ms: u64,
    /// Leases renewed at the store while held, per lease and per ttl (3 at ttl/3).
    pub renewals_per_lease_per_ttl: f64,
    /// Renewal requests (one per batch) sent while held.
    pub renew_round_trips: u64,
    pub rss_mb_before: Option<u64>,
    pub rss_mb_holding: Option<u64>,
    pub rss_mb_end: Option<u64>,
}
