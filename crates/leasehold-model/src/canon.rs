//! Keeping states time-shift free: when the store's clock moves (a tick, a failover's skew),
//! every value in the store frame moves with it; old fences are then renumbered, keeping
//! their order, so that how long ago a grant was made stops mattering once no rule can tell.
//!
//! Why this loses nothing: the rules compare fences only with each other (claim, apply,
//! "fences grow") and with the clock only through `max(counter + 1, clock)` at a grant, where
//! the new server's clock is at most `max_skew` ticks behind. A fence more than
//! `max_skew + 1` ticks below the clock can never exceed it again, so only its order among
//! the fences matters. With [`Broken::PlainCounter`] fences do not depend on the clock at all
//! and stay as issued (small numbers, one per grant).

use crate::state::{Data, Phase, State};
use crate::{Broken, Protocol};

/// Fence values and clocks are shifted by this before the library sees them, so that they
/// are positive (the rules are the same for every shift).
pub(crate) const BASE: i64 = 1 << 20;

impl Protocol {
    /// How far below the clock a fence keeps its exact value.
    fn window(&self) -> i16 {
        i16::from(self.config.max_skew.max(self.config.clock_back)) + 1
    }

    /// The fences move with the clock unless they are plain counters.
    fn clocked_fences(&self) -> bool {
        self.config.broken != Broken::PlainCounter
    }

    /// The serving store's clock moved by `-d` (a tick: `d = -1`; a failover to a server
    /// `skew` behind: `d = skew`): every store-frame value moves by `d`.
    pub(crate) fn shift_store(&self, s: &mut State, d: i8) {
        let fences = self.clocked_fences();
        let df = i16::from(d);
        let mv = |data: &mut Data| {
            if let Some(g) = &mut data.grant {
                g.expires = g.expires.saturating_add(d);
                if fences {
                    g.fence += df;
                }
            }
            if fences {
                data.counter += df;
            }
        };
        mv(&mut s.store);
        mv(&mut s.replica);
        s.ghost.last_grant_clock = s.ghost.last_grant_clock.saturating_add(d);
        if fences {
            s.ghost.max_fence += df;
            if let Some((_, f)) = &mut s.installed {
                *f += df;
            }
            for c in &mut s.clients {
                if let Phase::Holding(h) = &mut c.phase {
                    h.fence += df;
                }
                if let Some(m) = &mut c.to_res {
                    m.fence += df;
                }
            }
        }
    }

    /// Drops what can no longer matter in the store frame: expired grants (the serving
    /// server's clock never goes back; the replica's is dead once no skew can revive it), the
    /// exact age of the last grant beyond any skew, and the exact values of old fences.
    pub(crate) fn canon_store(&self, s: &mut State) {
        let skew = i8::try_from(self.config.max_skew).unwrap_or(i8::MAX);
        if s.store.grant.is_some_and(|g| g.expires <= 0) {
            s.store.grant = None;
        }
        if s.replica.grant.is_some_and(|g| g.expires <= -skew) {
            s.replica.grant = None;
        }
        // The last grant's age matters up to the largest skew, and up to the horizon plus a
        // step back where the store forgets.
        let forget =
            i8::try_from(self.config.forget_after + self.config.clock_back).unwrap_or(i8::MAX);
        s.ghost.last_grant_clock = s.ghost.last_grant_clock.max((-skew - 1).min(-forget));
        if self.clocked_fences() {
            self.compress_fences(s);
        }
        Self::compress_seqs(s);
    }

    /// Renumbers the grant numbers still referenced (and the next one) to 0, 1, …, in their
    /// order: the properties only compare them.
    fn compress_seqs(s: &mut State) {
        let mut seen = [false; 64];
        let next = usize::from(s.ghost.grants);
        if next >= seen.len() {
            return;
        }
        Self::visit_seqs(s, &mut |q| seen[usize::from(*q).min(63)] = true);
        seen[next] = true;
        let mut rank = [0u8; 64];
        let mut n = 0;
        for (v, used) in seen.iter().enumerate() {
            rank[v] = n;
            n += u8::from(*used);
        }
        Self::visit_seqs(s, &mut |q| *q = rank[usize::from(*q).min(63)]);
        s.ghost.grants = rank[next];
    }

    fn visit_seqs(s: &mut State, f: &mut dyn FnMut(&mut u8)) {
        for data in [&mut s.store, &mut s.replica] {
            if let Some(g) = &mut data.grant {
                f(&mut g.seq);
            }
        }
        if let Some(n) = &mut s.ghost.newest_seen {
            f(n);
        }
        if let Some(n) = &mut s.ghost.failover_at {
            f(n);
        }
        for c in &mut s.clients {
            if let Phase::Holding(h) = &mut c.phase {
                f(&mut h.seq);
            }
            if let Some(m) = &mut c.to_res {
                f(&mut m.seq);
            }
        }
    }

    /// Renumbers the fences more than the window below the clock to consecutive values below
    /// it, in their order.
    fn compress_fences(&self, s: &mut State) {
        let w = self.window();
        let mut old: Vec<i16> = Vec::with_capacity(12);
        self.visit_fences(s, &mut |f| {
            if *f < -w {
                old.push(*f);
            }
        });
        if old.is_empty() {
            return;
        }
        old.sort_unstable();
        old.dedup();
        let n = old.len() as i16;
        self.visit_fences(s, &mut |f| {
            if let Ok(rank) = old.binary_search(f) {
                *f = -w - n + rank as i16;
            }
        });
    }

    fn visit_fences(&self, s: &mut State, f: &mut dyn FnMut(&mut i16)) {
        for data in [&mut s.store, &mut s.replica] {
            f(&mut data.counter);
            if let Some(g) = &mut data.grant {
                f(&mut g.fence);
            }
        }
        f(&mut s.ghost.max_fence);
        if let Some((_, fence)) = &mut s.installed {
            f(fence);
        }
        for c in &mut s.clients {
            if let Phase::Holding(h) = &mut c.phase {
                f(&mut h.fence);
            }
            if let Some(m) = &mut c.to_res {
                f(&mut m.fence);
            }
        }
    }
}
