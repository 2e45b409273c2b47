//! Redis's part of `leasehold bench --scenario scale` ([`crate::scale`]): its size is
//! `INFO memory`'s `used_memory` and `DBSIZE`.

use std::time::{Duration, Instant};

use leasehold::{Locker, StoreUrl};

use crate::scale::{Measured, ScaleRun, Size, TTL, lock_all, until};

async fn size(c: &mut ::redis::aio::MultiplexedConnection) -> Result<Size, String> {
    let info: String =
        ::redis::cmd("INFO").arg("memory").query_async(c).await.map_err(|e| e.to_string())?;
    let bytes = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or("INFO memory has no used_memory")?;
    let entries: u64 = ::redis::cmd("DBSIZE").query_async(c).await.map_err(|e| e.to_string())?;
    Ok(Size { bytes, entries })
}

/// Redis's part of the scale scenario.
pub struct Run;

#[async_trait::async_trait]
impl ScaleRun for Run {
    /// `INFO memory` `used_memory` and `DBSIZE`; each key's write is a fenced `INCRBY` of one
    /// counter through `leasehold::fence::redis::RedisFence` (a fence hash per key's
    /// resource). The empty store is measured after one key was locked, so that the scripts
    /// are loaded; after the last key, the measure waits out the TTL and twice the horizon,
    /// then for Redis's active expiry to bring the key count back (within a bound).
    async fn run(&self, url: &StoreUrl, locker: &Locker, keys: usize) -> Result<Measured, String> {
        run(url, locker, keys).await
    }
}

async fn run(url: &StoreUrl, locker: &Locker, keys: usize) -> Result<Measured, String> {
    use leasehold::backends::redis::tools;
    let horizon = tools::horizon(url).map_err(|e| e.to_string())?;
    let client = tools::client(url).map_err(|e| e.to_string())?;
    let mut c = client.get_multiplexed_async_connection().await.map_err(|e| e.to_string())?;
    let res = tools::fence(url).await.map_err(|e| e.to_string())?;
    let counter = format!("{}scale-writes", res.prefix());
    let write = move |_t: usize, f: leasehold::Fencing| {
        let (mut res, counter) = (res.clone(), counter.clone());
        async move {
            let r = f.key().as_str().to_owned();
            // A claim is idempotent: one whose answer was lost (a timeout on a loaded
            // machine) is sent again. The counter only shows that the writes ran.
            let mut tries = 0;
            loop {
                tries += 1;
                match res.claim(&r, &f).await {
                    Ok(()) => break,
                    Err(e) if e.is_retryable() && tries < 5 => continue,
                    Err(e) => return Err(format!("claim: {e}")),
                }
            }
            res.incr_by(&r, &f, &counter, 1).await.map_err(|e| format!("write: {e}"))?;
            Ok(())
        }
    };
    // One key first, so that the scripts are loaded when the empty store is measured
    // (its state is counted in "empty", and is gone by the end too).
    lock_all(locker, 1, write.clone()).await?;
    let empty = size(&mut c).await?;
    let rate = lock_all(locker, keys, write).await?;
    let last = size(&mut c).await?;
    let released = Instant::now();
    // Counters outlive the grant by ttl + horizon, fence hashes by twice the horizon.
    until(released + TTL + 2 * horizon).await;
    // Then Redis's active expiry removes them; wait for the key count to settle.
    let mut after = size(&mut c).await?;
    let give_up = Instant::now() + horizon.max(Duration::from_secs(60));
    while after.entries > empty.entries + 1 && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_secs(1)).await;
        after = size(&mut c).await?;
    }
    let waited = released.elapsed();
    let what = "Redis INFO memory used_memory and DBSIZE (the fence counters expire ttl + \
                horizon after the grant, the resource's fence hashes twice the horizon \
                after their fence; one counter key holds the writes)";
    Ok(Measured {
        horizon,
        keys_per_s: rate,
        sizes: [empty, last, after],
        grants: None,
        waited,
        what,
    })
}
