//! The chaos checker: what a trial's history shows (a stale effect accepted after the
//! successor's grant, a successor locked out, fences out of order, a loss learned late, an
//! orphaned grant), the counts of each arm, and the verdict `leasehold chaos` and its tests
//! both apply.

/// One event of a trial's history: monotonic nanoseconds, who, what, and details.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Event {
    /// `CLOCK_MONOTONIC` nanoseconds.
    pub t_ns: i64,
    /// `holder`, `successor`, `chaos` or `observer`.
    pub who: &'static str,
    /// What happened (`acquire`, `effect`, `lost`, …).
    pub what: String,
    /// The fence it concerns, if any.
    pub fence: Option<u64>,
    /// What the resource or the store answered.
    pub detail: Option<String>,
}

/// One trial: its arm and number, what its history shows, and the history.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Trial {
    /// The arm: `fenced`, `unfenced` (or `reconnect`, `cut`).
    pub arm: &'static str,
    /// Its number within the arm.
    pub n: usize,
    /// The frozen holder's fence.
    pub holder_fence: u64,
    /// The successor's fence, if it got the key.
    pub successor_fence: Option<u64>,
    /// The successor got the key while the holder was frozen.
    pub successor_acquired: bool,
    /// An effect of the holder was accepted by the resource after the store granted the key
    /// to the successor, whether or not the successor's own effect was accepted.
    pub stale_effect_accepted: bool,
    /// The successor, the store's current holder, was refused by the resource (its claim or
    /// one of its effects): what a repeated or smaller fence does after a store failure.
    pub successor_locked_out: bool,
    /// Fences did not increase from holder to successor.
    pub fence_out_of_order: bool,
    /// stalled-holder-tx: the successor's claim and write finished only after the frozen
    /// holder was resumed (its open transaction blocked them).
    pub successor_blocked: bool,
    /// An operation whose outcome was unknown.
    pub unknown: bool,
    /// Partition: the cut-off holder's lost() fired only after the store granted the key to
    /// the successor (or never), i.e. later than the store-side expiry.
    pub lost_late: bool,
    /// Partition: how long before the successor's grant the holder's lost() fired, in ms.
    pub lost_lead_ms: Option<f64>,
    /// Unknown-acquire: the store had granted the acquire whose answer was lost (the observer
    /// found the key held right after the unknown outcome).
    pub orphan_seen: bool,
    /// Unknown-acquire: from the unknown outcome to the observer's grant, in ms.
    pub orphan_ms: Option<f64>,
    /// Unknown-acquire: the orphaned grant outlived its bound (the cleanup, or the store's
    /// expiry when the link stayed cut), or never went away.
    pub orphan: bool,
    /// What the holder process reported.
    pub holder_said: String,
    /// The resource's value at the end.
    pub final_value: Option<String>,
    /// The history, in time order.
    pub events: Vec<Event>,
}

impl Trial {
    /// A trial whose checks are computed from its history: a stale effect is any holder
    /// effect the resource accepted after the successor's grant (the instant its acquire
    /// returned, the latest the store can have granted); a locked-out successor is a refused
    /// successor claim or effect; the holder learned of its loss late when its `lost()` (or
    /// release) came after the store's grant to the successor.
    pub fn checked(
        arm: &'static str,
        n: usize,
        holder_fence: u64,
        successor_fence: Option<u64>,
        holder_said: String,
        final_value: Option<String>,
        events: Vec<Event>,
    ) -> Trial {
        let at = |who: &str, what: &str| {
            events.iter().find(|e| e.who == who && e.what == what).map(|e| e.t_ns)
        };
        let granted_at = at("successor", "acquire");
        let holder_end = [at("holder", "lost"), at("holder", "releasing"), at("holder", "release")]
            .into_iter()
            .flatten()
            .min();
        let accepted = |e: &&Event| {
            e.what == "effect" && e.detail.as_deref().is_some_and(|d| d.starts_with("accepted"))
        };
        let stale = granted_at.is_some_and(|g| {
            events.iter().filter(accepted).any(|e| e.who == "holder" && e.t_ns > g)
        });
        let locked_out = events.iter().any(|e| {
            e.who == "successor"
                && (e.what == "claim-refused" || (e.what == "effect" && !accepted(&e)))
        });
        Trial {
            arm,
            n,
            holder_fence,
            successor_fence,
            successor_acquired: successor_fence.is_some(),
            stale_effect_accepted: stale,
            successor_locked_out: locked_out,
            fence_out_of_order: successor_fence.is_some_and(|f| f <= holder_fence),
            successor_blocked: false,
            unknown: events.iter().any(|e| e.what == "unknown"),
            lost_late: match (granted_at, holder_end) {
                (Some(g), Some(end)) => end > g,
                (Some(_), None) => true,
                (None, _) => false,
            },
            lost_lead_ms: match (granted_at, at("holder", "lost")) {
                (Some(g), Some(l)) => Some((g - l) as f64 / 1e6),
                _ => None,
            },
            orphan_seen: false,
            orphan_ms: None,
            orphan: false,
            holder_said,
            final_value,
            events,
        }
    }
}

