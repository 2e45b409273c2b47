//! The plain-text table of a bench report (what BENCHMARKS.md quotes).

use serde::Serialize;

use super::report::{HoldRun, ManyKeys, Percentiles, Primitives, Ran, Report, Row, Uncontended};

/// A figure as the JSON spells it (`6129.0`, `[1.1,1.2]`, `null`), so the table and
/// `bench.json` never disagree.
fn j<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn pct_text(p: &Option<Percentiles>) -> String {
    match p {
        Some(p) => p.points().map(|v| v.to_string()).join("/"),
        None => "-".into(),
    }
}

/// A plain-text table of a report.
pub fn table(r: &Report) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "store {} ({}{}) · {} runs × {} s · tokio {} runtime · throughput = median over runs · latency µs p50/p90/p99/p99.9/max over all samples\n",
        r.store,
        r.backend,
        r.server_version.as_ref().map(|v| format!(" {v}")).unwrap_or_default(),
        r.runs,
        j(&r.duration_s),
        r.runtime,
    ));
    for sc in r.scenarios.ran() {
        out.push_str(&format!("\n[{}] {}\n", sc.name(), sc.what()));
        for c in sc.contenders() {
            row(&mut out, c);
        }
        match sc {
            Ran::Uncontended(u) => uncontended(&mut out, u),
            Ran::Handoff(h) => {
                ratio(&mut out, "leasehold handoffs/s ÷ peer's", h.leasehold_handoffs_vs_peer)
            }
            Ran::ManyKeys(m) => many_keys(&mut out, m),
            Ran::Primitives(pr) => primitives(&mut out, pr),
            Ran::HoldMany(h) => {
                for (i, run) in h.runs.iter().enumerate() {
                    hold_run(&mut out, i + 1, run);
                }
            }
        }
    }
    if let Some(sc) = &r.scenarios.scale {
        out.push_str(&super::scale::text(sc));
    }
    out
}

fn row(out: &mut String, c: &Row) {
    out.push_str(&format!("  {}\n", c.contender));
    out.push_str(&format!(
        "      acquisitions/s {} (runs {})",
        j(&c.ops_per_s_median),
        j(&c.ops_per_s_runs)
    ));
    if let (Some(median), runs) = (c.handoffs_per_s_median, &c.handoffs_per_s_runs) {
        out.push_str(&format!("  handoffs/s {} (runs {})", j(&median), j(runs)));
    }
    for (p, label) in
        [(&c.acquire_us, "acquire"), (&c.release_us, "release"), (&c.handoff_us, "handoff wait")]
    {
        if p.is_some() {
            out.push_str(&format!("  {label} {}", pct_text(p)));
        }
    }
    if let Some(n) = c.store_commands_per_acquisition {
        out.push_str(&format!("  store requests/acquisition {}", j(&n)));
    }
    out.push('\n');
}

/// `  → label: value`, when there is a value.
fn ratio(out: &mut String, label: &str, v: Option<f64>) {
    if let Some(v) = v {
        out.push_str(&format!("  → {label}: {}\n", j(&v)));
    }
}

fn uncontended(out: &mut String, u: &Uncontended) {
    ratio(
        out,
        "leasehold time per cycle ÷ the raw client's (first raw row above), median of per-run ratios",
        u.leasehold_time_per_cycle_vs_raw,
    );
    ratio(
        out,
        "leasehold time per cycle ÷ raw client's sending leasehold's two scripts",
        u.leasehold_time_per_cycle_vs_raw_fenced,
    );
    for (runs, label) in [
        (&u.per_run_ratios, "vs the raw client"),
        (&u.per_run_ratios_fenced, "vs leasehold's scripts sent raw"),
    ] {
        if let Some(runs) = runs {
            out.push_str(&format!("    per-run ratios {label}: {}\n", j(runs)));
        }
    }
    for r in u.leasehold_time_per_cycle_vs_native_load.iter().flatten() {
        out.push_str(&format!(
            "  → leasehold time per cycle ÷ {}'s: {} (per run {})\n",
            r.baseline,
            j(&r.median),
            j(&r.per_run)
        ));
    }
    if let Some(t) = &u.server_us_per_request {
        let [counter, lh, raw] = t.words;
        out.push_str(&format!(
            "  server time per request ({counter}, median over runs): leasehold {lh} {} µs, raw {raw} {} µs\n",
            j(&t.leasehold),
            j(&t.raw)
        ));
    }
}

fn primitives(out: &mut String, p: &Primitives) {
    for sk in &p.skipped {
        out.push_str(&format!(
            "  {}: skipped, the store refuses it: {}\n",
            sk.primitive, sk.reason
        ));
    }
    for (label, median, runs) in [
        ("permit", p.permit_time_per_cycle_vs_mutex, &p.per_run_ratios_permit),
        ("reader", p.reader_time_per_cycle_vs_mutex, &p.per_run_ratios_reader),
    ] {
        if let (Some(m), Some(runs)) = (median, runs) {
            out.push_str(&format!(
                "  → {label} time per cycle ÷ mutex's, median of per-run ratios: {} (per run {})\n",
                j(&m),
                j(runs)
            ));
        }
    }
    if let Some(peer) = p.peer {
        for r in &p.leasehold_time_per_cycle_vs_peer {
            out.push_str(&format!(
                "  → leasehold {} time per cycle ÷ {peer}'s, median of per-run ratios: {} (per run {})\n",
                r.baseline,
                j(&r.median),
                j(&r.per_run)
            ));
        }
    }
}

fn many_keys(out: &mut String, m: &ManyKeys) {
    let [tool, raw, raw_same] = m.ratio_names;
    let half = format!("cycles/s ÷ ({tool} ops/s ÷ 2)");
    for (label, v) in [
        (format!("leasehold {half}"), m.leasehold_cycles_vs_half_request_load),
        (format!("{raw} {half}"), m.raw_cycles_vs_half_request_load),
        (format!("{raw_same}, {half}"), m.raw_fenced_cycles_vs_half_request_load),
    ] {
        ratio(out, &label, v);
    }
    if let Some(rb) = &m.request_load {
        out.push_str(&format!(
            "  {tool}: {} ops/s (runs {}) — {}\n",
            j(&rb.ops_per_s_median),
            j(&rb.ops_per_s_runs),
            rb.command
        ));
    }
}

fn hold_run(out: &mut String, n: usize, run: &HoldRun) {
    let renewal = match run.oldest_renewal_seen_ms {
        None => "no PTTL sampling on this store".to_string(),
        Some(ms) => format!(
            "oldest renewal seen {ms} ms (renew interval {} ms, {} samples)",
            run.renew_interval_ms, run.pttl_samples
        ),
    };
    out.push_str(&format!(
        "  run {n}: {} leases acquired in {} s, held {} s: lost {}, {} renewals per lease per ttl ({} batched round trips), {renewal}, RSS {} MB before → {} MB holding → {} MB at end\n",
        run.leases,
        j(&run.acquire_all_s),
        j(&run.held_s),
        run.lost,
        j(&run.renewals_per_lease_per_ttl),
        run.renew_round_trips,
        j(&run.rss_mb_before),
        j(&run.rss_mb_holding),
        j(&run.rss_mb_end),
    ));
}
