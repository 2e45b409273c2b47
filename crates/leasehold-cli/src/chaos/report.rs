//! The printed table and the verdict (the exit code) of a `chaos` run, from its report.

use serde_json::Value;

/// The table printed after a run.
pub fn table(r: &Value) -> String {
    let scenario = r["scenario"].as_str().unwrap_or("");
    let mut out = format!(
        "store {} ({}) · scenario {scenario} · ttl {} ms · resource: {}\n",
        r["store"].as_str().unwrap_or(""),
        r["backend"].as_str().unwrap_or(""),
        r["ttl_ms"].as_u64().unwrap_or(0),
        r["resource"].as_str().unwrap_or("")
    );
    if let Some(setup) = r["setup"].as_str() {
        out.push_str(&format!("setup: {setup}\n"));
    }
    out.push('\n');
    let lost = matches!(scenario, "partition" | "store-kill" | "failover");
    let orphans = scenario == "unknown-acquire";
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
    out.push_str(head.trim_end());
    out.push('\n');
    for a in r["arms"].as_array().into_iter().flatten() {
        let n = |k: &str| a[k].as_u64().unwrap_or(0);
        let mut line = format!(
            "{:<16} {:<9} {:>7} {:>18} {:>23} {:>22} {:>20} {:>8}",
            scenario,
            a["arm"].as_str().unwrap_or(""),
            n("trials"),
            n("successor_acquired"),
            n("stale_effects_accepted"),
            n("successors_locked_out"),
            n("fences_out_of_order"),
            n("unknown_outcomes"),
        );
        if lost {
            line.push_str(&format!(" {:>29}", n("lost_after_successor_grant")));
        }
        if orphans {
            line.push_str(&format!(" {:>13} {:>25}", n("orphans_seen"), n("orphans")));
        }
        out.push_str(&line);
        out.push('\n');
    }
    for a in r["arms"].as_array().into_iter().flatten() {
        let arm = a["arm"].as_str().unwrap_or("");
        let l = &a["lost_before_grant_ms"];
        if scenario == "partition" && !l.is_null() {
            out.push_str(&format!(
                "{arm} arm: the cut-off holder's lost() fired before the successor's grant by {} ms (min), {} ms (median), over {} trials\n",
                l["min"], l["median"], l["trials"]
            ));
        }
        let o = &a["orphan_lifetime_ms"];
        if !o.is_null() {
            out.push_str(&format!(
                "{arm} arm: a granted acquire whose answer was lost blocked the key for {} ms (min), {} ms (median), {} ms (max) after the unknown outcome, over {} trials\n",
                o["min"], o["median"], o["max"], o["trials"]
            ));
        }
    }
    out
}

/// Whether the run shows what it must, on every scenario and store: with fencing, no stale
/// effect accepted, no successor locked out, fences in order; no holder learning of its loss
/// after the store moved on, unless a store failure that the store's guarantees say can admit
/// a second holder caused it; no orphaned grant outliving its bound.
pub fn verdict(r: &Value) -> Result<(), String> {
    let arms: Vec<&Value> = r["arms"].as_array().into_iter().flatten().collect();
    let n = |a: &Value, k: &str| a[k].as_u64().unwrap_or(0);
    let store_failure = matches!(r["scenario"].as_str(), Some("store-kill" | "failover"));
    let admitted =
        store_failure && r["guarantees"]["failure_admits_second_holder"] == Value::Bool(true);
    for a in &arms {
        if a["arm"] == "fenced" && n(a, "stale_effects_accepted") > 0 {
            return Err(format!(
                "{} stale effects were accepted WITH fencing",
                n(a, "stale_effects_accepted")
            ));
        }
        if a["arm"] == "fenced" && n(a, "successors_locked_out") > 0 {
            return Err(format!(
                "{} successor(s), the store's current holder, were refused by the resource WITH \
                 fencing (a fence that went back)",
                n(a, "successors_locked_out")
            ));
        }
        if a["arm"] == "fenced" && n(a, "fences_out_of_order") > 0 {
            return Err("fences went out of order".into());
        }
        if n(a, "lost_after_successor_grant") > 0 && !admitted {
            return Err(format!(
                "{} holder(s) learned of the loss only after the store granted the key to the successor",
                n(a, "lost_after_successor_grant")
            ));
        }
        if n(a, "orphans") > 0 {
            return Err(format!(
                "{} acquire(s) with unknown outcome left a grant that outlived its bound ({} arm)",
                n(a, "orphans"),
                a["arm"].as_str().unwrap_or("")
            ));
        }
    }
    Ok(())
}
