//! What a backend promises, as data (DESIGN §5). The CLI prints it; tests check behaviour
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

/// Whether the fences a store issues can ever repeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FenceRepeat {
    /// Fences never repeat for a key: the one-statement `fence <= $tok` pattern is safe.
    Never,
    /// Fences can repeat after the failure named in [`Guarantees::store_failure`]; use the
    /// owner-bound fence table, which rejects repeats.
    AfterStoreFailure,
    /// The store issues no fence.
    NoFence,
}

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
    /// Whether fences can repeat.
    pub fence_repeat: FenceRepeat,
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
            FenceRepeat::Never => "never repeat",
            FenceRepeat::AfterStoreFailure => {
                "can repeat after a store failure (owner-bound fence tables reject repeats)"
            }
            FenceRepeat::NoFence => "not issued",
        };
        writeln!(f, "backend:        {}", self.backend)?;
        writeln!(f, "kind:           {kind}")?;
        writeln!(f, "exclusion:      {}", self.exclusion)?;
        writeln!(f, "store failure:  {}", self.store_failure)?;
        writeln!(f, "expiry:         {}", self.expiry)?;
        writeln!(f, "fence:          {} ({repeat})", self.fence)?;
        write!(f, "waiting:        {}", self.waiting)
    }
}
