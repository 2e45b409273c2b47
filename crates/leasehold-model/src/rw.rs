//! The reader-writer lock (`docs/design.md` §8) as a stateright model of its own: shared
//! (reader) and exclusive (writer) grants of one key at one store, each fenced by the library's
//! `next_fence` from the key's one counter, a waiting writer's intent that holds new readers
//! back, and a fenced resource that writers claim and write to through the library's
//! `may_claim` / `may_apply`. The mutex's client rules, failover and lost messages are the
//! mutex model's (`lib.rs`); see `docs/model.md`.

use leasehold::rules::{may_apply, may_claim, next_fence};
use stateright::{Model, Property};

/// A rule of the reader-writer grant switched off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RwBroken {
    /// Nothing: the library's rules.
    Nothing,
    /// A reader is granted beside a live writer (and past a writer's intent).
    ReaderIgnoresWriter,
    /// A writer is granted beside live readers.
    WriterIgnoresReaders,
    /// Readers take fence 0 and leave the counter alone (`Primitives::shared_fence` false).
    ReaderFenceZero,
    /// Readers take `next_fence` but do not store it in the key's counter.
    ReaderNoBump,
}

impl RwBroken {
    /// Every rule that can be switched off, in the order `docs/model.md` shows them.
    pub const ALL: [RwBroken; 4] = [
        RwBroken::ReaderIgnoresWriter,
        RwBroken::WriterIgnoresReaders,
        RwBroken::ReaderFenceZero,
        RwBroken::ReaderNoBump,
    ];
}

/// The bounds of the reader-writer model.
#[derive(Debug, Clone)]
pub struct RwConfig {
    /// Clients.
    pub clients: u8,
    /// Acquire calls per client, each a new owner, as reader or writer (the client chooses).
    pub acquisitions: u8,
    /// Ticks of time explored.
    pub horizon: u8,
    /// The lease's ttl, in ticks.
    pub ttl: u8,
    /// A waiting writer's intent holds new readers back.
    pub writer_preference: bool,
    /// The rule switched off.
    pub broken: RwBroken,
}

impl RwConfig {
    /// The bounds CI checks: 2 clients of 2 acquires, ttl 2, 5 ticks, writer preference.
    pub fn bounded() -> RwConfig {
        RwConfig {
            clients: 2,
            acquisitions: 2,
            horizon: 5,
            ttl: 2,
            writer_preference: true,
            broken: RwBroken::Nothing,
        }
    }

    /// The same bounds with `broken` switched off.
    pub fn with(mut self, broken: RwBroken) -> RwConfig {
        self.broken = broken;
        self
    }
}

/// The model: an [`RwConfig`] that stateright explores.
#[derive(Debug, Clone)]
pub struct RwLock {
    /// Its bounds.
    pub config: RwConfig,
}

/// One grant at the store: its owner, fence, expiry (a tick) and grant number (ghost).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Grant {
    pub(crate) owner: u8,
    pub(crate) fence: u64,
    pub(crate) expires: u8,
    pub(crate) seq: u8,
}

/// What a client is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RwPhase {
    /// Between acquires.
    Idle,
    /// Refused once, retrying as a waiter (a writer's retry records its intent).
    Waiting {
        /// Its owner token.
        owner: u8,
        /// Writer (`true`) or reader.
        writer: bool,
    },
    /// Holds a grant, as far as it knows (it may have expired: a paused holder).
    Holding {
        /// Its grant as the store issued it.
        grant: Grant,
        /// Writer (`true`) or reader.
        writer: bool,
        /// A writer has sent its claim.
        claimed: bool,
        /// A writer has sent its effect.
        wrote: bool,
    },
}

/// A writer's claim or effect on its way to the resource (it may wait there any time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Msg {
    pub(crate) grant: Grant,
    pub(crate) claim: bool,
}

/// One client.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RwClient {
    pub(crate) phase: RwPhase,
    pub(crate) left: u8,
    pub(crate) to_res: Option<Msg>,
}

