//! What a probe found: the deployment's settings, its verdicts and the settings that would
//! change them, which each store's `probe.rs` writes.

use std::time::{SystemTime, UNIX_EPOCH};

/// What [`crate::probe::probe`] found.
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

cfg_networked! {
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
}

/// How far behind the old primary a promoted server's clock may be before a probe warns: a
/// failover takes at least this long, and clock-backed fences rely on it.
pub(crate) const FAILOVER_CLOCK_SLACK_MS: f64 = 1000.0;

cfg_sql! {
    /// Seconds since 1970 on this host.
    pub(crate) fn now_s() -> f64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
    }
}

cfg_sql! {
    /// `server_s` read between `before` and `after` (seconds since 1970).
    pub(crate) fn offset(before: f64, after: f64, server_s: f64) -> ClockOffset {
        let mid = (before + after) / 2.0;
        ClockOffset {
            store_minus_local: ((server_s - mid) * 1e4).round() / 10.0,
            uncertainty: (((after - before) / 2.0) * 1e4).round() / 10.0,
        }
    }
}