/// The counts of one arm (fenced, unfenced; reconnect, cut).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Arm {
    /// The arm: `fenced`, `unfenced` (or `reconnect`, `cut`).
    pub arm: &'static str,
    /// Trials of the arm.
    pub trials: usize,
    /// Trials whose successor got the key.
    pub successor_acquired: usize,
    /// Trials with a stale effect accepted.
    pub stale_effects_accepted: usize,
    /// Trials whose successor was refused.
    pub successors_locked_out: usize,
    /// Trials whose fences did not increase.
    pub fences_out_of_order: usize,
    /// stalled-holder-tx: successors whose claim waited until the frozen holder resumed.
    pub successors_blocked: usize,
    /// Trials with an unknown outcome.
    pub unknown_outcomes: usize,
    /// Trials whose holder learned of its loss after the successor's grant.
    pub lost_after_successor_grant: usize,
    /// How long before the successor's grant the holder's `lost()` fired.
    pub lost_before_grant_ms: Option<Stats>,
    /// Trials where the lost acquire had been granted.
    pub orphans_seen: usize,
    /// Trials whose orphaned grant outlived its bound.
    pub orphans: usize,
    /// How long an orphaned grant blocked the key after the unknown outcome.
    pub orphan_lifetime_ms: Option<Stats>,
}

/// Minimum, median and maximum of a sample, in ms (one decimal).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Stats {
    /// The smallest value.
    pub min: f64,
    /// The median.
    pub median: f64,
    /// The largest value.
    pub max: f64,
    /// The sample size.
    pub trials: usize,
}

impl Stats {
    /// `None` for an empty sample.
    pub fn of(mut v: Vec<f64>) -> Option<Stats> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let round = |x: f64| (x * 10.0).round() / 10.0;
        Some(Stats {
            min: round(v[0]),
            median: round(v[v.len() / 2]),
            max: round(v[v.len() - 1]),
            trials: v.len(),
        })
    }
}

impl Arm {
    /// The counts of the trials of arm `arm`.
    pub fn of(arm: &'static str, trials: &[Trial]) -> Arm {
        let t: Vec<&Trial> = trials.iter().filter(|t| t.arm == arm).collect();
        let count = |f: fn(&Trial) -> bool| t.iter().filter(|t| f(t)).count();
        Arm {
            arm,
            trials: t.len(),
            successor_acquired: count(|t| t.successor_acquired),
            stale_effects_accepted: count(|t| t.stale_effect_accepted),
            successors_locked_out: count(|t| t.successor_locked_out),
            fences_out_of_order: count(|t| t.fence_out_of_order),
            successors_blocked: count(|t| t.successor_blocked),
            unknown_outcomes: count(|t| t.unknown),
            lost_after_successor_grant: count(|t| t.lost_late),
            lost_before_grant_ms: Stats::of(t.iter().filter_map(|t| t.lost_lead_ms).collect()),
            orphans_seen: count(|t| t.orphan_seen),
            orphans: count(|t| t.orphan),
            orphan_lifetime_ms: Stats::of(
                t.iter().filter(|t| t.orphan_seen).filter_map(|t| t.orphan_ms).collect(),
            ),
        }
    }
}

