//! The client protocol of `docs/design.md` §3, the same on every store: the [`Locker`] and
//! its [`Lease`]s, the lease state machine they share, the per-key FIFO queue of one locker,
//! the renewal watchdog, and the background releases that must finish before exit; and §8's
//! primitives on that protocol (`docs/design.md`): the acquire mode and what a store holds,
//! semaphores, readers and writers, several keys at once.

pub(crate) mod background;
pub(crate) mod lease;
pub(crate) mod lease_state;
pub(crate) mod locker;
pub(crate) mod multi;
pub(crate) mod queue;
pub(crate) mod renewal;
pub(crate) mod rwlock;
pub(crate) mod semaphore;

pub use lease::{Lease, Released};
pub use lease_state::default_margin;
pub use locker::{Acquire, Locker, MAX_TTL, Wait};
pub use multi::{AcquireAll, Leases};
pub use semaphore::{AcquirePermit, MAX_PERMITS, Permit};
