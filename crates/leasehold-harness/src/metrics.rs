//! A small in-process [`metrics`] recorder that renders the Prometheus text format: what
//! `leasehold run --metrics-file` writes at exit (for node-exporter's textfile collector),
//! and what tests read recorded values from.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};

/// Histogram bucket bounds, in seconds (every leasehold histogram is a duration).
const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

type Labels = Vec<(String, String)>;
/// Every series: (name, sorted labels) → its kind and cell.
type Cells = BTreeMap<(String, Labels), (Kind, Arc<Cell>)>;

#[derive(Default)]
struct Cell {
    value: AtomicU64,
    /// Histogram observations (empty for counters and gauges).
    observed: Mutex<Vec<f64>>,
}

impl metrics::CounterFn for Cell {
    fn increment(&self, v: u64) {
        self.value.fetch_add(v, Ordering::Relaxed);
    }
    fn absolute(&self, v: u64) {
        self.value.fetch_max(v, Ordering::Relaxed);
    }
}

impl metrics::GaugeFn for Cell {
    fn increment(&self, v: f64) {
        self.set(f64::from_bits(self.value.load(Ordering::Relaxed)) + v);
    }
    fn decrement(&self, v: f64) {
        self.increment(-v);
    }
    fn set(&self, v: f64) {
        self.value.store(v.to_bits(), Ordering::Relaxed);
    }
}

impl metrics::HistogramFn for Cell {
    fn record(&self, v: f64) {
        self.observed.lock().unwrap_or_else(|p| p.into_inner()).push(v);
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// The recorder; clones share what was recorded. Install one with
/// [`metrics::set_global_recorder`] (or a local one for a test).
#[derive(Clone, Default)]
pub struct TextRecorder {
    cells: Arc<Mutex<Cells>>,
}

impl std::fmt::Debug for TextRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextRecorder").finish_non_exhaustive()
    }
}

fn labels_of(key: &Key) -> Labels {
    let mut l: Labels = key.labels().map(|l| (l.key().to_owned(), l.value().to_owned())).collect();
    l.sort();
    l
}

impl TextRecorder {
    fn cell(&self, key: &Key, kind: Kind) -> Arc<Cell> {
        let mut cells = self.cells.lock().unwrap_or_else(|p| p.into_inner());
        let entry = cells.entry((key.name().to_owned(), labels_of(key)));
        entry.or_insert_with(|| (kind, Arc::default())).1.clone()
    }

    fn find(&self, name: &str, labels: &[(&str, &str)]) -> Vec<Arc<Cell>> {
        let cells = self.cells.lock().unwrap_or_else(|p| p.into_inner());
        cells
            .iter()
            .filter(|((n, l), _)| {
                n == name && labels.iter().all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|(_, (_, c))| c.clone())
            .collect()
    }

    /// The sum of the counters named `name` whose labels include `labels`.
    pub fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.find(name, labels).iter().map(|c| c.value.load(Ordering::Relaxed)).sum()
    }

    /// The observations of the histograms named `name` whose labels include `labels`.
    pub fn observations(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        let cells = self.find(name, labels);
        cells
            .iter()
            .flat_map(|c| c.observed.lock().unwrap_or_else(|p| p.into_inner()).clone())
            .collect()
    }

    /// Everything recorded, in the Prometheus text exposition format.
    pub fn render(&self) -> String {
        let cells = self.cells.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = String::new();
        let mut last_name = "";
        for ((name, labels), (kind, cell)) in cells.iter() {
            if name != last_name {
                let t = match kind {
                    Kind::Counter => "counter",
                    Kind::Gauge => "gauge",
                    Kind::Histogram => "histogram",
                };
                let _ = writeln!(out, "# TYPE {name} {t}");
                last_name = name;
            }
            let lbl = |extra: Option<String>| {
                let mut parts: Vec<String> =
                    labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
                parts.extend(extra);
                if parts.is_empty() { String::new() } else { format!("{{{}}}", parts.join(",")) }
            };
            match kind {
                Kind::Counter => {
                    let _ =
                        writeln!(out, "{name}{} {}", lbl(None), cell.value.load(Ordering::Relaxed));
                }
                Kind::Gauge => {
                    let v = f64::from_bits(cell.value.load(Ordering::Relaxed));
                    let _ = writeln!(out, "{name}{} {v}", lbl(None));
                }
                Kind::Histogram => {
                    let obs = cell.observed.lock().unwrap_or_else(|p| p.into_inner());
                    for b in BUCKETS {
                        let n = obs.iter().filter(|v| **v <= *b).count();
                        let _ =
                            writeln!(out, "{name}_bucket{} {n}", lbl(Some(format!("le=\"{b}\""))));
                    }
                    let _ = writeln!(
                        out,
                        "{name}_bucket{} {}",
                        lbl(Some("le=\"+Inf\"".into())),
                        obs.len()
                    );
                    let _ = writeln!(out, "{name}_sum{} {}", lbl(None), obs.iter().sum::<f64>());
                    let _ = writeln!(out, "{name}_count{} {}", lbl(None), obs.len());
                }
            }
        }
        out
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

impl Recorder for TextRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.cell(key, Kind::Counter))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.cell(key, Kind::Gauge))
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.cell(key, Kind::Histogram))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_histograms() {
        let r = TextRecorder::default();
        metrics::with_local_recorder(&r, || {
            metrics::counter!("x_total", "backend" => "sqlite").increment(2);
            metrics::histogram!("x_seconds", "backend" => "sqlite").record(0.003);
            metrics::histogram!("x_seconds", "backend" => "sqlite").record(7.0);
        });
        assert_eq!(r.counter("x_total", &[("backend", "sqlite")]), 2);
        assert_eq!(r.observations("x_seconds", &[]), vec![0.003, 7.0]);
        let text = r.render();
        assert!(text.contains("# TYPE x_total counter\nx_total{backend=\"sqlite\"} 2\n"), "{text}");
        assert!(text.contains("x_seconds_bucket{backend=\"sqlite\",le=\"0.005\"} 1\n"), "{text}");
        assert!(text.contains("x_seconds_bucket{backend=\"sqlite\",le=\"+Inf\"} 2\n"), "{text}");
        assert!(text.contains("x_seconds_count{backend=\"sqlite\"} 2\n"), "{text}");
    }
}
