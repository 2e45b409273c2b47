//! What a deployment actually guarantees: [`probe`] connects to the store a URL names, reads
//! its real settings (persistence, replication, synchronous settings, poolers, members, the
//! server's clock) and turns the store's [`crate::Guarantees`] into verdicts for *this*
//! deployment, with the settings that would change them. `leasehold doctor` prints it.

use std::time::Duration;

use crate::limits::Limits;
use crate::{FenceRepeat, Locker, Result, StoreUrl};
use findings::FAILOVER_CLOCK_SLACK_MS;

pub(crate) mod findings;

pub use findings::{ClockOffset, Probe, Setting};

/// Reads the deployment `url` names: connecting bounded by [`crate::DEFAULT_CONNECT_TIMEOUT`],
/// reading its settings by 20 s. Errors carry no password.
pub async fn probe(url: &StoreUrl) -> Result<Probe> {
    probe_within(url, crate::DEFAULT_CONNECT_TIMEOUT, Duration::from_secs(20)).await
}

/// [`probe`], connecting bounded by `connect` and reading the settings by `limit`: no
/// answer within them is [`crate::Error::Unavailable`]; credentials, TLS or a database the
/// store refuses are [`crate::Error::Config`], as for [`crate::Locker::connect`].
pub async fn probe_within(url: &StoreUrl, connect: Duration, limit: Duration) -> Result<Probe> {
    let store = url.open(Limits { connect, op: crate::DEFAULT_OP_TIMEOUT }).await?;
    read(url, store.guarantees(), limit).await
}

/// [`probe`] of the store `locker` already has open on `url` (its guarantees are the
/// locker's), reading the settings by `limit`.
pub async fn probe_open(url: &StoreUrl, locker: &Locker, limit: Duration) -> Result<Probe> {
    read(url, locker.guarantees(), limit).await
}

async fn read(url: &StoreUrl, g: crate::Guarantees, limit: Duration) -> Result<Probe> {
    let mut p = Probe::default();
    url.read_settings(&mut p, limit).await?;
    if g.fence_repeat == FenceRepeat::ClockBacked {
        fence_clock(&mut p);
    }
    Ok(p)
}

/// The clock-backed fences' assumption, and what a probe could check of it.
fn fence_clock(r: &mut Probe) {
    r.verdict(format!(
        "fences are max(counter + 1, the store's clock in µs), so they never go back after a \
         restart or failover; this assumes that {}",
        crate::CLOCK_ASSUMPTION
    ));
    if let Some(c) = r.clock
        && c.store_minus_local.abs() > FAILOVER_CLOCK_SLACK_MS + c.uncertainty
    {
        r.verdict(format!(
            "the store's clock is {:+.0} ms from this host's: one of the two is not kept by \
             NTP; a store server with a clock that far off could, after a failover, issue \
             fences below the last ones",
            c.store_minus_local
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_clock(store_minus_local: f64) -> Probe {
        let mut p = Probe {
            clock: Some(ClockOffset { store_minus_local, uncertainty: 0.5 }),
            ..Probe::default()
        };
        fence_clock(&mut p);
        p
    }

    /// The assumption is always stated; a store clock over a second off adds a warning.
    #[test]
    fn a_far_off_store_clock_is_named() {
        let near = with_clock(12.0);
        assert_eq!(near.verdicts.len(), 1);
        assert!(near.verdicts[0].contains(crate::CLOCK_ASSUMPTION));
        let far = with_clock(-5000.0);
        assert_eq!(far.verdicts.len(), 2);
        assert!(far.verdicts[1].contains("-5000 ms") && far.verdicts[1].contains("NTP"), "{far:?}");
    }
}
