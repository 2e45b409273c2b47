//! The plain-text table of a bench report.

use super::*;

// ---------------------------------------------------------------- output

/// A plain-text table of a report.
pub fn table(r: &Value) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "store {} ({}{}) · {} runs × {} s · tokio {} runtime · throughput = median over runs · latency µs p50/p90/p99/p99.9/max over all samples\n",
        r["store"].as_str().unwrap_or("?"),
        r["backend"].as_str().unwrap_or("?"),
        r["server_version"].as_str().map(|v| format!(" {v}")).unwrap_or_default(),
        r["runs"],
        r["duration_s"],
        r["runtime"].as_str().unwrap_or("?"),
    ));
    let Some(scs) = r["scenarios"].as_object() else { return out };
    for (name, sc) in scs {
        out.push_str(&format!("\n[{name}] {}\n", sc["what"].as_str().unwrap_or("")));
        if let Some(rows) = sc["contenders"].as_array() {
            for c in rows {
                out.push_str(&format!("  {}\n", c["contender"].as_str().unwrap_or("?")));
                out.push_str(&format!(
                    "      acquisitions/s {} (runs {})",
                    c["ops_per_s_median"], c["ops_per_s_runs"]
                ));
                if !c["handoffs_per_s_median"].is_null() {
                    out.push_str(&format!(
                        "  handoffs/s {} (runs {})",
                        c["handoffs_per_s_median"], c["handoffs_per_s_runs"]
                    ));
                }
                for (k, label) in [
                    ("acquire_us", "acquire"),
                    ("release_us", "release"),
                    ("handoff_us", "handoff wait"),
                ] {
                    if !c[k].is_null() {
                        out.push_str(&format!("  {label} {}", pct_text(&c[k])));
                    }
                }
                if !c["store_commands_per_acquisition"].is_null() {
                    out.push_str(&format!(
                        "  store requests/acquisition {}",
                        c["store_commands_per_acquisition"]
                    ));
                }
                out.push('\n');
            }
        }
        for (k, label) in [
            (
                "leasehold_time_per_cycle_vs_raw",
                "leasehold time per cycle ÷ the raw client's (first raw row above), median of per-run ratios",
            ),
            (
                "leasehold_time_per_cycle_vs_raw_fenced",
                "leasehold time per cycle ÷ raw client's sending leasehold's two scripts",
            ),
            ("leasehold_handoffs_vs_peer", "leasehold handoffs/s ÷ peer's"),
            (
                "leasehold_cycles_vs_half_redis_benchmark",
                "leasehold cycles/s ÷ (redis-benchmark ops/s ÷ 2)",
            ),
            (
                "raw_cycles_vs_half_redis_benchmark",
                "raw redis-rs (SET NX PX + compare-and-delete) cycles/s ÷ (redis-benchmark ops/s ÷ 2)",
            ),
            (
                "raw_fenced_cycles_vs_half_redis_benchmark",
                "raw redis-rs sending leasehold's scripts, cycles/s ÷ (redis-benchmark ops/s ÷ 2)",
            ),
        ] {
            if !sc[k].is_null() {
                out.push_str(&format!("  → {label}: {}\n", sc[k]));
            }
        }
        for (k, label) in [
            ("per_run_ratios", "vs the raw client"),
            ("per_run_ratios_fenced", "vs leasehold's scripts sent raw"),
        ] {
            if !sc[k].is_null() {
                out.push_str(&format!("    per-run ratios {label}: {}\n", sc[k]));
            }
        }
        if let Some(list) = sc["leasehold_time_per_cycle_vs_pgbench"].as_array() {
            for r in list {
                out.push_str(&format!(
                    "  → leasehold time per cycle ÷ {}'s: {} (per run {})\n",
                    r["baseline"].as_str().unwrap_or("?"),
                    r["median"],
                    r["per_run"]
                ));
            }
        }
        if !sc["server_us_per_request"].is_null() {
            let u = &sc["server_us_per_request"];
            out.push_str(&format!(
                "  server time per request (INFO commandstats, median over runs): leasehold EVALSHA (grant or release) {} µs, raw bare SET {} µs\n",
                u["leasehold_evalsha"], u["raw_set"]
            ));
        }
        if !sc["redis_benchmark"].is_null() {
            let rb = &sc["redis_benchmark"];
            out.push_str(&format!(
                "  redis-benchmark: {} ops/s (runs {}) — {}\n",
                rb["ops_per_s_median"],
                rb["ops_per_s_runs"],
                rb["command"].as_str().unwrap_or("")
            ));
        }
        if let Some(runs) = sc["runs"].as_array() {
            for (i, run) in runs.iter().enumerate() {
                let renewal = if run["oldest_renewal_seen_ms"].is_null() {
                    "no PTTL sampling on this store".to_string()
                } else {
                    format!(
                        "oldest renewal seen {} ms (renew interval {} ms, {} samples)",
                        run["oldest_renewal_seen_ms"],
                        run["renew_interval_ms"],
                        run["pttl_samples"]
                    )
                };
                out.push_str(&format!(
                    "  run {}: {} leases acquired in {} s, held {} s: lost {}, {renewal}, RSS {} MB before → {} MB holding → {} MB at end\n",
                    i + 1, run["leases"], run["acquire_all_s"], run["held_s"], run["lost"],
                    run["rss_mb_before"], run["rss_mb_holding"], run["rss_mb_end"],
                ));
            }
        }
    }
    out
}
