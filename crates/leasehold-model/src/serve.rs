//! What the store and the resource do with a request: the store's grant (with the library's
//! fence rule), owner-checked renew and release; the resource's claim and effect rules (the
//! library's). The ghost record notes what the properties need at the instant it happens.

use leasehold::rules;

use crate::canon::BASE;
use crate::state::{Ans, Grant, Req, State};
use crate::{Broken, Protocol};

/// The one lock key (the resource is guarded by it).
const KEY: u8 = 0;

impl Protocol {
    /// The fence a grant issues, in the store frame (the clock reads 0 there): the library's
    /// `max(counter + 1, clock)`, or the plain counter when that rule is switched off.
    pub(crate) fn fence(&self, counter: i16) -> i16 {
        match self.config.broken {
            Broken::PlainCounter => counter + 1,
            _ => {
                let abs = |v: i16| (BASE + i64::from(v)) as u64;
                (rules::next_fence(abs(counter), abs(0)) as i64 - BASE) as i16
            }
        }
    }

    /// Whether the store can serve `req` now: a grant waits for the next tick if one was made
    /// this tick (at most one grant per µs of the store's clock).
    pub(crate) fn servable(s: &State, req: Req) -> bool {
        !(matches!(req, Req::Acquire { .. }) && s.live_grant().is_none() && s.granted_now)
    }

    /// The store serves `req` at once and answers.
    pub(crate) fn serve(&self, s: &mut State, req: Req) -> Ans {
        let ttl = i8::try_from(self.config.ttl).unwrap_or(i8::MAX);
        match req {
            Req::Acquire { owner } => {
                if s.live_grant().is_some() {
                    Ans::Busy
                } else {
                    let fence = self.fence(s.store.counter);
                    let g = &mut s.ghost;
                    if g.issued && fence <= g.max_fence {
                        g.fence_back = true;
                    }
                    g.issued = true;
                    let seq = g.grants;
                    g.grants += 1;
                    g.max_fence = g.max_fence.max(fence);
                    g.latest = Some(owner);
                    g.last_grant_clock = 0;
                    s.granted_now = true;
                    s.store.counter = fence;
                    s.store.grant = Some(Grant { owner, fence, expires: ttl, seq });
                    Ans::Granted(fence, seq)
                }
            }
            Req::Renew { owner } => match s.live_grant() {
                Some(g) if g.owner == owner => {
                    s.store.grant = Some(Grant { expires: ttl, ..g });
                    Ans::Renewed
                }
                _ => Ans::Done,
            },
            Req::Release { owner } => {
                let ours = s.store.grant.is_some_and(|g| g.owner == owner);
                if ours || self.config.broken == Broken::ReleaseWithoutOwner {
                    s.store.grant = None;
                }
                Ans::Done
            }
        }
    }

    /// Whether `owner` holds the latest grant and the store still has it live.
    fn current(s: &State, owner: u8) -> bool {
        s.ghost.latest == Some(owner) && s.live_grant().is_some_and(|g| g.owner == owner)
    }

    /// The resource handles client `i`'s claim or effect with the library's rules; whether a
    /// claim was installed.
    pub(crate) fn apply(s: &mut State, i: usize) -> bool {
        let Some(m) = s.clients[i].to_res.take() else { return false };
        let abs = |v: i16| (BASE + i64::from(v)) as u64;
        let installed = s.installed.map(|(o, f)| (o, abs(f)));
        let installed = installed.as_ref().map(|(o, f)| (&KEY, *f, o));
        let presented = (&KEY, abs(m.fence), &m.owner);
        let superseded = s.ghost.latest != Some(m.owner);
        s.ghost.stale_tried |= superseded;
        let ok = if m.claim {
            rules::may_claim(installed, presented)
        } else {
            rules::may_apply(installed, presented)
        };
        if ok && m.claim {
            s.installed = Some((m.owner, m.fence));
        }
        if ok && !m.claim {
            s.ghost.older_accepted |= s.ghost.newest_seen.is_some_and(|n| n > m.seq);
            s.ghost.stale_accepted |= superseded;
        }
        if !ok && Self::current(s, m.owner) {
            s.ghost.locked_out = true;
        }
        s.ghost.newest_seen = Some(s.ghost.newest_seen.map_or(m.seq, |n| n.max(m.seq)));
        ok
    }
}
