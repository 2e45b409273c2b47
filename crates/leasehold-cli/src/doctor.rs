//! `leasehold doctor`: prints what the library's probe read of a deployment
//! ([`leasehold::probe`]): the backend's guarantees, this deployment's settings, what they make
//! of the guarantees, and the settings that would change that.

use std::time::Duration;

use leasehold::probe::Probe;
use leasehold::{Locker, StoreUrl};

/// `doctor --json`: the store, the backend's guarantees, and the probe's fields beside them.
#[derive(serde::Serialize)]
pub struct Report<'a> {
    store: String,
    guarantees: leasehold::Guarantees,
    #[serde(flatten)]
    probe: &'a Probe,
}

/// Reads the settings of the deployment `url` names, on the store `locker` opened (within
/// --timeout: credentials, TLS or a database the store refuses were
/// [`leasehold::Error::Config`], exit 78, as for every other command), within `limit`.
pub async fn run(url: &StoreUrl, locker: &Locker, limit: Duration) -> leasehold::Result<Probe> {
    leasehold::probe::probe_open(url, locker, limit).await
}

/// The report as one line of JSON (plain data: serializing cannot fail).
pub fn json(url: &StoreUrl, locker: &Locker, p: &Probe) -> String {
    let r = Report { store: url.to_string(), guarantees: locker.guarantees(), probe: p };
    serde_json::to_string(&r).expect("the doctor report serializes")
}

pub fn text(url: &StoreUrl, locker: &Locker, p: &Probe) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "store: {url}");
    let _ = writeln!(out, "\nthe backend promises:");
    for line in locker.guarantees().to_string().lines() {
        let _ = writeln!(out, "  {line}");
    }
    let w = p.settings.iter().map(|s| s.setting.len()).max().unwrap_or(0);
    if !p.settings.is_empty() {
        let _ = writeln!(out, "\nthis deployment:");
        for s in &p.settings {
            let _ = writeln!(out, "  {:<w$}  {}", s.setting, s.value);
        }
    }
    if let Some(c) = p.clock {
        let _ = writeln!(
            out,
            "  {:<w$}  {:+.1} ms (±{:.1} ms); leasehold never compares the two clocks",
            "store clock − local clock", c.store_minus_local, c.uncertainty
        );
    }
    let _ = writeln!(out, "\nwhat it guarantees:");
    for v in &p.verdicts {
        let _ = writeln!(out, "  - {v}");
    }
    if !p.changes.is_empty() {
        let _ = writeln!(out, "\nwhat would change it:");
        for c in &p.changes {
            let _ = writeln!(out, "  - {c}");
        }
    }
    out
}
