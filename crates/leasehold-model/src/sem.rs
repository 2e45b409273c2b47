//! The semaphore (`docs/design.md` §8) as a stateright model of its own: N slots `KEY#0 …
//! KEY#(N-1)`, each an ordinary lease with its own counter and the library's `next_fence`, and
//! clients that take any free slot (the library tries each from a varying first slot: here
//! every choice is explored), hold it until they release it or it expires, and take another.
//! The slot's client rules and failover are the mutex's (`lib.rs`); see `docs/model.md`.

use leasehold::rules::next_fence;
use stateright::{Model, Property};

/// A rule of the semaphore switched off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SemBroken {
    /// Nothing: the library's rules.
    Nothing,
    /// A slot's grant does not check that the slot is free (it overwrites the slot's record).
    SlotNotChecked,
}

/// The bounds of the semaphore model.
#[derive(Debug, Clone)]
pub struct SemConfig {
    /// Clients (more than `permits`, or "at most N holders" could not fail).
    pub clients: u8,
    /// N, the number of slots.
    pub permits: u8,
    /// Acquire calls per client.
    pub acquisitions: u8,
    /// Ticks of time explored.
    pub horizon: u8,
    /// The lease's ttl, in ticks.
    pub ttl: u8,
    /// The rule switched off.
    pub broken: SemBroken,
}

impl SemConfig {
    /// The bounds CI checks: 3 clients of 2 acquires on N = 2 slots, ttl 2, 4 ticks.
    pub fn bounded() -> SemConfig {
        SemConfig {
            clients: 3,
            permits: 2,
            acquisitions: 2,
            horizon: 4,
            ttl: 2,
            broken: SemBroken::Nothing,
        }
    }

    /// The same bounds with `broken` switched off.
    pub fn with(mut self, broken: SemBroken) -> SemConfig {
        self.broken = broken;
        self
    }
}

/// The model: a [`SemConfig`] that stateright explores.
#[derive(Debug, Clone)]
pub struct Semaphore {
    /// Its bounds.
    pub config: SemConfig,
}

/// What a client holds: a slot's grant as the store issued it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Held {
    pub(crate) slot: u8,
    pub(crate) owner: u8,
    pub(crate) fence: u64,
    pub(crate) expires: u8,
}

/// One client: its grant, if it holds one, and its acquires left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SemClient {
    pub(crate) held: Option<Held>,
    pub(crate) left: u8,
}

/// A slot at the store: its live grant (owner, expiry) and its counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Slot {
    pub(crate) grant: Option<(u8, u8)>,
    pub(crate) counter: u64,
}

/// A state of the semaphore model.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SemState {
    pub(crate) now: u8,
    pub(crate) slots: Vec<Slot>,
    pub(crate) clients: Vec<SemClient>,
    /// Ghost: the last fence issued per slot, and whether one did not grow.
    pub(crate) last_fence: Vec<u64>,
    pub(crate) fence_back: bool,
}

/// A step of the semaphore model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SemAction {
    /// Time passes; grants whose expiry it reaches stop being live.
    Tick,
    /// Client `.0` is granted slot `.1` (offered only where the store grants it).
    Acquire(u8, u8),
    /// An owner-checked release.
    Release(u8),
}

/// Property names.
pub mod property {
    /// At most N holders.
    pub const AT_MOST_N: &str = "at most N clients hold a live slot grant at once";
    /// One holder per slot.
    pub const ONE_PER_SLOT: &str = "no two clients hold a live grant of the same slot";
    /// Per-slot fences.
    pub const SLOT_FENCES_GROW: &str = "each slot's fences strictly grow";
    /// The semaphore shares.
    pub const TWO_HOLD: &str = "sometimes two clients hold at once (different slots)";
}

use property::*;

impl Semaphore {
    /// A model with these bounds.
    pub fn new(config: SemConfig) -> Semaphore {
        Semaphore { config }
    }
}

/// The clients whose grant the store issued them and has not expired (their local deadline
/// is the mutex's business): the ones that may act on the resource.
fn holders(s: &SemState) -> impl Iterator<Item = Held> + '_ {
    s.clients.iter().filter_map(|c| c.held).filter(|h| h.expires > s.now)
}

