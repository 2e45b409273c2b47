//! leasehold's protocol (clients, one lease store, one fenced resource) as a stateright model
//! that applies the library's own rules (`leasehold::rules`), with the properties of
//! `docs/model.md` and the rules that can be switched off to show each one necessary.
//!
//! The mutex model (this module's [`Protocol`]) covers one key, one grant at a time, with the
//! client rules, lost messages and failover. The reader-writer grants ([`rw`]) and the
//! semaphore's slots ([`sem`]) are smaller models of their own, of what those primitives add
//! at the store: which grants may coexist, and their fences.
#![deny(missing_docs)]

mod canon;
pub mod prims_trace;
pub mod props;
pub mod rw;
pub mod sem;
mod serve;
mod state;
mod step;
mod symmetry;
pub mod trace;

use std::time::Duration;

pub use state::{Action, State};
pub use symmetry::representative;

/// A rule of the protocol switched off, to show that the checker then finds a violation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Broken {
    /// Nothing: the library's rules.
    Nothing,
    /// Fences are `counter + 1` without the clock, so a rolled-back counter repeats them.
    PlainCounter,
    /// Holders skip the claim and go straight to checked effects.
    NoClaim,
    /// A renewal that timed out extends the local deadline as if it had been confirmed.
    ExtendOnTimeout,
    /// Release deletes the grant without comparing the owner.
    ReleaseWithoutOwner,
    /// The new server's clock may be behind by more than [`leasehold::CLOCK_ASSUMPTION`]
    /// allows.
    ClockBeyondAssumption,
    /// Holders have no local deadline: only a not-owner answer tells them they lost.
    NoLocalDeadline,
    /// Client clocks run slower than the drift the deadline assumes.
    DriftBeyondBound,
    /// The store forgets a key's counter as soon as its clock has run as far as it may step
    /// back: short of `leasehold::horizon::HORIZON_ASSUMPTION`'s bound.
    ForgetTooSoon,
}

impl Broken {
    /// The bounded configuration whose behaviours include this rule's counterexample: the
    /// failover rules need a failover, the client rules lost answers or drifting clocks.
    pub fn config(self) -> Config {
        match self {
            Broken::PlainCounter | Broken::ClockBeyondAssumption => Config::fence(),
            Broken::ForgetTooSoon => Config::forget(),
            _ => Config::lock(),
        }
        .with(self)
    }

    /// Every rule that can be switched off, in the order `docs/model.md` shows them.
    pub const ALL: [Broken; 8] = [
        Broken::PlainCounter,
        Broken::NoClaim,
        Broken::ExtendOnTimeout,
        Broken::ReleaseWithoutOwner,
        Broken::ClockBeyondAssumption,
        Broken::NoLocalDeadline,
        Broken::DriftBeyondBound,
        Broken::ForgetTooSoon,
    ];
}

/// The bounds of one model: how many clients, how long, which faults.
#[derive(Debug, Clone)]
pub struct Config {
    /// Clients (2 or 3).
    pub clients: u8,
    /// Ticks of real time explored in a liveness run. A safety run has no horizon: its states
    /// keep no absolute time, so the checker explores behaviours of any length.
    pub horizon: u8,
    /// The lease's ttl, in ticks.
    pub ttl: u8,
    /// The holder's safety margin, in ticks.
    pub margin: u8,
    /// Client clocks may lose one tick in every `drift_every` ticks; the library is told the
    /// drift `1 / drift_every` (0: clocks keep time, drift 0).
    pub drift_every: u8,
    /// Acquire calls per client (each mints a new owner token).
    pub acquisitions: u8,
    /// Effects each grant may send to the resource.
    pub effects: u8,
    /// Store failovers (roll back to the replica, new server's clock).
    pub failovers: u8,
    /// How far behind the new server's clock may be at a failover, in ticks.
    pub max_skew: u8,
    /// Requests and answers may be lost.
    pub lossy: bool,
    /// Liveness run: client 0 holds and stops by `stop_at`, client 1 waits without pausing,
    /// no faults; the checker asks that client 1 eventually holds.
    pub liveness: Option<u8>,
    /// The store forgets an idle key's counter once this many ticks of its clock have passed
    /// since the key's last grant, no grant being live (0: never): the horizon.
    pub forget_after: u8,
    /// How far the store's clock may fall behind real time, in all (steps back, or standing
    /// still), in ticks.
    pub clock_back: u8,
    /// The rule switched off.
    pub broken: Broken,
}

