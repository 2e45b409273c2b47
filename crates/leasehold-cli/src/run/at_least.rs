//! `run --at-least DUR`: after the command ends, the key stays held until DUR after the grant,
//! so the same cron line on every host runs once per period (ShedLock's lockAtLeastFor).

use std::time::{Duration, Instant};

use leasehold::{Lease, LockKind, Locker};

use super::Signals;

/// How the hold ended.
pub(super) enum Held {
    /// The key is held until the end of the period (a lease store expires it then).
    Kept,
    /// The period was over already, or the hold ended (a signal, a session store's period
    /// passed): released, with the release's answer.
    Released(leasehold::Result<bool>),
    /// The store said the grant was no longer ours.
    NotOurs,
    /// The renewal failed; the key expires at its TTL.
    Failed(leasehold::Error),
}

/// Keeps `lease` until `until`. Lease stores: stop renewing, then one owner-checked renewal
/// to the time left, and return (the store ends the grant at `until`); a second renewal a
/// moment later overrides a background renewal that may still have been in flight (it would
/// have extended the key to a full ttl). Session stores, whose lock ends with this process:
/// wait in the foreground until `until` (or a signal), then release.
pub(super) async fn hold(
    locker: &Locker,
    lease: Lease,
    until: Instant,
    signals: &mut Signals,
) -> Held {
    let left = until.saturating_duration_since(Instant::now());
    if left < Duration::from_millis(1) {
        return Held::Released(lease.release().await.map(|r| r.is_clean()));
    }
    if lease.kind() != LockKind::Lease {
        let lost = lease.lost();
        tokio::select! {
            _ = tokio::time::sleep_until(until.into()) => {}
            _ = signals.recv() => {}
            reason = lost => {
                eprintln!(
                    "leasehold: warning: the lock on {:?} ended before --at-least was over ({reason})",
                    lease.key().as_str()
                );
            }
        }
        return Held::Released(lease.release().await.map(|r| r.is_clean()));
    }
    let (key, owner) = (lease.key().as_str().to_owned(), lease.owner());
    let _ = lease.detach();
    match locker.renew_by_owner(&key, &owner, left).await {
        Ok(true) => {}
        Ok(false) => return Held::NotOurs,
        Err(e) => return Held::Failed(e),
    }
    tokio::time::sleep((left / 2).min(Duration::from_millis(200))).await;
    let left = until.saturating_duration_since(Instant::now());
    if left >= Duration::from_millis(1) {
        let _ = locker.renew_by_owner(&key, &owner, left).await;
    }
    Held::Kept
}
