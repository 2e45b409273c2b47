//! The model's state and actions: what the store, the replica, each client, the links between
//! them and the resource hold, plus the ghost record the properties read.
//!
//! Times are ticks; the store reads its clock in the same unit, so a clock-backed fence is
//! the store's clock "in µs" with at most one grant per tick (the rate half of
//! `leasehold::CLOCK_ASSUMPTION`). The protocol does not change when every time is shifted by
//! the same amount, so the state keeps none absolute (`canon.rs`): what the store holds
//! (expiries, fences, counters) is relative to the serving store's clock, and what a client
//! holds (its deadline, the age of its request) relative to its own clock. That makes the
//! state space finite without a time horizon. Owners are small numbers: client `c`'s `n`th
//! acquire mints owner `c * 8 + n`.

/// One grant as the store keeps it. A semaphore would keep several; a reader-writer lock a
/// mode with each.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    /// Owner token.
    pub owner: u8,
    /// Fence issued with it (store frame).
    pub fence: i16,
    /// Ticks of the store's clock until it expires (live while positive).
    pub expires: i8,
    /// Ghost: the grant's number in real time (0 first), across failovers.
    pub seq: u8,
}

/// What a store server holds (and what replication copies).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Data {
    /// The key's grant, if any (live or expired).
    pub grant: Option<Grant>,
    /// The key's fence counter: the last fence issued (store frame).
    pub counter: i16,
}

/// A request from a client to the store.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub enum Req {
    /// Grant `owner` the key.
    Acquire {
        /// Owner token.
        owner: u8,
    },
    /// Extend `owner`'s grant.
    Renew {
        /// Owner token.
        owner: u8,
    },
    /// Delete `owner`'s grant (also the cleanup after an unknown acquire).
    Release {
        /// Owner token.
        owner: u8,
    },
}

/// The store's answer to an acquire.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ans {
    /// Granted with this fence (store frame; and ghost grant number).
    Granted(i16, u8),
    /// Someone holds it.
    Busy,
    /// Renewed.
    Renewed,
    /// Not the owner (renewal) or released.
    Done,
}

/// A message from a holder to the resource: its claim or an effect, under its grant.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct ResMsg {
    /// Claim (true) or effect.
    pub claim: bool,
    /// Owner token.
    pub owner: u8,
    /// Fence (store frame).
    pub fence: i16,
    /// Ghost: the grant's number.
    pub seq: u8,
}

/// Where the holder's claim stands.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub enum ClaimState {
    /// Not sent yet (or timed out: a re-claim is idempotent).
    No,
    /// Sent, no answer (it may still be applied, or lost; the holder times out).
    Sent,
    /// Installed: effects may follow.
    Ok,
    /// Refused: this holder stops using the resource.
    Refused,
}

/// A held grant, as the client sees it.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct Hold {
    /// Owner token.
    pub owner: u8,
    /// Fence (store frame).
    pub fence: i16,
    /// Ghost: grant number.
    pub seq: u8,
    /// Local ticks left before the local deadline, 0 once passed (`None`: the rule is
    /// switched off).
    pub left: Option<u8>,
    /// Ghost: the ticks left by answered requests only.
    pub answered: u8,
    /// A renewal whose answer never came is awaited: local ticks since it was sent (kept
    /// only where a rule reads it).
    pub renewing: Option<u8>,
    /// The claim.
    pub claim: ClaimState,
    /// Effects it may still send.
    pub effects: u8,
}

/// A client's phase.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Not holding; may acquire.
    Idle,
    /// Told busy: retries with the same owner.
    Waiting {
        /// Owner token.
        owner: u8,
    },
    /// An owner-checked release is due: the background release of a lease that was lost,
    /// or the cleanup of an acquire whose answer never came.
    Cleanup {
        /// Owner token.
        owner: u8,
    },
    /// Holding.
    Holding(Hold),
    /// Stopped for good (liveness: the holder that stops).
    Stopped,
}

/// One client, with its links.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct Client {
    /// Phase.
    pub phase: Phase,
    /// Ticks since the local clock last lost one (capped at the drift period).
    pub since_skip: u8,
    /// Acquire calls made.
    pub acquired: u8,
    /// Sent a request to the store this tick (one per tick).
    pub sent_store: bool,
    /// Sent a message to the resource this tick (one per tick).
    pub sent_res: bool,
    /// Message in flight to the resource (the resource's answer to a claim arrives at once
    /// or is lost).
    pub to_res: Option<ResMsg>,
}

