//! What a backend promises, as data (the guarantee matrix of `docs/design.md`). The CLI prints it; tests check behaviour
//! against it.

use std::fmt;

/// How long a grant lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LockKind {
    /// Expires after a TTL unless renewed: the holder has a local deadline.
    Lease,
    /// Held while a session (connection, open file, ZK session) lives: no TTL.
    Session,
    /// Held by one database transaction: the work happens inside it.
    Transaction,
}

/// Whether the fences a store issues can ever go back (repeat or shrink) for a key.
///
/// A repeated fence is a safety failure, not a harmless event: a fenced resource keeps the
/// *first* claimant of a number, and after a store failure that is the stale holder. So no
/// store here issues fences that can go back while its stated assumption holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FenceRepeat {
    /// Fences never go back, whatever fails: they come from a consensus log (etcd revision,
    /// ZooKeeper zxid) that survives a minority's loss and never reuses a number.
    Never,
    /// Fences never go back while the clock assumption in [`CLOCK_ASSUMPTION`] holds: each
    /// grant issues `max(counter + 1, the store's clock in µs)` atomically, so a counter lost
    /// in a restart, or behind on a promoted replica, restarts above every fence issued
    /// before. In normal operation (no store failure) fences grow whatever the clock does.
    ClockBacked,
    /// The store issues no fence (fence 0, which fenced resources refuse).
    NoFence,
}

/// The assumption behind [`FenceRepeat::ClockBacked`] fences, as printed by `doctor`.
/// The model (`docs/model.md`) checks it in this strict form: a new clock that reads exactly
/// the last grant's time repeats its fence.
pub const CLOCK_ASSUMPTION: &str = "after a store failure, the clock of the server that takes \
over reads later than the last grant on the old one (it lags the old clock by less than the \
time since that grant, failover included), and a key gets fewer than 1,000,000 grants per \
second (fences are microseconds since 1970, below 2^53 until the year 2255)";

/// Fences stay below this (2^53) so that JSON readers in any language read them exactly.
pub const MAX_FENCE: u64 = 1 << 53;

/// What a backend promises under which faults.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Guarantees {
    /// URL scheme / backend name.
    pub backend: &'static str,
    /// Lease, session or transaction lock.
    pub kind: LockKind,
    /// Exclusion while the store is healthy, and its scope.
    pub exclusion: &'static str,
    /// What a store crash, restart or failover does to holders.
    pub store_failure: &'static str,
    /// Who decides that a grant has ended.
    pub expiry: &'static str,
    /// Where fences come from.
    pub fence: &'static str,
    /// Whether fences can go back, and under which assumption.
    pub fence_repeat: FenceRepeat,
    /// Whether a store failure (restart without persistence, promotion of a replica that
    /// missed grants) can admit a second holder while the first still believes it holds. The
    /// fences of [`Guarantees::fence_repeat`] are what lets the resource refuse the stale one.
    pub failure_admits_second_holder: bool,
    /// Whether [`crate::store::Store::holders`] reports each current grant's fence (0 where the store
    /// issues none), so a resource can ask the store whether a claimed grant is real
    /// ([`crate::fence`]'s HTTP layer does). `false` for Redlock with an external fence
    /// source, whose instances never see the fences.
    pub holders_know_fence: bool,
    /// Whether each holder [`crate::store::Store::holders`] lists carries the
    /// [`crate::HolderInfo`] (host, pid, since, command) its holder wrote when it
    /// acquired, kept through renewals. For operators only: nothing checks it.
    pub holders_know_info: bool,
    /// How a waiting acquirer learns that the key may be free.
    pub waiting: &'static str,
}

impl fmt::Display for Guarantees {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            LockKind::Lease => "lease (TTL, renewable)",
            LockKind::Session => "session lock (held while the session lives)",
            LockKind::Transaction => "transaction lock",
        };
        let repeat = match self.fence_repeat {
            FenceRepeat::Never => "never go back (consensus log)",
            FenceRepeat::ClockBacked => {
                "never go back while the store's clock holds: max(counter + 1, clock µs)"
            }
            FenceRepeat::NoFence => "not issued",
        };
        writeln!(f, "backend:        {}", self.backend)?;
        writeln!(f, "kind:           {kind}")?;
        writeln!(f, "exclusion:      {}", self.exclusion)?;
        writeln!(f, "store failure:  {}", self.store_failure)?;
        writeln!(f, "expiry:         {}", self.expiry)?;
        writeln!(f, "fence:          {} ({repeat})", self.fence)?;
        if self.fence_repeat == FenceRepeat::ClockBacked {
            writeln!(f, "assumption:     {CLOCK_ASSUMPTION}")?;
        }
        writeln!(f, "waiting:        {}", self.waiting)?;
        let info = if self.holders_know_info {
            "kept beside each grant (host, pid, since, command)"
        } else {
            "not kept by this store"
        };
        write!(f, "holder info:    {info}")
    }
}