/// Facts about the run the properties read (not part of the protocol).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct RwGhost {
    pub(crate) grants: u8,
    pub(crate) max_fence: u64,
    pub(crate) fence_back: bool,
    pub(crate) writer_low: bool,
    pub(crate) newest_at_res: u8,
    pub(crate) stale_tried: bool,
    pub(crate) stale_accepted: bool,
    pub(crate) reader_held_back: bool,
}

/// A state of the reader-writer model.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RwState {
    pub(crate) now: u8,
    pub(crate) counter: u64,
    pub(crate) readers: Vec<Grant>,
    pub(crate) writer: Option<Grant>,
    pub(crate) intent: Option<(u8, u8)>,
    pub(crate) clients: Vec<RwClient>,
    pub(crate) installed: Option<(u8, u64)>,
    pub(crate) ghost: RwGhost,
}

/// A step of the reader-writer model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RwAction {
    /// Time passes; grants and intents whose expiry it reaches stop being live.
    Tick,
    /// Client `.0` asks once, as a writer if `.1`.
    Acquire(u8, bool),
    /// A waiting client asks again.
    Retry(u8),
    /// A waiting client gives up (its intent removed, owner-checked).
    GiveUp(u8),
    /// An owner-checked renewal (a not-owner answer: the client drops the grant).
    Renew(u8),
    /// An owner-checked release.
    Release(u8),
    /// A writer sends its claim.
    Claim(u8),
    /// A writer sends its effect.
    Effect(u8),
    /// The resource gets the client's message.
    Deliver(u8),
}

/// Property names.
pub mod property {
    /// No exclusive grant overlaps another live grant.
    pub const EXCLUSIVE_ALONE: &str = "no exclusive grant overlaps another live grant at the store";
    /// Every writer's fence exceeds every earlier grant's.
    pub const WRITER_ABOVE: &str =
        "a writer's fence exceeds every earlier grant's fence (readers included)";
    /// Every grant's fence exceeds every earlier grant's.
    pub const FENCES_GROW: &str =
        "every grant's fence, reader or writer, exceeds every earlier grant's";
    /// The mutex's fenced safety, for writers' effects.
    pub const NO_STALE_EFFECT: &str =
        "no writer's effect is accepted once a newer writer reached the resource";
    /// Readers overlap.
    pub const READERS_SHARE: &str = "sometimes two readers hold at once";
    /// The intent works.
    pub const INTENT_HOLDS_BACK: &str =
        "sometimes a waiting writer's intent holds a new reader back";
    /// The dangerous state is reached.
    pub const STALE_TRIES: &str = "sometimes a superseded writer's message reaches the resource";
}

use property::*;

impl RwLock {
    /// A model with these bounds.
    pub fn new(config: RwConfig) -> RwLock {
        RwLock { config }
    }

    /// The store's atomic granting step; `waiting` says whether a refused writer records its
    /// intent (a retry while waiting, not a one-shot attempt).
    fn attempt(&self, s: &mut RwState, i: usize, owner: u8, writer: bool, waiting: bool) {
        let b = self.config.broken;
        let clock = 100 + u64::from(s.now);
        let granted = if writer {
            s.writer.is_none() && (s.readers.is_empty() || b == RwBroken::WriterIgnoresReaders)
        } else {
            let intent = self.config.writer_preference && s.intent.is_some_and(|(o, _)| o != owner);
            if intent && s.writer.is_none() {
                s.ghost.reader_held_back = true;
            }
            (s.writer.is_none() && !intent) || b == RwBroken::ReaderIgnoresWriter
        };
        if !granted {
            if writer && waiting && self.config.writer_preference && !s.readers.is_empty() {
                let until = s.readers.iter().map(|g| g.expires).max().unwrap_or(s.now);
                s.intent = Some((owner, until + self.config.ttl));
            }
            s.clients[i].phase = RwPhase::Waiting { owner, writer };
            return;
        }
        let fence = match (writer, b) {
            (false, RwBroken::ReaderFenceZero) => 0,
            (false, RwBroken::ReaderNoBump) => next_fence(s.counter, clock),
            _ => {
                s.counter = next_fence(s.counter, clock);
                s.counter
            }
        };
        if s.ghost.grants > 0 && fence <= s.ghost.max_fence {
            s.ghost.fence_back = true;
            if writer {
                s.ghost.writer_low = true;
            }
        }
        s.ghost.max_fence = s.ghost.max_fence.max(fence);
        s.ghost.grants += 1;
        let grant = Grant { owner, fence, expires: s.now + self.config.ttl, seq: s.ghost.grants };
        if writer {
            s.writer = Some(grant);
            // As sqlite: the granting step removes the writer's own intent.
            s.intent = s.intent.filter(|(o, _)| *o != owner);
        } else {
            s.readers.push(grant);
            s.readers.sort();
        }
        s.clients[i].phase = RwPhase::Holding { grant, writer, claimed: false, wrote: false };
    }