impl Model for Semaphore {
    type State = SemState;
    type Action = SemAction;

    fn init_states(&self) -> Vec<SemState> {
        let n = usize::from(self.config.permits);
        let c = SemClient { held: None, left: self.config.acquisitions };
        vec![SemState {
            now: 0,
            slots: vec![Slot { grant: None, counter: 0 }; n],
            clients: vec![c; usize::from(self.config.clients)],
            last_fence: vec![0; n],
            fence_back: false,
        }]
    }

    fn actions(&self, s: &SemState, out: &mut Vec<SemAction>) {
        if s.now < self.config.horizon {
            out.push(SemAction::Tick);
        }
        for (i, c) in s.clients.iter().enumerate() {
            if c.held.is_some() {
                out.push(SemAction::Release(i as u8));
            } else if c.left > 0 {
                for (k, slot) in s.slots.iter().enumerate() {
                    // The slot's granting step: free (no live grant), unless switched off.
                    if slot.grant.is_none() || self.config.broken == SemBroken::SlotNotChecked {
                        out.push(SemAction::Acquire(i as u8, k as u8));
                    }
                }
            }
        }
    }

    fn next_state(&self, last: &SemState, a: SemAction) -> Option<SemState> {
        let mut s = last.clone();
        match a {
            SemAction::Tick => {
                s.now += 1;
                let now = s.now;
                for slot in &mut s.slots {
                    slot.grant = slot.grant.filter(|(_, e)| *e > now);
                }
                // A client whose grant expired learns it (not-owner on its next renewal).
                for c in &mut s.clients {
                    c.held = c.held.filter(|h| h.expires > now);
                }
            }
            SemAction::Acquire(i, k) => {
                let (clock, expires) = (100 + u64::from(s.now), s.now + self.config.ttl);
                let c = &mut s.clients[usize::from(i)];
                c.left -= 1;
                let owner = i * 8 + c.left;
                let slot = &mut s.slots[usize::from(k)];
                slot.counter = next_fence(slot.counter, clock);
                slot.grant = Some((owner, expires));
                let fence = slot.counter;
                if fence <= s.last_fence[usize::from(k)] {
                    s.fence_back = true;
                }
                s.last_fence[usize::from(k)] = fence;
                c.held = Some(Held { slot: k, owner, fence, expires });
            }
            SemAction::Release(i) => {
                let c = &mut s.clients[usize::from(i)];
                if let Some(h) = c.held.take() {
                    let slot = &mut s.slots[usize::from(h.slot)];
                    slot.grant = slot.grant.filter(|(o, _)| *o != h.owner);
                }
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::<Self>::always(AT_MOST_N, |m, s| {
                holders(s).count() <= usize::from(m.config.permits)
            }),
            Property::<Self>::always(ONE_PER_SLOT, |_, s| {
                let mut seen = 0u32;
                holders(s).all(|h| {
                    let new = seen & (1 << h.slot) == 0;
                    seen |= 1 << h.slot;
                    new
                })
            }),
            Property::<Self>::always(SLOT_FENCES_GROW, |_, s| !s.fence_back),
            Property::<Self>::sometimes(TWO_HOLD, |_, s| holders(s).count() >= 2),
        ]
    }
}

impl SemState {
    /// Real time, in ticks.
    pub(crate) fn now(&self) -> u8 {
        self.now
    }

    /// The fence client `i` holds.
    pub(crate) fn fence_of(&self, i: u8) -> Option<u64> {
        self.clients[usize::from(i)].held.map(|h| h.fence)
    }

    /// The store's slots and the live holders, in words.
    pub(crate) fn summary(&self) -> String {
        let slots: Vec<String> = self
            .slots
            .iter()
            .enumerate()
            .map(|(k, s)| match s.grant {
                Some((o, e)) => format!("slot {k}: owner {o} until t={e} (counter {})", s.counter),
                None => format!("slot {k}: free (counter {})", s.counter),
            })
            .collect();
        let held: Vec<String> =
            holders(self).map(|h| format!("owner {} on slot {}", h.owner, h.slot)).collect();
        format!("store: {}; holders: [{}]", slots.join(", "), held.join(", "))
    }
}
