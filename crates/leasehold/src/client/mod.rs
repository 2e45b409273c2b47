//! The client protocol of `docs/design.md` §3, the same on every store: the [`Locker`] and
//! its [`Lease`]s, the lease state machine they share, the per-key FIFO queue of one locker,
//! the renewal watchdog, and the background releases that must finish before exit; and §8's
//! primitives on that protocol (`docs/design.md`): the acquire mode and what a store holds,
//! semaphores, readers and writers, several keys at once.

/// The lease settings an acquisition of several grants passes to each (`self.base`, an
/// [`Acquire`]): written once for the semaphore's and several keys' builders.
macro_rules! lease_options {
    () => {
        /// See [`Acquire::auto_renew`].
        pub fn auto_renew(mut self, on: bool) -> Self {
            self.base = self.base.auto_renew(on);
            self
        }

        /// See [`Acquire::drift`].
        pub fn drift(mut self, drift: f64) -> Self {
            self.base = self.base.drift(drift);
            self
        }

        /// See [`Acquire::margin`].
        pub fn margin(mut self, margin: std::time::Duration) -> Self {
            self.base = self.base.margin(margin);
            self
        }
    };
}

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
