//! What leasehold reports through the [`metrics`] facade, for operators: waits, holds,
//! handoffs, renewals and losses. Nothing is recorded unless the application installs a
//! recorder (an exporter of its choice); the names and labels are listed in
//! `docs/design.md` §7 and in [`crate::Locker::with_key_label`].

use std::time::Duration;

use crate::{Key, LostReason};

/// Acquire wait, from the call to its answer (seconds); label `outcome`.
pub const ACQUIRE_WAIT: &str = "leasehold_acquire_wait_seconds";
/// Time a grant was held, from the grant to its release, drop or loss (seconds).
pub const HOLD: &str = "leasehold_hold_seconds";
/// From this locker letting a key go to its next grant of that key to a waiter (seconds).
pub const HANDOFF_WAIT: &str = "leasehold_handoff_wait_seconds";
/// One renewal round trip (seconds); label `outcome`.
pub const RENEWAL: &str = "leasehold_renewal_seconds";
/// Grants.
pub const GRANTS: &str = "leasehold_grants_total";
/// Acquires answered busy (another owner, or this locker).
pub const BUSY: &str = "leasehold_busy_total";
/// Leases lost; label `reason`.
pub const LOSSES: &str = "leasehold_losses_total";
/// Renewals that failed (error, timeout, not owner).
pub const RENEWAL_FAILURES: &str = "leasehold_renewal_failures_total";
/// Requests whose outcome stayed unknown; label `op`.
pub const UNKNOWN: &str = "leasehold_unknown_outcomes_total";
/// Cleanups of acquires whose outcome was unknown; label `outcome` (`removed`: an orphan
/// grant was found and deleted; `none`: there was none; `failed`).
pub const ORPHAN_CLEANUPS: &str = "leasehold_orphan_cleanups_total";

/// The labels every metric of one locker carries: its backend and, when opted in, the key.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Telemetry {
    pub backend: &'static str,
    pub keys: bool,
}

impl Telemetry {
    fn labels(
        &self,
        key: &Key,
        extra: Option<(&'static str, &'static str)>,
    ) -> Vec<metrics::Label> {
        let mut l = vec![metrics::Label::new("backend", self.backend)];
        if let Some((k, v)) = extra {
            l.push(metrics::Label::new(k, v));
        }
        if self.keys {
            l.push(metrics::Label::new("key", key.as_str().to_owned()));
        }
        l
    }

    pub fn count(
        &self,
        name: &'static str,
        key: &Key,
        extra: Option<(&'static str, &'static str)>,
    ) {
        metrics::counter!(name, self.labels(key, extra)).increment(1);
    }

    pub fn time(
        &self,
        name: &'static str,
        key: &Key,
        extra: Option<(&'static str, &'static str)>,
        d: Duration,
    ) {
        metrics::histogram!(name, self.labels(key, extra)).record(d.as_secs_f64());
    }

    /// An acquire answered after `waited`.
    pub fn acquired(&self, key: &Key, outcome: &'static str, waited: Duration) {
        self.time(ACQUIRE_WAIT, key, Some(("outcome", outcome)), waited);
        match outcome {
            "granted" => self.count(GRANTS, key, None),
            "busy" | "held_by_this_locker" => self.count(BUSY, key, None),
            "unknown" => self.count(UNKNOWN, key, Some(("op", "acquire"))),
            _ => {}
        }
    }

    /// A lease latched lost for `reason` (not its own release).
    pub fn lost(&self, key: &Key, reason: &LostReason) {
        let reason = match reason {
            LostReason::DeadlinePassed => "deadline_passed",
            LostReason::NotOwner => "not_owner",
            LostReason::SessionEnded(_) => "session_ended",
            LostReason::Released => return,
        };
        self.count(LOSSES, key, Some(("reason", reason)));
    }

    /// One renewal round trip of `d`, answered `outcome` (`ok`, `not_owner`, `error`,
    /// `timeout`).
    pub fn renewed(&self, key: &Key, outcome: &'static str, d: Duration) {
        self.time(RENEWAL, key, Some(("outcome", outcome)), d);
        if outcome != "ok" {
            self.count(RENEWAL_FAILURES, key, None);
        }
        if outcome == "timeout" {
            self.count(UNKNOWN, key, Some(("op", "renew")));
        }
    }
}

/// The outcome label of an acquire's error.
pub(crate) fn outcome_of(e: &crate::Error) -> &'static str {
    use crate::Error;
    match e {
        Error::Busy { .. } => "busy",
        Error::HeldByThisLocker { .. } => "held_by_this_locker",
        Error::UnknownOutcome(_) => "unknown",
        Error::Unavailable { .. } => "unavailable",
        Error::InvalidInput(_) => "invalid",
        _ => "error",
    }
}
