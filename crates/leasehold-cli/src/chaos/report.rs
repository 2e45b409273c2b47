//! The typed report of a `chaos` run (written as `report.json`), the table printed after it,
//! and the verdict (the exit code), all from the same [`Report`].

use super::Trial;

/// Everything a run found.
#[derive(Debug, serde::Serialize)]
pub struct Report {
    /// The store URL, redacted (private servers: `SCHEME://(private)…`).
    pub store: String,
    pub backend: &'static str,
    pub guarantees: leasehold::Guarantees,
    pub scenario: String,
    pub ttl_ms: u64,
    /// Where the resource lives.
    pub resource: String,
    /// How the store was set up and failed, when the tool started it.
    pub setup: Option<String>,
    pub key: &'static str,
    /// `--topology`, when the run had one.
    pub topology: Option<String>,
    pub arms: Vec<Arm>,
    pub trials: Vec<Trial>,
}

/// The counts of one arm (fenced, unfenced; reconnect, cut).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Arm {
    pub arm: &'static str,
    pub trials: usize,
    pub successor_acquired: usize,
    pub stale_effects_accepted: usize,
    pub successors_locked_out: usize,
    pub fences_out_of_order: usize,
    /// stalled-holder-tx: successors whose claim waited until the frozen holder resumed.
    pub successors_blocked: usize,
    pub unknown_outcomes: usize,
    pub lost_after_successor_grant: usize,
    /// How long before the successor's grant the holder's `lost()` fired.
    pub lost_before_grant_ms: Option<Stats>,
    pub orphans_seen: usize,
    pub orphans: usize,
    /// How long an orphaned grant blocked the key after the unknown outcome.
    pub orphan_lifetime_ms: Option<Stats>,
}

/// Minimum, median and maximum of a sample, in ms (one decimal).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Stats {
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub trials: usize,
}

impl Stats {
    /// `None` for an empty sample.
    pub fn of(mut v: Vec<f64>) -> Option<Stats> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let round = |x: f64| (x * 10.0).round() / 10.0;
        Some(Stats {
            min: round(v[0]),
            median: round(v[v.len() / 2]),
            max: round(v[v.len() - 1]),
            trials: v.len(),
        })
    }
}

impl Arm {
    /// The counts of the trials of arm `arm`.
    pub fn of(arm: &'static str, trials: &[Trial]) -> Arm {
        let t: Vec<&Trial> = trials.iter().filter(|t| t.arm == arm).collect();
        let count = |f: fn(&Trial) -> bool| t.iter().filter(|t| f(t)).count();
        Arm {
            arm,
            trials: t.len(),
            successor_acquired: count(|t| t.successor_acquired),
            stale_effects_accepted: count(|t| t.stale_effect_accepted),
            successors_locked_out: count(|t| t.successor_locked_out),
            fences_out_of_order: count(|t| t.fence_out_of_order),
            successors_blocked: count(|t| t.successor_blocked),
            unknown_outcomes: count(|t| t.unknown),
            lost_after_successor_grant: count(|t| t.lost_late),
            lost_before_grant_ms: Stats::of(t.iter().filter_map(|t| t.lost_lead_ms).collect()),
            orphans_seen: count(|t| t.orphan_seen),
            orphans: count(|t| t.orphan),
            orphan_lifetime_ms: Stats::of(
                t.iter().filter(|t| t.orphan_seen).filter_map(|t| t.orphan_ms).collect(),
            ),
        }
    }
}

