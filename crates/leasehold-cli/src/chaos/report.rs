//! The typed report of a `chaos` run (written as `report.json`), the table printed after it,
//! and the verdict (the exit code), all from the same [`Report`].

use leasehold_harness::history::chaos::{Arm, Trial, verdict_of};

use super::Scenario;

/// Everything a run found.
#[derive(Debug, serde::Serialize)]
pub struct Report {
    /// The store URL, redacted (private servers: `SCHEME://(private)…`).
    pub store: String,
    pub backend: &'static str,
    pub guarantees: leasehold::Guarantees,
    pub scenario: super::Scenario,
    pub ttl_ms: u64,
    /// Where the resource lives.
    pub resource: String,
    /// How the store was set up and failed, when the tool started it.
    pub setup: Option<String>,
    pub key: &'static str,
    /// `--permits N`: the trials took permits of a semaphore of N on `key`.
    pub permits: Option<u32>,
    /// `--topology`, when the run had one.
    pub topology: Option<String>,
    pub arms: Vec<Arm>,
    pub trials: Vec<Trial>,
}

/// The table printed after a run.
pub fn table(r: &Report) -> String {
    let scenario = r.scenario;
    let mut out = format!(
        "store {} ({}) · scenario {scenario} · ttl {} ms · resource: {}\n",
        r.store, r.backend, r.ttl_ms, r.resource
    );
    if let Some(n) = r.permits {
        out.push_str(&format!(
            "permits: a semaphore of {n} on {} ({} idle holders keep the other slots; the \
             resource fences per slot)\n",
            r.key,
            n - 1
        ));
    }
    if let Some(setup) = &r.setup {
        out.push_str(&format!("setup: {setup}\n"));
    }
    out.push('\n');
    let lost = scenario.cuts_the_holder_off();
    let orphans = scenario == Scenario::UnknownAcquire;
    let tx = scenario == Scenario::StalledHolderTx;
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
        if let (true, Some(l)) = (scenario == Scenario::Partition, a.lost_before_grant_ms) {
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

/// Whether the run shows what it must (the harness's checker: [`verdict_of`]).
pub fn verdict(r: &Report) -> Result<(), String> {
    let admits = r.guarantees.failure_admits_second_holder;
    verdict_of(r.scenario.fails_the_store(), admits, &r.arms)?;
    r.topology.as_deref().map_or(Ok(()), |t| super::topology::verdict(t, &r.arms))
}
