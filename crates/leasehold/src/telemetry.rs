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

/// The label sets without a key: a handful per backend, built once and kept, so recording a
/// metric allocates nothing (measured: building them per call was most of what the client
/// side cost on top of the store's own round trips, issue 24).
type Extra = Option<(&'static str, &'static str)>;
/// A backend and an extra label, with the label set they make.
type LabelSet = ((&'static str, Extra), &'static [metrics::Label]);

fn static_labels(backend: &'static str, extra: Extra) -> &'static [metrics::Label] {
    static SETS: std::sync::Mutex<Vec<LabelSet>> = std::sync::Mutex::new(Vec::new());
    let mut sets = SETS.lock().unwrap_or_else(|p| p.into_inner());
    // Every label is a `&'static str` of this crate: comparing addresses is enough (a
    // literal with two addresses only makes a second, equal, set).
    let same = |a: &str, b: &str| std::ptr::eq(a, b);
    let hit = sets.iter().find(|((b, e), _)| {
        same(b, backend)
            && match (e, extra) {
                (None, None) => true,
                (Some((k1, v1)), Some((k2, v2))) => same(k1, k2) && same(v1, v2),
                _ => false,
            }
    });
    if let Some((_, l)) = hit {
        return l;
    }
    let mut l = vec![metrics::Label::from_static_parts("backend", backend)];
    if let Some((k, v)) = extra {
        l.push(metrics::Label::from_static_parts(k, v));
    }
    // Bounded: backends × the fixed outcome labels of this module.
    let l: &'static [metrics::Label] = Vec::leak(l);
    sets.push(((backend, extra), l));
    l
}

impl Telemetry {
    fn key(&self, name: &'static str, key: &Key, extra: Extra) -> metrics::Key {
        let fixed = static_labels(self.backend, extra);
        if !self.keys {
            return metrics::Key::from_static_parts(name, fixed);
        }
        let mut l = fixed.to_vec();
        l.push(metrics::Label::new("key", key.as_str().to_owned()));
        metrics::Key::from_parts(name, l)
    }

    pub fn count(&self, name: &'static str, key: &Key, extra: Extra) {
        static META: metrics::Metadata<'static> =
            metrics::Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));
        let k = self.key(name, key, extra);
        metrics::with_recorder(|r| r.register_counter(&k, &META).increment(1));
    }

    pub fn time(&self, name: &'static str, key: &Key, extra: Extra, d: Duration) {
        static META: metrics::Metadata<'static> =
            metrics::Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));
        let k = self.key(name, key, extra);
        metrics::with_recorder(|r| r.register_histogram(&k, &META).record(d.as_secs_f64()));
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
        Error::InvalidInput(_) | Error::Unsupported { .. } => "invalid",
        _ => "error",
    }
}
