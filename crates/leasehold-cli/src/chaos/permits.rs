//! `chaos --scenario stalled-holder --permits N`: the check before the trials, the idle
//! holders of the other N-1 slots, and the successor's slot check.

use std::time::Duration;

use leasehold::{Error, Locker, StoreUrl, Wait};

use super::{Event, KEY, Settings, connect};

/// `--permits N`: refuses (exit 64, the store's own error) a store that cannot hold a
/// semaphore, or N other than the one live slots of [`KEY`] were granted for, by taking
/// and releasing one permit before any trial. Other failures are left to the trials. The
/// locker is the one the trials use.
pub async fn check_permits(
    url: &StoreUrl,
    n: u32,
    ttl: Duration,
) -> Result<Locker, crate::exit::Exit> {
    let locker = connect(url).await.map_err(|e| {
        crate::exit::Exit::fail(crate::exit::code::UNAVAILABLE, format!("chaos: {e}"))
    })?;
    match locker.acquire_permit(KEY, n, ttl).await {
        Ok(p) => {
            let _ = p.release().await;
            Ok(locker)
        }
        Err(e @ (Error::Unsupported { .. } | Error::InvalidInput(_))) => {
            let mut x = crate::exit::Exit::from(e);
            x.msg = x.msg.map(|m| format!("chaos: --permits {n}: {m}"));
            Err(x)
        }
        Err(_) => Ok(locker),
    }
}

/// The idle holders of a `--permits N` trial: N-1 permits of [`KEY`], auto-renewed, each
/// with an owner of its own, on the successor's locker (whose one-shot tries and waits skip
/// the slots it holds at once: `HeldByThisLocker`). They take all N and give back
/// slot 0, so the only free slot, the frozen holder's and then its successor's, is `KEY#0`
/// in every trial: the resource is guarded by that one slot key and checks its fences.
pub(super) async fn idle(
    s: &Settings,
    idle: &Locker,
    n: u32,
) -> Result<Vec<leasehold::Permit>, String> {
    let mut held = Vec::new();
    for _ in 0..n {
        let p = idle
            .acquire_permit(KEY, n, s.ttl)
            .auto_renew(true)
            .wait(Wait::For(s.ttl * 20 + Duration::from_secs(5)))
            .await
            .map_err(|e| format!("an idle permit holder: {e}"))?;
        held.push(p);
    }
    // Given back only once all are held, so that no later acquire here takes slot 0 again.
    if let Some(i) = held.iter().position(|p| p.slot() == 0) {
        let released = held.swap_remove(i).release().await;
        let _ = released.map_err(|e| format!("an idle permit holder's release: {e}"))?;
    }
    Ok(held)
}

/// The successor's slot must be the frozen holder's (its `acquire` event names it): the idle
/// holders keep every other slot, so any other slot means more than N permits at once.
pub(super) fn same_slot(got: &str, holder: &[Event]) -> Result<(), String> {
    let frozen = holder.iter().find(|e| e.what == "acquire");
    let frozen = frozen.and_then(|e| e.detail.as_deref()).unwrap_or_default();
    if got == frozen {
        return Ok(());
    }
    Err(format!(
        "the successor got slot {got} while the frozen holder held {frozen:?} and the idle \
         holders the others: more than the permits at once"
    ))
}
