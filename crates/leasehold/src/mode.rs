//! What a grant shares, for the primitives beyond the mutex (`docs/design.md` §9): the
//! acquire mode a store is asked for, the semaphore slot a grant is for, and which of these
//! a store can hold ([`Primitives`], in [`crate::Guarantees::primitives`]).
//!
//! A store implementor who holds nothing but the mutex keeps [`Primitives::MUTEX`] and never
//! sees a request other than [`Mode::Exclusive`] without a slot: the locker refuses the rest
//! with [`crate::Error::Unsupported`] before asking the store.

use crate::Key;

/// How a grant shares its key with other grants of the same key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Mode {
    /// The only grant of the key: a mutex, or the writer of a reader-writer lock (the same
    /// grant, so a plain lock and a writer exclude each other, as `flock -x`).
    #[default]
    Exclusive,
    /// One of any number of readers (`flock -s`): excludes exclusive grants only. A store
    /// with [`Primitives::writer_preference`] refuses a new reader while a writer waits.
    Shared,
}

impl Mode {
    /// Whether this is [`Mode::Exclusive`] (for `skip_serializing_if`).
    pub fn is_exclusive(&self) -> bool {
        *self == Mode::Exclusive
    }
}

/// The semaphore slot an exclusive request is for: slot `index` (key `SEMAPHORE#index`) of
/// a semaphore of `permits` slots. The store records `permits` with the grant, in the same
/// atomic step, and refuses ([`crate::Error::InvalidInput`]) while a live slot of the same
/// semaphore was granted for a different number: N is part of the request, and two callers
/// naming different N must not silently mix.
#[derive(Debug, Clone, Copy)]
pub struct SlotOf<'a> {
    /// The semaphore's key (the slot's key without `#index`).
    pub semaphore: &'a Key,
    /// This slot, `0..permits`.
    pub index: u32,
    /// The number of permits the caller named.
    pub permits: u32,
}

/// Which primitives a store holds, and how (`docs/design.md` §9). Every store holds the
/// mutex; several keys at once are built by the locker on any store (canonical order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Primitives {
    /// Semaphores: slots of the plain mutex, with the permit count recorded beside each
    /// slot's grant and checked atomically with it ([`SlotOf`]).
    pub permits: bool,
    /// Readers: [`Mode::Shared`] grants, and exclusive grants that wait for them.
    pub shared: bool,
    /// A waiting writer blocks new readers (the store records its intent, with an expiry),
    /// so a steady stream of readers cannot starve it.
    pub writer_preference: bool,
    /// Readers carry a fence of their own, from the key's counter (the mutex's), so every
    /// writer's fence exceeds every earlier reader's. `false`: readers get fence 0.
    pub shared_fence: bool,
    /// What the store cannot do of the above, in a sentence (for `doctor` and errors).
    pub note: &'static str,
}

impl Primitives {
    /// The mutex only: semaphores and readers are refused.
    pub const MUTEX: Primitives = Primitives {
        permits: false,
        shared: false,
        writer_preference: false,
        shared_fence: false,
        note: "mutex only in this version: semaphores and readers are refused",
    };

    /// Everything: permits checked, fenced readers, writer preference.
    pub const ALL: Primitives = Primitives {
        permits: true,
        shared: true,
        writer_preference: true,
        shared_fence: true,
        note: "semaphores, fenced readers with writer preference, several keys",
    };

    /// Refuses, before the store is asked, what `backend`'s store cannot hold: a reader
    /// (`mode` shared) without [`Primitives::shared`], a semaphore's slot (`slot`) without
    /// [`Primitives::permits`], each [`crate::Error::Unsupported`] with the store's note.
    pub(crate) fn admit(&self, backend: &'static str, mode: Mode, slot: bool) -> crate::Result<()> {
        if mode == Mode::Shared && !self.shared {
            return Err(crate::Error::Unsupported {
                backend,
                primitive: "readers (shared grants)",
                note: self.note,
            });
        }
        if slot && !self.permits {
            return Err(crate::Error::Unsupported {
                backend,
                primitive: "a semaphore",
                note: self.note,
            });
        }
        Ok(())
    }
}

/// The name of slot `index` of the semaphore `key`: `KEY#index`, an ordinary key.
pub(crate) fn slot_key(key: &str, index: u32) -> String {
    format!("{key}#{index}")
}
