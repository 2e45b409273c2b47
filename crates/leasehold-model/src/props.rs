//! The properties the checker proves or refutes (`docs/model.md` says each in words).

use stateright::{Checker, HasDiscoveries, Model, Path, Property};

use crate::state::{Action, State};

use crate::property::*;
use crate::{Config, Protocol};

/// The properties of a model with these bounds: the safety ones always; the `sometimes` ones
/// in a safety run (they show the dangerous states are reached); the liveness one only in a
/// liveness run, whose fairness (no pauses of the waiter, no faults) it needs.
pub(crate) fn properties(config: &Config) -> Vec<Property<Protocol>> {
    let mut p = vec![
        Property::<Protocol>::always(NO_STALE_EFFECT, |_, s| !s.ghost.older_accepted),
        Property::<Protocol>::always(ACTS_WHILE_GRANTED, |_, s| !s.ghost.acted_superseded),
        Property::<Protocol>::always(NO_LOCKOUT, |_, s| !s.ghost.locked_out),
        Property::<Protocol>::always(FENCES_GROW, |_, s| !s.ghost.fence_back),
        Property::<Protocol>::always(ANSWERED_ONLY, |_, s| !s.ghost.acted_unanswered),
    ];
    if config.liveness.is_some() {
        p.push(Property::<Protocol>::eventually(WAITER_HOLDS, |_, s| s.ghost.waiter_held));
    } else {
        p.push(Property::<Protocol>::sometimes(STALE_TRIES, |_, s| s.ghost.stale_tried));
        p.push(Property::<Protocol>::sometimes(STALE_IN_WINDOW, |_, s| s.ghost.stale_accepted));
    }
    p
}

/// The names of the `always` and `eventually` properties of a model with these bounds: the
/// ones a discovery of which is a failure.
pub fn failures(model: &Protocol) -> Vec<&'static str> {
    model
        .properties()
        .into_iter()
        .filter(|p| p.expectation.discovery_is_failure())
        .map(|p| p.name)
        .collect()
}

/// A shortest path to a state that violates (or, for a `sometimes` property, satisfies) the
/// property `name`, with at most `max_steps` steps: breadth-first with a depth limit raised
/// one step at a time (stateright's BFS hands work out in batches, so on its own it is only
/// roughly level by level).
pub fn shortest(
    model: &Protocol,
    name: &'static str,
    max_steps: usize,
) -> Option<Path<State, Action>> {
    shortest_in(model, name, max_steps)
}

/// [`shortest`] for any model (the reader-writer and semaphore models too).
pub fn shortest_in<M>(
    model: &M,
    name: &'static str,
    max_steps: usize,
) -> Option<Path<M::State, M::Action>>
where
    M: Model + Clone + Send + Sync + 'static,
    M::State: std::hash::Hash + Send + Sync + std::fmt::Debug + Clone + PartialEq,
    M::Action: std::fmt::Debug + Clone + PartialEq,
{
    (1..=max_steps + 1).find_map(|depth| {
        let until = HasDiscoveries::AnyOf([name].into_iter().collect());
        let checker = model
            .clone()
            .checker()
            .threads(1)
            .target_max_depth(depth + 1)
            .finish_when(until)
            .spawn_bfs()
            .join();
        checker.discovery(name)
    })
}
