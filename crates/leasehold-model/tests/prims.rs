//! The reader-writer and semaphore models checked in CI: every property holds (exhaustively
//! within the tick horizon), every `sometimes` is reached, and each rule switched off makes
//! the checker find the violation named, whose shortest trace (BFS) the test prints.

use std::time::Instant;

use leasehold_model::prims_trace::{render_rw, render_sem};
use leasehold_model::props::shortest_in;
use leasehold_model::rw::{RwBroken, RwConfig, RwLock, property as rwp};
use leasehold_model::sem::{SemBroken, SemConfig, Semaphore, property as semp};
use stateright::{Checker, Model};

/// Checks `model` exhaustively: no `always` property is violated, every `sometimes` reached.
fn holds<M>(name: &str, model: M)
where
    M: Model + Clone + Send + Sync + 'static,
    M::State: std::hash::Hash + Send + Sync + std::fmt::Debug + Clone + PartialEq,
    M::Action: std::fmt::Debug + Clone + PartialEq,
{
    let props: Vec<_> = model
        .properties()
        .into_iter()
        .map(|p| (p.name, p.expectation.discovery_is_failure()))
        .collect();
    let started = Instant::now();
    let checker = model.checker().threads(2).spawn_bfs().join();
    println!(
        "{name}: {} states generated, {} unique, max depth {}, {:.1} s",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed().as_secs_f64()
    );
    for (p, failure) in props {
        let found = checker.discovery(p);
        if failure {
            assert!(
                found.is_none(),
                "{name}: {p} is violated: {:?}",
                found.map(|f| f.into_actions())
            );
        } else {
            assert!(found.is_some(), "{name}: the model never reaches: {p}");
        }
    }
}

#[test]
fn reader_writer_grants_hold() {
    holds("rw", RwLock::new(RwConfig::bounded()));
}

#[test]
fn reader_writer_grants_hold_without_writer_preference() {
    holds("rw-no-pref", RwLock::new(RwConfig { writer_preference: false, ..RwConfig::bounded() }));
}

#[test]
fn semaphore_slots_hold() {
    holds("sem", Semaphore::new(SemConfig::bounded()));
}

/// Asserts that with `broken` the reader-writer checker finds a violation of each of
/// `expected` and none of `kept`, printing a shortest trace of each violation.
fn rw_caught(broken: RwBroken, expected: &[&'static str], kept: &[&'static str]) {
    let model = RwLock::new(RwConfig::bounded().with(broken));
    for p in expected {
        let path = shortest_in(&model, p, 16)
            .unwrap_or_else(|| panic!("{broken:?}: the checker found no violation of {p:?}"));
        let steps = path.clone().into_actions().len();
        println!("{broken:?} violates {p:?} ({steps} steps):\n{}", render_rw(&path));
    }
    let checker = model.checker().threads(2).spawn_bfs().join();
    for p in kept {
        assert!(checker.discovery(p).is_none(), "{broken:?}: {p:?} is violated too");
    }
}

#[test]
fn a_reader_beside_a_live_writer_overlaps_it() {
    rw_caught(RwBroken::ReaderIgnoresWriter, &[rwp::EXCLUSIVE_ALONE], &[rwp::FENCES_GROW]);
}

#[test]
fn a_writer_beside_live_readers_overlaps_them() {
    rw_caught(RwBroken::WriterIgnoresReaders, &[rwp::EXCLUSIVE_ALONE], &[rwp::FENCES_GROW]);
}

/// Fence 0 for readers: a writer's fence still exceeds every reader's (0), but a reader's
/// fence falls below the writers' before it.
#[test]
fn readers_with_fence_zero_send_fences_back() {
    rw_caught(
        RwBroken::ReaderFenceZero,
        &[rwp::FENCES_GROW],
        &[rwp::WRITER_ABOVE, rwp::EXCLUSIVE_ALONE, rwp::NO_STALE_EFFECT],
    );
}

/// A reader that does not bump the counter: the next writer in the same µs gets its fence.
#[test]
fn readers_that_do_not_bump_the_counter_let_a_writer_repeat_their_fence() {
    rw_caught(
        RwBroken::ReaderNoBump,
        &[rwp::WRITER_ABOVE, rwp::FENCES_GROW],
        &[rwp::EXCLUSIVE_ALONE, rwp::NO_STALE_EFFECT],
    );
}

#[test]
fn a_slot_granted_without_checking_it_is_free_admits_too_many() {
    let model = Semaphore::new(SemConfig::bounded().with(SemBroken::SlotNotChecked));
    for p in [semp::ONE_PER_SLOT, semp::AT_MOST_N] {
        let path = shortest_in(&model, p, 12)
            .unwrap_or_else(|| panic!("SlotNotChecked: the checker found no violation of {p:?}"));
        let steps = path.clone().into_actions().len();
        println!("SlotNotChecked violates {p:?} ({steps} steps):\n{}", render_sem(&path));
    }
    let checker = model.checker().threads(2).spawn_bfs().join();
    assert!(checker.discovery(semp::SLOT_FENCES_GROW).is_none(), "per-slot fences went back");
}

#[test]
fn every_primitive_rule_that_can_be_switched_off_has_a_test() {
    // The four reader-writer tests above, and the semaphore's one.
    assert_eq!(RwBroken::ALL.len(), 4);
}
