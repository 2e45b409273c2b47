//! Reader-writer locks on the mutex protocol (`docs/design.md` §9): the writer is the plain
//! exclusive grant ([`crate::Locker::acquire`]), a reader is a [`Mode::Shared`] grant of the
//! same key. Both are ordinary [`crate::Lease`]s: notified waiting, owner-checked renew and
//! release, auto-renew batched with the rest, `lost()`/`guard()`/`admit()`.

use std::time::Duration;

use crate::{Acquire, Locker, Mode};

impl Locker {
    /// Starts the acquisition of a reader's grant of `key` for `ttl`: granted while no
    /// exclusive grant (a writer, a plain [`Locker::acquire`]) holds the key, and, on a store
    /// with [`crate::Primitives::writer_preference`], while no writer waits for it. Configure
    /// and `.await` it as any [`Acquire`]; the lease's [`crate::Lease::fence`] is this grant's
    /// own (each grant bumps the key's counter, so every later writer's fence is larger).
    ///
    /// Readers of one locker never queue behind each other locally, and a reader held by
    /// this locker is not [`crate::Error::HeldByThisLocker`] for a writer: a writer asked for by
    /// the task that holds a reader of the same key waits (until its wait runs out).
    ///
    /// [`crate::Error::Unsupported`] at once (nothing asked of the store) where the store cannot
    /// hold readers ([`crate::Primitives::shared`]); other failures as for
    /// [`Locker::acquire`].
    pub fn acquire_shared(&self, key: &str, ttl: Duration) -> Acquire {
        let mut a = self.acquire(key, ttl);
        a.mode = Mode::Shared;
        a
    }

    /// The writer's grant of `key`: the very grant of [`Locker::acquire`] (a plain lock and a
    /// writer exclude each other), named for symmetry with [`Locker::acquire_shared`].
    pub fn acquire_exclusive(&self, key: &str, ttl: Duration) -> Acquire {
        self.acquire(key, ttl)
    }
}
