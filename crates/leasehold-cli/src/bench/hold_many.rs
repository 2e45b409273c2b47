//! Many leases held with auto-renew on one connection: renewal lag, losses, memory.

use super::{BenchResult, Progress, Settings, report, round_to, unique};
use crate::dur;
use leasehold::Locker;
use leasehold_harness::baseline::ServerView;
use std::time::Duration;
use std::time::Instant;

pub(super) async fn hold_many(
    s: &Settings,
    locker: &Locker,
    view: Option<&dyn ServerView>,
    p: &Progress,
) -> BenchResult<report::HoldMany> {
    let ttl = Duration::from_secs(3);
    // Renewals are counted where they reach the store, through a wrapper around it.
    let counting = leasehold_harness::counting::Counting::new(locker.store().clone());
    let locker = &Locker::from_arc(counting.clone());
    let mut runs = Vec::new();
    for run in 0..s.runs {
        p.step(format!("hold-many run {}/{} ({} leases)", run + 1, s.runs, s.leases));
        let rss_before = rss_bytes();
        let prefix = unique("hm");
        let t0 = Instant::now();
        let leases = acquire_many(locker, &prefix, s.leases, ttl).await?;
        let acquire_s = t0.elapsed().as_secs_f64();
        let rss_held = rss_bytes();
        // Hold for at least three TTLs, sampling how long ago random leases were renewed.
        let hold = s.duration.max(ttl * 3);
        let (renewals_before, calls_before) = (counting.renewals(), counting.renew_calls());
        let held_from = Instant::now();
        let mut oldest_renewal = Duration::ZERO;
        let mut samples = 0u64;
        let end = Instant::now() + hold;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ (run as u64);
        while Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(100)).await;
            // Where the server can say how long a lease has left, sample 50 at random.
            if let Some(v) = view {
                let mut keys = Vec::new();
                for _ in 0..50 {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let i = (seed % leases.len() as u64) as usize;
                    keys.push(leases[i].key().as_str());
                }
                let Some(left) = v.lease_ms_left(&keys).await? else { continue };
                for p in left {
                    samples += 1;
                    let left = Duration::from_millis(p.max(0) as u64);
                    oldest_renewal = oldest_renewal.max(ttl.saturating_sub(left));
                }
            }
        }
        let held_for = held_from.elapsed();
        let renewals = counting.renewals() - renewals_before;
        let renew_calls = counting.renew_calls() - calls_before;
        let per_lease_per_ttl =
            renewals as f64 / leases.len().max(1) as f64 / (held_for.as_secs_f64() / 3.0);
        let lost = leases.iter().filter(|l| l.is_lost()).count();
        let rss_end = rss_bytes();
        release_many(leases).await?;
        let mb = |b: Option<u64>| b.map(|b| b / 1_000_000);
        runs.push(report::HoldRun {
            leases: s.leases,
            acquire_all_s: round_to(acquire_s, 2),
            held_s: hold.as_secs_f64(),
            lost,
            oldest_renewal_seen_ms: (samples > 0).then_some(oldest_renewal.as_millis() as u64),
            pttl_samples: samples,
            renew_interval_ms: (ttl / 3).as_millis() as u64,
            renewals_per_lease_per_ttl: round_to(per_lease_per_ttl, 2),
            renew_round_trips: renew_calls,
            rss_mb_before: mb(rss_before),
            rss_mb_holding: mb(rss_held),
            rss_mb_end: mb(rss_end),
        });
    }
    Ok(report::HoldMany {
        what: format!(
            "{} leases, ttl {}, auto-renew every ttl/3 (batched: one round trip per tick)",
            s.leases,
            dur::human(ttl)
        ),
        runs,
    })
}

async fn acquire_many(
    locker: &Locker,
    prefix: &str,
    n: usize,
    ttl: Duration,
) -> BenchResult<Vec<leasehold::Lease>> {
    const PAR: usize = 64;
    let mut handles = Vec::new();
    for t in 0..PAR {
        let (locker, prefix) = (locker.clone(), prefix.to_string());
        handles.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for i in (t..n).step_by(PAR) {
                let lease = locker
                    .acquire(&format!("{prefix}:{i}"), ttl)
                    .auto_renew(true)
                    .await
                    .map_err(|e| e.to_string())?;
                out.push(lease);
            }
            Ok::<_, String>(out)
        }));
    }
    let mut all = Vec::with_capacity(n);
    for h in handles {
        all.extend(h.await.map_err(|e| e.to_string())??);
    }
    Ok(all)
}

async fn release_many(leases: Vec<leasehold::Lease>) -> BenchResult<()> {
    let mut chunks: Vec<Vec<leasehold::Lease>> = (0..64).map(|_| Vec::new()).collect();
    for (i, l) in leases.into_iter().enumerate() {
        chunks[i % 64].push(l);
    }
    let handles: Vec<_> = chunks
        .into_iter()
        .map(|c| {
            tokio::spawn(async move {
                for l in c {
                    let _ = l.release().await.map_err(|e| e.to_string())?;
                }
                Ok::<_, String>(())
            })
        })
        .collect();
    for h in handles {
        h.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}

fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb * 1024)
}
