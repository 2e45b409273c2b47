//! The protocol model checked in CI: the library's rules hold in every bounded configuration
//! (exhaustively: a safety run has no time horizon), and each rule switched off makes the
//! checker find a violation, whose shortest trace (BFS) the test prints.

use std::time::Instant;

use leasehold_model::property::*;
use leasehold_model::{Broken, Config, Protocol, props, trace};
use stateright::{Checker, Model};

fn holds(name: &str, config: Config) {
    let model = Protocol::new(config);
    let failures = props::failures(&model);
    let names: Vec<&'static str> = model.properties().iter().map(|p| p.name).collect();
    let started = Instant::now();
    let checker = model.clone().checker().threads(2).spawn_bfs().join();
    println!(
        "{name}: {} states generated, {} unique, max depth {}, {:.1} s",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed().as_secs_f64()
    );
    for p in names {
        let found = checker.discovery(p);
        if failures.contains(&p) {
            if let Some(path) = found {
                panic!("{name}: {p} is violated:\n{}", trace::render(&model, &path));
            }
        } else {
            assert!(found.is_some(), "{name}: the model never reaches: {p}");
        }
    }
}

#[test]
fn the_client_side_holds() {
    holds("lock", Config::lock());
}

#[test]
fn a_store_failover_is_fenced() {
    holds("fence", Config::fence());
}

#[test]
fn failover_and_lost_messages_together() {
    holds("faults", Config::faults());
}

#[test]
fn a_waiting_client_eventually_holds() {
    holds("liveness", Config::liveness());
}

/// The liveness check can fail: with a horizon of 8 ticks the holder may renew until it stops
/// at tick 6 and its grant outlives the run, so the waiter does not always get the key.
#[test]
fn the_liveness_check_fails_when_the_horizon_is_too_short() {
    let model = Protocol::new(Config { horizon: 8, ..Config::liveness() });
    let checker = model.clone().checker().threads(2).spawn_bfs().join();
    assert!(checker.discovery(WAITER_HOLDS).is_some(), "the waiter always held within 8 ticks");
}

/// Asserts that with `broken` the checker finds a violation of each property of `expected`,
/// and prints a shortest trace of each.
fn caught(broken: Broken, expected: &[&'static str]) {
    let model = Protocol::new(broken.config());
    for p in expected {
        let path = props::shortest(&model, p, 20)
            .unwrap_or_else(|| panic!("{broken:?}: the checker found no violation of {p:?}"));
        let steps = path.clone().into_actions().len();
        println!("{broken:?} violates {p:?} ({steps} steps):\n{}", trace::render(&model, &path));
    }
}

#[test]
fn a_plain_counter_repeats_fences_after_a_failover() {
    caught(Broken::PlainCounter, &[FENCES_GROW, NO_LOCKOUT, NO_STALE_EFFECT]);
}

#[test]
fn without_the_claim_the_holder_is_refused() {
    caught(Broken::NoClaim, &[NO_LOCKOUT]);
}

#[test]
fn a_renewal_that_extends_on_timeout_outlives_the_grant() {
    caught(Broken::ExtendOnTimeout, &[ANSWERED_ONLY, ACTS_WHILE_GRANTED]);
}

#[test]
fn a_release_without_the_owner_compare_frees_anothers_grant() {
    caught(Broken::ReleaseWithoutOwner, &[ACTS_WHILE_GRANTED]);
}

#[test]
fn a_new_clock_behind_the_assumption_sends_fences_back() {
    caught(Broken::ClockBeyondAssumption, &[FENCES_GROW, NO_LOCKOUT, NO_STALE_EFFECT]);
}

#[test]
fn without_a_local_deadline_the_holder_acts_after_its_grant() {
    caught(Broken::NoLocalDeadline, &[ACTS_WHILE_GRANTED]);
}

#[test]
fn a_clock_slower_than_the_drift_outlives_the_grant() {
    caught(Broken::DriftBeyondBound, &[ACTS_WHILE_GRANTED]);
}

#[test]
fn forgetting_a_counter_past_the_horizon_keeps_fences_growing() {
    holds("forget", Config::forget());
}

#[test]
fn forgetting_a_counter_too_soon_for_the_clock_step_back_repeats_a_fence() {
    caught(Broken::ForgetTooSoon, &[FENCES_GROW]);
}

#[test]
fn every_rule_that_can_be_switched_off_has_a_test() {
    // The eight tests above; a new `Broken` variant needs its own.
    assert_eq!(Broken::ALL.len(), 8);
}
