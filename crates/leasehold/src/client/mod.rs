//! The client protocol of `docs/design.md` §3, the same on every store: the [`Locker`] and
//! its [`Lease`]s, the lease state machine they share, the per-key FIFO queue of one locker,
//! the renewal watchdog, and the background releases that must finish before exit.

pub(crate) mod background;
pub(crate) mod lease;
pub(crate) mod lease_state;
pub(crate) mod locker;
pub(crate) mod queue;
pub(crate) mod renewal;

pub use lease::{Lease, Released};
pub use lease_state::default_margin;
pub use locker::{Acquire, Locker, MAX_TTL, Wait};
