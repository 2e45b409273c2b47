//! What a deployment actually guarantees: [`probe`] connects to the store a URL names, reads
//! its real settings (persistence, replication, synchronous settings, poolers, members, the
//! server's clock) and turns the store's [`crate::Guarantees`] into verdicts for *this*
//! deployment, with the settings that would change them. `leasehold doctor` prints it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::{FenceRepeat, Result};

/// What [`probe`] found.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct Probe {
    /// Server facts, in reading order.
    pub settings: Vec<Setting>,
    /// What this deployment guarantees, sentence by sentence.
    #[serde(rename = "this_deployment")]
    pub verdicts: Vec<String>,
    /// Settings that would change the verdicts.
    #[serde(rename = "would_change_it")]
    pub changes: Vec<String>,
    /// The store's clock against this host's, when the protocol reveals it.
    #[serde(rename = "clock_offset_ms")]
    pub clock: Option<ClockOffset>,
}

/// One server fact.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Setting {
    /// Its name (`appendonly`, `synchronous_commit`, `member etcd-1`…).
    pub setting: String,
    /// Its value as read.
    pub value: String,
}

/// Store clock minus local clock, in ms, and its uncertainty (half the round trip).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct ClockOffset {
    /// Store clock minus local clock, ms.
    pub store_minus_local: f64,
    /// Half the round trip that read it, ms.
    pub uncertainty: f64,
}

#[cfg_attr(
    not(any(
        feature = "redis",
        feature = "postgres",
        feature = "mysql",
        feature = "etcd",
        feature = "zookeeper"
    )),
    allow(dead_code)
)]
impl Probe {
    pub(crate) fn set(&mut self, k: &str, v: impl ToString) {
        self.settings.push(Setting { setting: k.to_owned(), value: v.to_string() });
    }
    pub(crate) fn verdict(&mut self, v: impl Into<String>) {
        self.verdicts.push(v.into());
    }
    pub(crate) fn change(&mut self, v: impl Into<String>) {
        self.changes.push(v.into());
    }
    /// The value of a setting, if read.
    pub fn setting(&self, name: &str) -> Option<&str> {
        self.settings.iter().find(|s| s.setting == name).map(|s| s.value.as_str())
    }
}

/// How far behind the old primary a promoted server's clock may be before a probe warns: a
/// failover takes at least this long, and clock-backed fences rely on it.
pub(crate) const FAILOVER_CLOCK_SLACK_MS: f64 = 1000.0;

/// Seconds since 1970 on this host.
#[cfg_attr(not(any(feature = "redis", feature = "postgres", feature = "mysql")), allow(dead_code))]
pub(crate) fn now_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// `server_s` read between `before` and `after` (seconds since 1970).
#[cfg_attr(not(any(feature = "redis", feature = "postgres", feature = "mysql")), allow(dead_code))]
pub(crate) fn offset(before: f64, after: f64, server_s: f64) -> ClockOffset {
    let mid = (before + after) / 2.0;
    ClockOffset {
        store_minus_local: ((server_s - mid) * 1e4).round() / 10.0,
        uncertainty: (((after - before) / 2.0) * 1e4).round() / 10.0,
    }
}

/// The value of a URL option, owned (the probes' messages keep it).
#[cfg_attr(
    not(any(feature = "redis", feature = "postgres", feature = "mysql", feature = "etcd")),
    allow(dead_code)
)]
pub(crate) fn query_flag(url: &str, name: &str) -> Option<String> {
    crate::url::option_of(url, name).map(str::to_owned)
}

/// Reads the deployment `url` names: connecting bounded by [`crate::DEFAULT_CONNECT_TIMEOUT`],
/// reading its settings by 20 s. Errors carry no password.
pub async fn probe(url: &str) -> Result<Probe> {
    probe_within(url, crate::DEFAULT_CONNECT_TIMEOUT, Duration::from_secs(20)).await
}

/// [`probe`], connecting bounded by `connect` and reading the settings by `limit`: no
/// answer within them is [`crate::Error::Unavailable`]; credentials, TLS or a database the
/// store refuses are [`crate::Error::Config`], as for [`crate::Locker::connect`].
pub async fn probe_within(url: &str, connect: Duration, limit: Duration) -> Result<Probe> {
    let mut p = Probe::default();
    let limits = crate::backends::Limits { connect, op: crate::DEFAULT_OP_TIMEOUT };
    let (store, read) = crate::backends::probe(url, &mut p, limits, limit).await?;
    read?;
    if store.guarantees().fence_repeat == FenceRepeat::ClockBacked {
        fence_clock(&mut p);
    }
    Ok(p)
}

/// The clock-backed fences' assumption, and what a probe could check of it.
fn fence_clock(r: &mut Probe) {
    r.verdict(format!(
        "fences are max(counter + 1, the store's clock in µs), so they never go back after a \
         restart or failover; this assumes that {}",
        crate::CLOCK_ASSUMPTION
    ));
    if let Some(c) = r.clock
        && c.store_minus_local.abs() > FAILOVER_CLOCK_SLACK_MS + c.uncertainty
    {
        r.verdict(format!(
            "the store's clock is {:+.0} ms from this host's: one of the two is not kept by \
             NTP; a store server with a clock that far off could, after a failover, issue \
             fences below the last ones",
            c.store_minus_local
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_clock(store_minus_local: f64) -> Probe {
        let mut p = Probe {
            clock: Some(ClockOffset { store_minus_local, uncertainty: 0.5 }),
            ..Probe::default()
        };
        fence_clock(&mut p);
        p
    }

    /// The assumption is always stated; a store clock over a second off adds a warning.
    #[test]
    fn a_far_off_store_clock_is_named() {
        let near = with_clock(12.0);
        assert_eq!(near.verdicts.len(), 1);
        assert!(near.verdicts[0].contains(crate::CLOCK_ASSUMPTION));
        let far = with_clock(-5000.0);
        assert_eq!(far.verdicts.len(), 2);
        assert!(far.verdicts[1].contains("-5000 ms") && far.verdicts[1].contains("NTP"), "{far:?}");
    }
}
