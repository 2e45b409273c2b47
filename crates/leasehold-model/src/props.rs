//! The properties the checker proves or refutes (`docs/model.md` says each in words).

use stateright::{Model, Property};

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
