//! Small hand-written SVG pieces the charts share (escaping, ticks, colors): bench's latency
//! percentiles and chaos's timelines are drawn with them.
//!
//! Written by hand rather than with a plotting crate: these charts need a few lines, boxes
//! and labels, and an SVG with `<text>` needs no font at build or run time.

/// Escapes text for SVG.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(feature = "chaos")]
/// The smallest 1, 2 or 5 × 10^k at least `raw`: a round axis tick interval.
pub fn round_step(raw: f64) -> f64 {
    if !raw.is_finite() || raw <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag)
}

#[cfg(feature = "chaos")]
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

#[cfg(feature = "bench")]
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

#[cfg(feature = "bench")]
const COLORS: &[&str] =
    &["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

#[cfg(feature = "bench")]
/// Pick a color for series `i`.
pub fn color(i: usize) -> &'static str {
    COLORS[i % COLORS.len()]
}

#[cfg(all(test, feature = "bench", feature = "chaos"))]
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