    fn deliver(s: &mut RwState, i: usize) {
        let Some(m) = s.clients[i].to_res.take() else { return };
        let g = m.grant;
        if g.seq < s.ghost.newest_at_res {
            s.ghost.stale_tried = true;
        }
        let installed = s.installed.as_ref().map(|(o, f)| (&(), *f, o));
        if m.claim {
            if may_claim(installed, (&(), g.fence, &g.owner)) {
                s.installed = Some((g.owner, g.fence));
            }
        } else if may_apply(installed, (&(), g.fence, &g.owner)) && g.seq < s.ghost.newest_at_res {
            s.ghost.stale_accepted = true;
        }
        s.ghost.newest_at_res = s.ghost.newest_at_res.max(g.seq);
    }
}

impl Model for RwLock {
    type State = RwState;
    type Action = RwAction;

    fn init_states(&self) -> Vec<RwState> {
        let c = RwClient { phase: RwPhase::Idle, left: self.config.acquisitions, to_res: None };
        vec![RwState {
            now: 0,
            counter: 0,
            readers: Vec::new(),
            writer: None,
            intent: None,
            clients: vec![c; usize::from(self.config.clients)],
            installed: None,
            ghost: RwGhost::default(),
        }]
    }

    fn actions(&self, s: &RwState, out: &mut Vec<RwAction>) {
        if s.now < self.config.horizon {
            out.push(RwAction::Tick);
        }
        for (i, c) in s.clients.iter().enumerate() {
            let i = i as u8;
            if c.to_res.is_some() {
                out.push(RwAction::Deliver(i));
            }
            match c.phase {
                RwPhase::Idle if c.left > 0 => {
                    out.extend([RwAction::Acquire(i, false), RwAction::Acquire(i, true)])
                }
                RwPhase::Idle => {}
                RwPhase::Waiting { .. } => out.extend([RwAction::Retry(i), RwAction::GiveUp(i)]),
                RwPhase::Holding { writer, claimed, wrote, .. } => {
                    out.extend([RwAction::Renew(i), RwAction::Release(i)]);
                    if writer && c.to_res.is_none() && !claimed {
                        out.push(RwAction::Claim(i));
                    } else if writer && c.to_res.is_none() && !wrote {
                        out.push(RwAction::Effect(i));
                    }
                }
            }
        }
    }

