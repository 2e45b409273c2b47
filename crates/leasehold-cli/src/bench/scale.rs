//! `--scenario scale`: `--leases` distinct keys locked once each (acquire, a fenced write,
//! release), and what the store keeps of them: its size before the first key (the empty
//! store), after the last, and once the horizon has passed (`leasehold::horizon`). How a store
//! reads its size, its fenced write and how long it waits are its kit's
//! ([`leasehold_harness::stores::StoreKit::scale`]; the store's `what` in the report says
//! which sizes it reads); a store whose kit has none is refused, naming those that have one.

use leasehold::Locker;
pub use leasehold_harness::scale::{Latency, Size};
use leasehold_harness::scale::{Measured, PAR};
use serde::Serialize;

use super::{BenchResult, Progress, Settings, round_to};

/// What the scale scenario measured.
#[derive(Debug, Serialize)]
pub struct Scale {
    pub what: String,
    pub keys: usize,
    pub horizon_s: f64,
    /// Keys locked (acquire, fenced write, release) per second.
    pub keys_per_s: f64,
    /// The store and resource before the first key.
    pub empty: Size,
    /// After the last key's release.
    pub after_last_key: Size,
    /// Once every key's state may be gone (at least twice the horizon plus the TTL after the
    /// last, and, where the store compacts, its compaction after it).
    pub after_horizon: Size,
    /// Where the store's kit measures them: grants of one key, every 100 ms, for 10 s before
    /// the first key (the baseline), and while waiting out the horizon (through the pruning
    /// and the compaction).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grants: Option<[Latency; 2]>,
    /// Where the store's kit measures it: where the bytes after the horizon are (by kind of
    /// storage).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_horizon_detail: Option<String>,
    /// `after_horizon.bytes / empty.bytes`.
    pub after_horizon_vs_empty: f64,
    /// Seconds from the last release to the `after_horizon` measurement.
    pub waited_s: f64,
}

pub(super) async fn scale(s: &Settings, locker: &Locker, p: &Progress) -> BenchResult<Scale> {
    p.step(format!("scale: {} keys", s.leases));
    let scheme = s.url.scheme();
    match leasehold_harness::stores::kit(scheme).scale() {
        Some(run) => Ok(finish(s, run.run(&s.url, locker, s.leases).await?)),
        None => {
            let with: Vec<String> = leasehold_harness::stores::KITS
                .iter()
                .filter(|k| k.scale().is_some())
                .map(|k| format!("{}://", k.schemes()[0].as_str()))
                .collect();
            Err(format!("--scenario scale measures {} stores, not {scheme:?}", with.join(" and ")))
        }
    }
}

fn finish(s: &Settings, m: Measured) -> Scale {
    let Measured { horizon, keys_per_s: rate, sizes, grants, waited, what } = m;
    let [empty, last, after] = sizes;
    Scale {
        what: format!(
            "{} distinct keys, each acquired, written once through its fence and released \
             ({PAR} tasks), horizon {} s: {what}",
            s.leases,
            horizon.as_secs_f64()
        ),
        keys: s.leases,
        horizon_s: horizon.as_secs_f64(),
        keys_per_s: round_to(rate, 0),
        after_horizon_vs_empty: round_to(after.bytes as f64 / empty.bytes.max(1) as f64, 3),
        empty,
        after_last_key: last,
        after_horizon: after,
        after_horizon_detail: grants.as_ref().map(|g| g.1.clone()),
        grants: grants.map(|g| g.0),
        waited_s: round_to(waited.as_secs_f64(), 1),
    }
}

/// The text table of the scenario.
pub(super) fn text(sc: &Scale) -> String {
    let mb = |b: u64| b as f64 / 1_000_000.0;
    let mut out = format!("\n[scale] {}\n", sc.what);
    out.push_str(&format!("  keys locked/s {}\n", sc.keys_per_s));
    let mut line = |name: &str, z: &Size| {
        out.push_str(&format!(
            "  {name:<16} {:>10.2} MB  {:>10} entries  ({:.3} × empty)\n",
            mb(z.bytes),
            z.entries,
            z.bytes as f64 / sc.empty.bytes.max(1) as f64
        ))
    };
    line("empty", &sc.empty);
    line("after last key", &sc.after_last_key);
    line("after horizon", &sc.after_horizon);
    out.push_str(&format!("  measured {} s after the last release\n", sc.waited_s));
    if let Some(d) = &sc.after_horizon_detail {
        out.push_str(&format!("  after horizon, by fork: {d}\n"));
    }
    if let Some(gs) = &sc.grants {
        let names = ["before the first key (10 s)", "while waiting (pruning, compaction)"];
        for (name, g) in names.iter().zip(gs) {
            out.push_str(&format!(
                "  grants of one key every 100 ms, {name}: {} grants, p50 {} ms, p99 {} ms, \
                 max {} ms\n",
                g.grants, g.p50_ms, g.p99_ms, g.max_ms
            ));
        }
    }
    out
}
