//! `leasehold size`: measure the store and this host, print the recommendation. The
//! measuring and the arithmetic are the library's (`leasehold::sizing`).

use crate::exit::{Exit, code};
use crate::opts::{StoreOpt, TimeoutOpt};
use crate::{dur, store};
use leasehold::sizing::{self, Distribution, Measurement};
use std::time::Duration;

/// What `size --json` prints.
#[derive(serde::Serialize)]
struct SizeReport<'a> {
    /// The store, its password redacted.
    store: String,
    measured_for_ms: u64,
    #[serde(flatten)]
    measurement: &'a Measurement,
    note: &'static str,
}

fn row(name: &str, d: &Distribution) -> String {
    let ms = |us: u64| format!("{:.3}", us as f64 / 1000.0);
    format!(
        "{name:<22} {:>8} {:>10} {:>10} {:>10} {:>10}",
        d.samples,
        ms(d.p50_us),
        ms(d.p99_us),
        ms(d.p999_us),
        ms(d.max_us)
    )
}

pub(crate) async fn size(
    store: StoreOpt,
    TimeoutOpt { timeout }: TimeoutOpt,
    duration: Duration,
    job: Option<Duration>,
    json: bool,
) -> Result<Exit, Exit> {
    if duration.is_zero() {
        return Err(Exit::fail(code::USAGE, "--for must be positive"));
    }
    if job.is_some_and(|j| j > leasehold::MAX_TTL) {
        return Err(Exit::fail(code::USAGE, "--job is longer than any lease can be"));
    }
    let url = store::resolve(&store)?.url;
    let locker = store::connect(&url, timeout).await?;
    let m = sizing::measure(&locker, duration, job).await?;
    if json {
        let report = SizeReport {
            store: url.to_string(),
            measured_for_ms: duration.as_millis() as u64,
            measurement: &m,
            note: sizing::NO_BOUND,
        };
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| Exit::fail(code::SOFTWARE, format!("cannot print JSON: {e}")))?;
        println!("{text}");
    } else {
        println!("store: {url} ({})", locker.guarantees().backend);
        println!("measured for {}", dur::human(duration));
        println!(
            "{:<22} {:>8} {:>10} {:>10} {:>10} {:>10}",
            "ms", "samples", "p50", "p99", "p99.9", "max"
        );
        println!("{}", row("renewal round trip", &m.rtt));
        println!("{}", row("host pause", &m.pauses));
        println!("{}", row("runtime lag (not used)", &m.runtime_lag));
        match m.load.average {
            Some([a, b, c]) => {
                println!("load average {a:.2} {b:.2} {c:.2} on {} CPUs", m.load.cpus)
            }
            None => println!("load average unknown on {} CPUs", m.load.cpus),
        }
        println!("{}", m.recommendation);
    }
    Ok(Exit::ok(0))
}
