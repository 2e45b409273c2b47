//! What `leasehold bench --scenario scale` measures on a store whose kit can read its size
//! ([`crate::stores::StoreKit::scale`]): `--leases` distinct keys locked once each (acquire,
//! a fenced write, release), and the store's size before the first key, after the last and
//! once the horizon has passed. The store's part (how it reads its size, its fenced write,
//! how long it waits) is in its folder (`scale.rs`); the parts every store shares are here.

use std::time::{Duration, Instant};

use leasehold::{Locker, OwnerToken, StoreUrl};
use serde::Serialize;

/// Tasks locking keys at once.
pub const PAR: usize = 64;
/// The lease's TTL (each is released at once).
pub const TTL: Duration = Duration::from_secs(5);

/// A size: bytes and entries, as the store counts them (its kit's `what` says which).
#[derive(Debug, Clone, Serialize)]
pub struct Size {
    /// Bytes.
    pub bytes: u64,
    /// Entries (keys, rows).
    pub entries: u64,
}

/// Grant latencies (acquire until granted) of a run of grants.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    /// How many grants.
    pub grants: usize,
    /// Median, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Largest, ms.
    pub max_ms: f64,
}

/// What a store's scale run measured.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The store's horizon.
    pub horizon: Duration,
    /// Keys locked (acquire, fenced write, release) per second.
    pub keys_per_s: f64,
    /// The store before the first key, after the last key's release, and once every key's
    /// state may be gone.
    pub sizes: [Size; 3],
    /// Grants of one key every 100 ms before the first key and while waiting out the
    /// horizon, and where the bytes after the horizon are, where the store measures them.
    pub grants: Option<([Latency; 2], String)>,
    /// From the last release to the last measurement.
    pub waited: Duration,
    /// What was measured, in words.
    pub what: &'static str,
}

/// A store's part of the scale scenario.
#[async_trait::async_trait]
pub trait ScaleRun: Sync {
    /// Locks `keys` keys through `locker` on `url` and measures the store's size; an error
    /// is the first failed request.
    async fn run(&self, url: &StoreUrl, locker: &Locker, keys: usize) -> Result<Measured, String>;
}

/// A fresh key name under `prefix`, as the bench names its keys.
pub fn unique(prefix: &str) -> String {
    format!("bench:{prefix}:{}", OwnerToken::generate().map(|o| o.to_string()).unwrap_or_default())
}

/// `x` rounded to `places` decimals.
fn round_to(x: f64, places: i32) -> f64 {
    let m = 10f64.powi(places);
    (x * m).round() / m
}

/// Locks `n` distinct keys once each, [`PAR`] at a time (acquire, `write(task, fencing)`,
/// release); keys locked per second. An error is the first failed acquire, write or
/// release.
pub async fn lock_all<W, F>(locker: &Locker, n: usize, write: W) -> Result<f64, String>
where
    W: Fn(usize, leasehold::Fencing) -> F + Clone + Send + 'static,
    F: std::future::Future<Output = Result<(), String>> + Send,
{
    let prefix = unique("scale");
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..PAR {
        let (locker, prefix, write) = (locker.clone(), prefix.clone(), write.clone());
        tasks.push(tokio::spawn(async move {
            for i in (t..n).step_by(PAR) {
                let lease = locker
                    .acquire(&format!("{prefix}:{i}"), TTL)
                    .await
                    .map_err(|e| format!("acquire: {e}"))?;
                write(t, lease.fencing()).await?;
                let released = lease.release().await.map_err(|e| format!("release: {e}"))?;
                if !released.is_clean() {
                    return Err(format!("release of key {i}: {released:?}"));
                }
            }
            Ok::<_, String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok(n as f64 / t0.elapsed().as_secs_f64())
}

/// Locks one key every 100 ms until `deadline` (acquire, release), recording each grant's
/// latency; a failed grant ends the run with its error.
pub async fn grants_until(
    locker: &Locker,
    key: &str,
    deadline: Instant,
) -> Result<Latency, String> {
    let mut ms = Vec::new();
    loop {
        let t0 = Instant::now();
        let lease = locker.acquire(key, TTL).await.map_err(|e| format!("probe acquire: {e}"))?;
        ms.push(t0.elapsed().as_secs_f64() * 1000.0);
        let released = lease.release().await.map_err(|e| format!("probe release: {e}"))?;
        if !released.is_clean() {
            return Err(format!("probe release: {released:?}"));
        }
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ms.sort_by(f64::total_cmp);
    let at =
        |q: f64| ms.get(((ms.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0.0);
    Ok(Latency {
        grants: ms.len(),
        p50_ms: round_to(at(0.5), 2),
        p99_ms: round_to(at(0.99), 2),
        max_ms: round_to(at(1.0), 2),
    })
}

/// Sleeps until `deadline`.
pub async fn until(deadline: Instant) {
    tokio::time::sleep(deadline.saturating_duration_since(Instant::now())).await;
}
