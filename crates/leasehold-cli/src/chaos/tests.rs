//! The checker, on hand-made histories: it must see what a repeated fence does.

use super::*;

fn at(t_ns: i64, who: &'static str, what: &str, fence: u64, detail: Option<&str>) -> Event {
    Event { t_ns, who, what: what.into(), fence: Some(fence), detail: detail.map(Into::into) }
}

fn verdict(t: Trial, scenario: Scenario) -> Result<(), String> {
    let arms = [report::Arm::of("fenced", &[t])];
    report::verdict_of(scenario, true, &arms)
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
    let v = verdict(t, Scenario::StoreKill).unwrap_err();
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
    verdict(t, Scenario::Failover).unwrap();
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
    assert!(verdict(t, Scenario::Failover).unwrap_err().contains("refused by the resource"));
}
