//! Which error handlers protect each call, for the calls in file order.

use super::ir::Handler;

/// The handlers whose protected bytes hold a call, found in one sweep over the calls in file
/// order (asking every handler for every call made Go files, where each `if err != nil` is a
/// handler, cost calls × handlers).
pub(super) struct Protecting {
    /// Handler indexes by where their protected bytes start.
    by_start: Vec<usize>,
    next: usize,
    /// The handlers begun at or before the last call's start and not ended before it.
    open: Vec<usize>,
    last_at: usize,
}

impl Protecting {
    pub(super) fn new(handlers: &[Handler]) -> Protecting {
        let mut by_start: Vec<usize> = (0..handlers.len()).collect();
        by_start.sort_by_key(|i| handlers[*i].protects.0);
        Protecting { by_start, next: 0, open: Vec::new(), last_at: 0 }
    }

    /// The handlers protecting bytes `at..end`, innermost (last found) first. Calls come with
    /// ascending `at` (pre-order); should one not, the sweep starts again from the top.
    pub(super) fn at(&mut self, handlers: &[Handler], at: usize, end: usize) -> Vec<usize> {
        if at < self.last_at {
            self.next = 0;
            self.open.clear();
        }
        self.last_at = at;
        while let Some(&i) = self.by_start.get(self.next) {
            if handlers[i].protects.0 > at {
                break;
            }
            self.open.push(i);
            self.next += 1;
        }
        // One ended before `at` holds no later call either.
        self.open.retain(|i| handlers[*i].protects.1 >= at);
        super::work::add(self.open.len());
        let mut out: Vec<usize> =
            self.open.iter().copied().filter(|i| end <= handlers[*i].protects.1).collect();
        out.sort_unstable_by(|a, b| b.cmp(a));
        out
    }
}