/// On every scenario and store: with fencing, no stale effect accepted, no successor locked
/// out, fences in order; no holder learning of its loss after the store moved on, unless a
/// store failure (`store_failed`) that the store's guarantees say can admit a second holder
/// caused it (`admits_second_holder`); no orphaned grant outliving its bound.
pub fn verdict_of(
    store_failed: bool,
    admits_second_holder: bool,
    arms: &[Arm],
) -> Result<(), String> {
    let admitted = store_failed && admits_second_holder;
    for a in arms {
        let fenced = a.arm == "fenced";
        if fenced && a.stale_effects_accepted > 0 {
            return Err(format!(
                "{} stale effects were accepted WITH fencing",
                a.stale_effects_accepted
            ));
        }
        if fenced && a.successors_locked_out > 0 {
            return Err(format!(
                "{} successor(s), the store's current holder, were refused by the resource WITH \
                 fencing (a fence that went back)",
                a.successors_locked_out
            ));
        }
        if fenced && a.fences_out_of_order > 0 {
            return Err("fences went out of order".into());
        }
        if a.lost_after_successor_grant > 0 && !admitted {
            return Err(format!(
                "{} holder(s) learned of the loss only after the store granted the key to the successor",
                a.lost_after_successor_grant
            ));
        }
        if a.orphans > 0 {
            return Err(format!(
                "{} acquire(s) with unknown outcome left a grant that outlived its bound ({} arm)",
                a.orphans, a.arm
            ));
        }
    }
    Ok(())
}

/// The checker, on hand-made histories: it must see what a repeated fence does.
#[cfg(test)]
mod tests {
    use super::*;

    fn at(t_ns: i64, who: &'static str, what: &str, fence: u64, detail: Option<&str>) -> Event {
        Event { t_ns, who, what: what.into(), fence: Some(fence), detail: detail.map(Into::into) }
    }

    /// The verdict on one fenced trial, after a store failure that can admit a second holder.
    fn verdict(t: Trial) -> Result<(), String> {
        let arms = [Arm::of("fenced", &[t])];
        verdict_of(true, true, &arms)
    }

    /// The history a repeated fence produced after a store restart: the successor, granted the
    /// key with the holder's number, is refused; the holder's late write is accepted. Both are
    /// failures, even though the successor's own effect was never accepted.
    #[test]
    fn a_repeated_fence_is_a_stale_effect_and_a_locked_out_successor() {
        let events = vec![
            at(1, "holder", "acquire", 7, None),
            at(2, "holder", "claim", 7, None),
            at(3, "holder", "effect", 7, Some("accepted")),
            at(4, "chaos", "pause", 7, Some("store killed")),
            at(5, "successor", "acquire", 7, None),
            at(6, "successor", "claim-refused", 7, Some("fence 7 is installed by another owner")),
            at(7, "successor", "effect", 7, Some("rejected stale fence")),
            at(8, "holder", "effect", 7, Some("accepted")),
        ];
        let t = Trial::checked("fenced", 0, 7, Some(7), String::new(), None, events);
        assert!(t.stale_effect_accepted && t.successor_locked_out && t.fence_out_of_order);
        let v = verdict(t).unwrap_err();
        assert!(v.contains("stale effects"), "{v}");
    }

    /// A clean handoff: the holder's effects before the grant count, its refused late write
    /// does not, and the successor is never refused.
    #[test]
    fn a_clean_handoff_passes() {
        let events = vec![
            at(1, "holder", "acquire", 7, None),
            at(3, "holder", "effect", 7, Some("accepted")),
            at(5, "successor", "acquire", 9, None),
            at(6, "successor", "claim", 9, None),
            at(7, "successor", "effect", 9, Some("accepted")),
            at(8, "holder", "effect", 7, Some("rejected stale fence")),
        ];
        let t = Trial::checked("fenced", 0, 7, Some(9), String::new(), None, events);
        assert!(!t.stale_effect_accepted && !t.successor_locked_out && !t.fence_out_of_order);
        verdict(t).unwrap();
    }

    /// A locked-out successor alone fails the run, whatever the store's guarantees say.
    #[test]
    fn a_locked_out_successor_alone_fails() {
        let events = vec![
            at(1, "holder", "acquire", 9, None),
            at(5, "successor", "acquire", 8, None),
            at(6, "successor", "claim-refused", 8, Some("fence 9 is installed")),
        ];
        let t = Trial::checked("fenced", 0, 9, Some(8), String::new(), None, events);
        assert!(!t.stale_effect_accepted && t.successor_locked_out);
        // Its fence is smaller, so fences are out of order too: the locked-out check comes first
        // and fails on its own.
        assert!(verdict(t).unwrap_err().contains("refused by the resource"));
    }
}
