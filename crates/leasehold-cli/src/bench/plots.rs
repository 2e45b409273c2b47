//! `bench --out`'s charts: one latency-percentile SVG per scenario of a report.

use std::fmt::Write;

use super::Report;
use crate::svg::{color, esc, log_ticks_us};

/// One latency-percentile chart per scenario of a `leasehold bench` report: x = percentile
/// (p50, p90, p99, p99.9, max), y = microseconds on a log scale, one line per contender (the
/// handoff wait in the handoff scenario, the acquire latency elsewhere).
pub fn bench_plots(report: &Report) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for sc in report.scenarios.ran() {
        let (latency, metric) = sc.plotted();
        let series: Vec<(String, Vec<f64>)> = sc
            .contenders()
            .iter()
            .filter_map(|c| {
                let vals = latency(c)?.points().map(|v| (v as f64).max(1.0));
                Some((c.contender.clone(), vals.to_vec()))
            })
            .collect();
        if series.is_empty() {
            continue;
        }
        let title = format!("{} — {} ({metric})", report.store, sc.name());
        out.push((format!("{}.svg", sc.name()), percentile_chart(&title, &series)));
    }
    out
}

fn percentile_chart(title: &str, series: &[(String, Vec<f64>)]) -> String {
    let (w, plot_h, left, top) = (820.0, 320.0, 70.0, 40.0);
    let legend_h = 18.0 * series.len() as f64 + 10.0;
    let h = top + plot_h + 40.0 + legend_h;
    let lo =
        series.iter().flat_map(|s| s.1.iter()).cloned().fold(f64::MAX, f64::min).log10().floor();
    let hi = series
        .iter()
        .flat_map(|s| s.1.iter())
        .cloned()
        .fold(1.0, f64::max)
        .log10()
        .ceil()
        .max(lo + 1.0);
    let pw = w - left - 30.0;
    let x = |i: usize| left + pw * i as f64 / 4.0;
    let y = |v: f64| top + plot_h * (1.0 - (v.log10() - lo) / (hi - lo));
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/><text x="{left}" y="22" font-size="14">{}</text>"##,
        esc(title)
    );
    for (v, label) in log_ticks_us(lo as i32, hi as i32) {
        let yy = y(v);
        let _ = write!(
            s,
            r##"<line x1="{left}" x2="{}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{label}</text>"##,
            left + pw,
            left - 6.0,
            yy + 4.0
        );
    }
    for (i, l) in ["p50", "p90", "p99", "p99.9", "max"].iter().enumerate() {
        let _ = write!(
            s,
            r##"<line x1="{0:.1}" x2="{0:.1}" y1="{top}" y2="{1:.1}" stroke="#eee"/><text x="{0:.1}" y="{2:.1}" text-anchor="middle">{l}</text>"##,
            x(i),
            top + plot_h,
            top + plot_h + 18.0
        );
    }
    for (i, (name, vals)) in series.iter().enumerate() {
        let pts: Vec<String> =
            vals.iter().enumerate().map(|(j, v)| format!("{:.1},{:.1}", x(j), y(*v))).collect();
        let _ = write!(
            s,
            r##"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"/>"##,
            pts.join(" "),
            color(i)
        );
        for (j, v) in vals.iter().enumerate() {
            let _ = write!(
                s,
                r##"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"><title>{}: {v} µs</title></circle>"##,
                x(j),
                y(*v),
                color(i),
                esc(name)
            );
        }
        let ly = top + plot_h + 40.0 + 18.0 * i as f64;
        let _ = write!(
            s,
            r##"<rect x="{left}" y="{:.1}" width="14" height="4" fill="{}"/><text x="{}" y="{:.1}">{}</text>"##,
            ly - 4.0,
            color(i),
            left + 20.0,
            ly,
            esc(name)
        );
    }
    s.push_str("</svg>\n");
    s
}