impl Config {
    /// The client side: 2 clients of 2 acquires each, drifting clocks, lost requests and
    /// answers; no failover (a failover excuses the lock's promise, and fencing does not
    /// depend on clocks: a late local check is no different, at the resource, from an
    /// effect delayed in flight).
    pub fn lock() -> Config {
        Config {
            clients: 2,
            horizon: 0,
            ttl: 4,
            margin: 1,
            drift_every: 3,
            acquisitions: 2,
            effects: 1,
            failovers: 0,
            max_skew: 1,
            lossy: true,
            liveness: None,
            forget_after: 0,
            clock_back: 0,
            broken: Broken::Nothing,
        }
    }

    /// Bounded state (`docs/design.md` §4.6): the store forgets an idle key's counter after a
    /// horizon of 4 ticks, its clock may step back by 1 tick; 2 clients of 2 acquires, no
    /// failover, nothing lost. A step back lets the counter lead the clock by the step plus
    /// one grant, and the clock may step back again after the forgetting: twice the step
    /// plus one (3) is the documented bound, 4 holds, 1 (the step back) does not
    /// ([`Broken::ForgetTooSoon`]).
    pub fn forget() -> Config {
        Config {
            drift_every: 0,
            lossy: false,
            max_skew: 0,
            forget_after: 4,
            clock_back: 1,
            ..Config::lock()
        }
    }

    /// The store's failure: 2 clients of 2 acquires each, one failover to a replica whose
    /// clock may be 1 tick behind; clocks keep time and nothing is lost.
    pub fn fence() -> Config {
        Config { drift_every: 0, failovers: 1, lossy: false, ..Config::lock() }
    }

    /// Failover and lost messages together, one acquire per client.
    pub fn faults() -> Config {
        Config { acquisitions: 1, lossy: true, ..Config::fence() }
    }

    /// The liveness check: client 0 holds and stops by tick 6, client 1 must get the key.
    pub fn liveness() -> Config {
        Config { horizon: 14, lossy: false, liveness: Some(6), ..Config::lock() }
    }

    /// The deeper run of `scripts/model`: everything at once (drift, losses, a failover whose
    /// new clock may be 2 ticks behind).
    pub fn deep() -> Config {
        Config { drift_every: 3, lossy: true, max_skew: 2, ..Config::fence() }
    }

    /// The deeper liveness run: a longer hold before the holder stops, two effects.
    pub fn liveness_deep() -> Config {
        Config { horizon: 24, liveness: Some(12), effects: 2, ..Config::liveness() }
    }

    /// The bounded configurations CI checks, by name.
    pub fn bounded() -> [(&'static str, Config); 5] {
        [
            ("lock", Config::lock()),
            ("fence", Config::fence()),
            ("faults", Config::faults()),
            ("liveness", Config::liveness()),
            ("forget", Config::forget()),
        ]
    }

    /// The same bounds with `broken` switched off.
    pub fn with(mut self, broken: Broken) -> Config {
        self.broken = broken;
        self
    }

    /// The ttl the library is given (a tick is a second).
    pub fn ttl(&self) -> Duration {
        Duration::from_secs(self.ttl.into())
    }

    /// The margin the library is given.
    pub fn margin(&self) -> Duration {
        Duration::from_secs(self.margin.into())
    }

    /// The drift the library is given.
    pub fn drift(&self) -> f64 {
        if self.drift_every == 0 { 0.0 } else { 1.0 / f64::from(self.drift_every) }
    }
}

/// The model: a [`Config`] that stateright explores (see [`stateright::Model`]).
#[derive(Debug, Clone)]
pub struct Protocol {
    /// Its bounds.
    pub config: Config,
}

impl Protocol {
    /// A model with these bounds.
    pub fn new(config: Config) -> Protocol {
        Protocol { config }
    }
}

/// The names of the properties, as the checker reports them.
pub mod property {
    /// Fenced safety: once the resource has heard from a grant, no effect of an older grant is
    /// accepted.
    pub const NO_STALE_EFFECT: &str =
        "no effect of an older grant is accepted once a newer one reached the resource";
    /// Lock safety: while the store keeps its state, a holder acts only while its grant is
    /// the latest.
    pub const ACTS_WHILE_GRANTED: &str = "a holder acts only while its grant is the store's latest";
    /// No lockout.
    pub const NO_LOCKOUT: &str = "the holder of the store's current grant is never refused";
    /// Fences grow.
    pub const FENCES_GROW: &str = "fences strictly grow across releases, expiries and failovers";
    /// No action on an unanswered renewal: a holder acts only within the authority its
    /// answered requests gave it.
    pub const ANSWERED_ONLY: &str = "a holder never acts on a renewal that was not answered (only within what answered requests gave it)";
    /// The dangerous state is reached.
    pub const STALE_TRIES: &str = "sometimes a stale holder tries an effect";
    /// The window fencing cannot close.
    pub const STALE_IN_WINDOW: &str =
        "sometimes a stale holder's effect lands before its successor reaches the resource";
    /// Liveness.
    pub const WAITER_HOLDS: &str = "a waiting client eventually holds once holders stop";
}
