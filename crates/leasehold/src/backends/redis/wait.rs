//! How a Redis form waits (every form that runs the scripts on one node per key): by
//! watching the key's release channel, a waiting writer recording its intent while readers
//! refuse it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::store::{AcquireRequest, Attempt, Watch};
use crate::{Key, Mode, OwnerToken, Result, Store};

/// A Redis form that holds readers: how its waiters are woken, and its writers' intents.
#[async_trait]
pub(super) trait Intents: Store {
    /// Subscribes to changes of `key` (a release, an expiry, a withdrawn intent).
    async fn watch_key(&self, key: &Key) -> Result<Box<dyn Watch>>;
    /// [`On::note_intent`] on the node of `req`'s key.
    async fn note_intent(&self, req: &AcquireRequest<'_>, left: Option<Duration>) -> Result<bool>;
    /// [`On::clear_intent`] on the node of `key`.
    async fn clear_intent(&self, key: &Key, owner: &OwnerToken) -> Result<()>;
}

/// `Store::acquire` of a Redis form: a waiting exclusive request (not a slot) is a writer
/// that records its intent when readers refuse it; the rest wait by watching.
pub(super) async fn acquire<S: Intents>(
    s: &S,
    req: &AcquireRequest<'_>,
    until: Option<Instant>,
) -> Result<Attempt> {
    match until {
        Some(u) if req.mode == Mode::Exclusive && req.slot.is_none() => {
            acquire_as_writer(s, req, u).await
        }
        _ => crate::store::acquire_watching(s, req, until, || s.watch_key(req.key)).await,
    }
}

/// A waiting writer: attempts that record its intent when readers refuse it, and the
/// intent withdrawn when the wait runs out (a grant keeps it until its release).
async fn acquire_as_writer<S: Intents>(
    s: &S,
    req: &AcquireRequest<'_>,
    until: Instant,
) -> Result<Attempt> {
    let noted = AtomicBool::new(false);
    let r = crate::store::acquire_watching_with(
        req,
        Some(until),
        || s.watch_key(req.key),
        || async {
            let a = s.try_acquire(req).await?;
            if let Attempt::Busy { holder_expires_in } = &a
                && s.note_intent(req, *holder_expires_in).await?
            {
                noted.store(true, Ordering::Relaxed);
            }
            Ok(a)
        },
    )
    .await;
    // Granted, the intent stays until the release removes it (harmless meanwhile: the
    // writer excludes readers anyway), so a handoff costs no extra round trip.
    if noted.load(Ordering::Relaxed) && matches!(r, Ok(Attempt::Busy { .. })) {
        s.clear_intent(req.key, req.owner).await?;
    }
    r
}
