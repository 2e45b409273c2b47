//! Small hand-written SVG charts (bench latency percentiles, chaos timelines).
//!
//! Written by hand rather than with a plotting crate: these charts need a few lines, boxes
//! and labels, and an SVG with `<text>` needs no font at build or run time.

use std::fmt::Write;

use crate::bench::Report;

/// Escapes text for SVG.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The smallest 1, 2 or 5 × 10^k at least `raw`: a round axis tick interval.
pub fn round_step(raw: f64) -> f64 {
    if !raw.is_finite() || raw <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag)
}

/// The ticks of a linear axis from `lo` to `hi`, about `n` of them: every multiple of a round
/// step ([`round_step`]) in the range, each with its label. Values are `k × step` (never
/// summed step by step, which drifts), and labels carry the decimals the step needs and no
/// more: `0.6`, not `0.6000000000000001`; `250`, not `250.0`.
pub fn ticks(lo: f64, hi: f64, n: usize) -> Vec<(f64, String)> {
    let step = round_step((hi - lo) / n.max(1) as f64);
    let decimals = (-step.log10() - 1e-9).ceil().max(0.0) as usize;
    let (first, last) = ((lo / step - 1e-9).ceil() as i64, (hi / step + 1e-9).floor() as i64);
    (first..=last)
        .map(|k| {
            let v = k as f64 * step;
            (v, format!("{v:.decimals$}"))
        })
        .collect()
}

/// The ticks of a log axis of microseconds from 10^`lo` to 10^`hi`, each with its label in
/// µs, ms or s: 1, 2 and 5 × 10^k when the axis spans two decades or fewer, else powers of
/// ten.
pub fn log_ticks_us(lo: i32, hi: i32) -> Vec<(f64, String)> {
    let marks: &[f64] = if hi - lo <= 2 { &[1.0, 2.0, 5.0] } else { &[1.0] };
    let mut out = Vec::new();
    for e in lo..=hi {
        // The axis ends at 10^hi itself.
        for m in if e < hi { marks } else { &[1.0] } {
            let v = m * 10f64.powi(e);
            let label = match v {
                v if v >= 1e6 => format!("{} s", v / 1e6),
                v if v >= 1e3 => format!("{} ms", v / 1e3),
                v => format!("{v} µs"),
            };
            out.push((v, label));
        }
    }
    out
}

const COLORS: &[&str] =
    &["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

/// Pick a color for series `i`.
pub fn color(i: usize) -> &'static str {
    COLORS[i % COLORS.len()]
}

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

#[cfg(test)]
mod tests {
    use super::{log_ticks_us, round_step, ticks};

    #[test]
    fn ticks_are_round() {
        assert_eq!(round_step(0.7), 1.0);
        assert_eq!(round_step(1.0), 1.0);
        assert_eq!(round_step(137.0), 200.0);
        assert_eq!(round_step(2600.0), 5000.0);
        assert_eq!(round_step(6000.0), 10000.0);
        assert_eq!(round_step(0.0), 1.0);
    }

    fn labels(t: Vec<(f64, String)>) -> Vec<String> {
        t.into_iter().map(|(_, l)| l).collect()
    }

    #[test]
    fn linear_ticks_are_multiples_of_a_round_step_with_short_labels() {
        // 0.2 × 3 is 0.6000000000000001 in f64: the label must not say so.
        assert_eq!(labels(ticks(0.0, 1.0, 5)), ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]);
        assert_eq!(labels(ticks(0.0, 137.0, 5)), ["0", "50", "100"]);
        assert_eq!(labels(ticks(0.0, 2600.0, 5)), ["0", "1000", "2000"]);
        assert_eq!(labels(ticks(0.0, 0.13, 5)), ["0.00", "0.05", "0.10"]);
        let values: Vec<f64> = ticks(0.0, 12_345.0, 5).into_iter().map(|(v, _)| v).collect();
        assert_eq!(values, [0.0, 5000.0, 10000.0]);
        // An axis that does not start at zero starts at the first multiple inside it.
        assert_eq!(labels(ticks(3.0, 17.0, 5)), ["5", "10", "15"]);
    }

    #[test]
    fn log_ticks_are_1_2_5_on_short_axes_and_decades_on_long_ones() {
        assert_eq!(
            labels(log_ticks_us(1, 3)),
            ["10 µs", "20 µs", "50 µs", "100 µs", "200 µs", "500 µs", "1 ms"]
        );
        assert_eq!(
            labels(log_ticks_us(0, 6)),
            ["1 µs", "10 µs", "100 µs", "1 ms", "10 ms", "100 ms", "1 s"]
        );
    }
}