/// Ghost record the properties read; each flag latches.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Ghost {
    /// The next grant's number (renumbered with the others, `canon.rs`).
    pub grants: u8,
    /// A grant was ever issued.
    pub issued: bool,
    /// Owner of the latest grant.
    pub latest: Option<u8>,
    /// Largest fence issued (store frame).
    pub max_fence: i16,
    /// The store's clock at the latest grant (store frame, 0 or below; clamped where no
    /// failover's skew can reach).
    pub last_grant_clock: i8,
    /// Newest grant number that reached the resource.
    pub newest_seen: Option<u8>,
    /// A fence did not grow.
    pub fence_back: bool,
    /// An effect of an older grant was accepted after a newer grant reached the resource.
    pub older_accepted: bool,
    /// A holder acted while another owner had the latest grant (no failover to excuse it).
    pub acted_superseded: bool,
    /// The latest grant's holder, still current at the store, was refused.
    pub locked_out: bool,
    /// A holder acted past the deadline its answered requests gave it.
    pub acted_unanswered: bool,
    /// A message of a superseded grant reached the resource.
    pub stale_tried: bool,
    /// An effect of a superseded grant was accepted.
    pub stale_accepted: bool,
    /// Liveness: client 1 got the key.
    pub waiter_held: bool,
    /// Grants issued before the latest failover: their holders are excused from "acts only
    /// while granted" (the store's failure admitted a second holder; fencing must still
    /// hold).
    pub failover_at: Option<u8>,
}

/// The whole state.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct State {
    /// Real time, kept only in a liveness run (for its horizon and the holder's stop);
    /// otherwise 0.
    pub now: u8,
    /// The serving store's data.
    pub store: Data,
    /// The replica's data (what a failover rolls back to), in the serving store's frame.
    pub replica: Data,
    /// A grant was made this tick (at most one per tick).
    pub granted_now: bool,
    /// Failovers so far.
    pub failovers: u8,
    /// How far the serving store's clock has stepped back in all (it never makes it up: a
    /// clock that steps back and one that stands still are the same to the fence rule).
    pub back: u8,
    /// The clients.
    pub clients: Vec<Client>,
    /// The resource's installed claim: (owner, fence in the store frame).
    pub installed: Option<(u8, i16)>,
    /// Ghost record.
    pub ghost: Ghost,
}

impl State {
    /// The grant the store currently holds live, if any.
    pub fn live_grant(&self) -> Option<Grant> {
        self.store.grant.filter(|g| g.expires > 0)
    }
}

/// One step of the model. The store serves a request the instant it is sent and its
/// answer arrives at once or never: a request delayed in flight, or an answer read late, is
/// the same, for every property here, as one sent later or a pause after reading.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub enum Action {
    /// Real time advances; clients in the mask `slow` lose the tick on their clocks.
    Tick {
        /// Bit `c`: client `c`'s clock does not advance.
        slow: u8,
    },
    /// Client acquires (new owner, or the waiting one); the answer arrives.
    Acquire(u8),
    /// Client acquires; the store serves it, the answer is lost (unknown outcome).
    AcquireUnanswered(u8),
    /// Holder renews; the answer arrives.
    Renew(u8),
    /// Holder renews; the store serves it, the answer is lost.
    RenewUnanswered(u8),
    /// Holder renews; the request never reaches the store.
    RenewLost(u8),
    /// Holder stops waiting for its renewal's answer.
    Timeout(u8),
    /// Holder releases.
    Release(u8),
    /// Client sends the owner-checked release that is due.
    Cleanup(u8),
    /// Holder's local deadline passed: it knows it lost.
    Lost(u8),
    /// Holder sends its claim to the resource.
    Claim(u8),
    /// Holder sends an effect to the resource.
    Effect(u8),
    /// Resource handles client's message (a claim's answer arrives).
    Apply(u8),
    /// Resource handles client's claim; the answer is lost.
    ApplyUnanswered(u8),
    /// Client's message to the resource is lost.
    LoseRes(u8),
    /// Holder stops waiting for its claim's answer (a re-claim is idempotent).
    ClaimTimeout(u8),
    /// The replica catches up with the serving store.
    Replicate,
    /// The replica takes over, its clock `skew` ticks behind the old server's (every value
    /// in the store frame moves up by `skew`).
    Failover {
        /// Ticks behind.
        skew: u8,
    },
    /// The store forgets the key's counter: the horizon has passed since its last grant,
    /// and no grant is live.
    Forget,
    /// The store's clock steps back `by` ticks (at most [`crate::Config::clock_back`] in all,
    /// so it never falls further behind real time): every value in the store frame moves up
    /// by `by`.
    StepBack {
        /// Ticks back.
        by: u8,
    },
}