/// The table printed after a run.
pub fn table(r: &Report) -> String {
    let scenario = r.scenario.as_str();
    let mut out = format!(
        "store {} ({}) · scenario {scenario} · ttl {} ms · resource: {}\n",
        r.store, r.backend, r.ttl_ms, r.resource
    );
    if let Some(setup) = &r.setup {
        out.push_str(&format!("setup: {setup}\n"));
    }
    out.push('\n');
    let lost = matches!(scenario, "partition" | "store-kill" | "failover");
    let orphans = scenario == "unknown-acquire";
    let tx = scenario == "stalled-holder-tx";
    let mut head = format!(
        "{:<16} {:<9} {:>7} {:>18} {:>23} {:>22} {:>20} {:>8}",
        "scenario",
        "arm",
        "trials",
        "successor got key",
        "stale effects accepted",
        "successors locked out",
        "fences out of order",
        "unknown"
    );
    if lost {
        head.push_str(&format!(" {:>29}", "holder's lost() after grant"));
    }
    if orphans {
        head.push_str(&format!(" {:>13} {:>25}", "orphans seen", "orphans outliving bound"));
    }
    if tx {
        head.push_str(&format!(" {:>39}", "successors blocked until holder resumed"));
    }
    out.push_str(head.trim_end());
    out.push('\n');
    for a in &r.arms {
        let mut line = format!(
            "{:<16} {:<9} {:>7} {:>18} {:>23} {:>22} {:>20} {:>8}",
            scenario,
            a.arm,
            a.trials,
            a.successor_acquired,
            a.stale_effects_accepted,
            a.successors_locked_out,
            a.fences_out_of_order,
            a.unknown_outcomes,
        );
        if lost {
            line.push_str(&format!(" {:>29}", a.lost_after_successor_grant));
        }
        if orphans {
            line.push_str(&format!(" {:>13} {:>25}", a.orphans_seen, a.orphans));
        }
        if tx {
            line.push_str(&format!(" {:>39}", a.successors_blocked));
        }
        out.push_str(&line);
        out.push('\n');
    }
    for a in &r.arms {
        if let (true, Some(l)) = (scenario == "partition", a.lost_before_grant_ms) {
            out.push_str(&format!(
                "{} arm: the cut-off holder's lost() fired before the successor's grant by {} ms (min), {} ms (median), over {} trials\n",
                a.arm, l.min, l.median, l.trials
            ));
        }
        if let Some(o) = a.orphan_lifetime_ms {
            out.push_str(&format!(
                "{} arm: a granted acquire whose answer was lost blocked the key for {} ms (min), {} ms (median), {} ms (max) after the unknown outcome, over {} trials\n",
                a.arm, o.min, o.median, o.max, o.trials
            ));
        }
    }
    out
}

/// Whether the run shows what it must (see [`verdict_of`]).
pub fn verdict(r: &Report) -> Result<(), String> {
    verdict_of(&r.scenario, r.guarantees.failure_admits_second_holder, &r.arms)?;
    r.topology.as_deref().map_or(Ok(()), |t| super::topology::verdict(t, &r.arms))
}

/// On every scenario and store: with fencing, no stale effect accepted, no successor locked
/// out, fences in order; no holder learning of its loss after the store moved on, unless a
/// store failure that the store's guarantees say can admit a second holder caused it
/// (`admits_second_holder`); no orphaned grant outliving its bound.
pub fn verdict_of(scenario: &str, admits_second_holder: bool, arms: &[Arm]) -> Result<(), String> {
    let admitted = matches!(scenario, "store-kill" | "failover") && admits_second_holder;
    for a in arms {
        let fenced = a.arm == "fenced";
        if fenced && a.stale_effects_accepted > 0 {
            return Err(format!(
                "{} stale effects were accepted WITH fencing",
                a.stale_effects_accepted
            ));
        }
        if fenced && a.successors_locked_out > 0 {
            return Err(format!(
                "{} successor(s), the store's current holder, were refused by the resource WITH \
                 fencing (a fence that went back)",
                a.successors_locked_out
            ));
        }
        if fenced && a.fences_out_of_order > 0 {
            return Err("fences went out of order".into());
        }
        if a.lost_after_successor_grant > 0 && !admitted {
            return Err(format!(
                "{} holder(s) learned of the loss only after the store granted the key to the successor",
                a.lost_after_successor_grant
            ));
        }
        if a.orphans > 0 {
            return Err(format!(
                "{} acquire(s) with unknown outcome left a grant that outlived its bound ({} arm)",
                a.orphans, a.arm
            ));
        }
    }
    Ok(())
}
