//! A count of the lookup work one thread's reviews did: every candidate a lookup looks at
//! (a name's occurrences, a name's assignments, the calls in a handler or after a query, the
//! writes after an acquire, the handlers open around a call, a lock site's rules). It exists so
//! a test can check that the work grows in proportion to a file's size: a lookup that scans the
//! whole file again for each lock operation shows as work growing with the square.

use std::cell::Cell;

thread_local! {
    static WORK: Cell<u64> = const { Cell::new(0) };
}

/// Counts `n` candidates looked at.
pub(crate) fn add(n: usize) {
    WORK.with(|w| w.set(w.get().saturating_add(n as u64)));
}

/// The work counted on this thread so far.
#[cfg(test)]
pub(crate) fn done() -> u64 {
    WORK.with(Cell::get)
}