    fn next_state(&self, last: &RwState, a: RwAction) -> Option<RwState> {
        let mut s = last.clone();
        match a {
            RwAction::Tick => {
                s.now += 1;
                let now = s.now;
                s.readers.retain(|g| g.expires > now);
                s.writer = s.writer.filter(|g| g.expires > now);
                s.intent = s.intent.filter(|(_, e)| *e > now);
            }
            RwAction::Acquire(i, writer) => {
                let c = &mut s.clients[usize::from(i)];
                c.left -= 1;
                let owner = i * 8 + c.left;
                self.attempt(&mut s, usize::from(i), owner, writer, false);
            }
            RwAction::Retry(i) => {
                if let RwPhase::Waiting { owner, writer } = s.clients[usize::from(i)].phase {
                    self.attempt(&mut s, usize::from(i), owner, writer, true);
                }
            }
            RwAction::GiveUp(i) => {
                if let RwPhase::Waiting { owner, .. } = s.clients[usize::from(i)].phase {
                    s.intent = s.intent.filter(|(o, _)| *o != owner);
                }
                s.clients[usize::from(i)].phase = RwPhase::Idle;
            }
            RwAction::Renew(i) | RwAction::Release(i) => {
                let RwPhase::Holding { grant, .. } = s.clients[usize::from(i)].phase else {
                    return None;
                };
                let (now, ttl, owner) = (s.now, self.config.ttl, grant.owner);
                let mine =
                    s.writer.iter_mut().chain(s.readers.iter_mut()).find(|g| g.owner == owner);
                match (a, mine) {
                    (RwAction::Renew(_), Some(g)) => g.expires = now + ttl,
                    (RwAction::Renew(_), None) => s.clients[usize::from(i)].phase = RwPhase::Idle,
                    _ => {
                        s.writer = s.writer.filter(|g| g.owner != owner);
                        s.readers.retain(|g| g.owner != owner);
                        s.intent = s.intent.filter(|(o, _)| *o != owner);
                        s.clients[usize::from(i)].phase = RwPhase::Idle;
                    }
                }
            }
            RwAction::Claim(i) | RwAction::Effect(i) => {
                let c = &mut s.clients[usize::from(i)];
                if let RwPhase::Holding { grant, claimed, wrote, .. } = &mut c.phase {
                    let claim = matches!(a, RwAction::Claim(_));
                    if claim {
                        *claimed = true
                    } else {
                        *wrote = true
                    }
                    c.to_res = Some(Msg { grant: *grant, claim });
                }
            }
            RwAction::Deliver(i) => Self::deliver(&mut s, usize::from(i)),
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut p = vec![
            Property::<Self>::always(EXCLUSIVE_ALONE, |_, s| {
                s.writer.is_none() || s.readers.is_empty()
            }),
            Property::<Self>::always(WRITER_ABOVE, |_, s| !s.ghost.writer_low),
            Property::<Self>::always(FENCES_GROW, |_, s| !s.ghost.fence_back),
            Property::<Self>::always(NO_STALE_EFFECT, |_, s| !s.ghost.stale_accepted),
            Property::<Self>::sometimes(READERS_SHARE, |_, s| s.readers.len() >= 2),
            Property::<Self>::sometimes(STALE_TRIES, |_, s| s.ghost.stale_tried),
        ];
        if self.config.writer_preference {
            p.push(Property::<Self>::sometimes(INTENT_HOLDS_BACK, |_, s| s.ghost.reader_held_back));
        }
        p
    }
}

impl Msg {
    /// Whether this is a claim (else an effect).
    pub(crate) fn is_claim(&self) -> bool {
        self.claim
    }
}

impl RwState {
    /// Real time, in ticks.
    pub(crate) fn now(&self) -> u8 {
        self.now
    }

    /// The resource's installed claim (owner, fence).
    pub(crate) fn installed(&self) -> Option<(u8, u64)> {
        self.installed
    }

    /// The store's live grants, intent and counter, in words.
    pub(crate) fn summary(&self) -> String {
        let g = |g: &Grant| format!("owner {} fence {} until t={}", g.owner, g.fence, g.expires);
        let mut parts: Vec<String> =
            self.writer.iter().map(|w| format!("writer {}", g(w))).collect();
        parts.extend(self.readers.iter().map(|r| format!("reader {}", g(r))));
        if let Some((o, e)) = self.intent {
            parts.push(format!("intent of owner {o} until t={e}"));
        }
        let grants = if parts.is_empty() { "no grant".into() } else { parts.join(", ") };
        format!("{grants}; counter {}", self.counter)
    }
}
