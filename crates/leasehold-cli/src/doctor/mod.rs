//! `leasehold doctor`: reads a deployment's real settings and says what it guarantees.
//!
//! The backend's guarantees (`docs/design.md` §5) are data in the library; this turns them into the
//! verdict for *this* deployment: persistence, replication, synchronous settings, poolers,
//! members, and the settings that would change the verdict.

#[cfg(feature = "etcd")]
mod etcd;
#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "zookeeper")]
mod zookeeper;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leasehold::Locker;
use serde_json::{Value, json};

/// What doctor found.
#[derive(Debug, Default)]
pub struct Report {
    /// Server facts, in reading order: (setting, value).
    pub settings: Vec<(String, String)>,
    /// What this deployment guarantees, sentence by sentence.
    pub verdicts: Vec<String>,
    /// Settings that would change the verdict.
    pub changes: Vec<String>,
    /// Store clock minus local clock, and its uncertainty (half the round trip), if the
    /// protocol reveals the store's clock.
    pub clock: Option<(f64, f64)>,
}

impl Report {
    fn set(&mut self, k: &str, v: impl ToString) {
        self.settings.push((k.to_owned(), v.to_string()));
    }
    fn verdict(&mut self, v: impl Into<String>) {
        self.verdicts.push(v.into());
    }
    fn change(&mut self, v: impl Into<String>) {
        self.changes.push(v.into());
    }
}

type R<T> = Result<T, String>;

#[cfg_attr(not(any(feature = "redis", feature = "postgres", feature = "mysql")), allow(dead_code))]
fn now_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// `server_s` read between `before` and `after` (seconds since the epoch): (offset, ±) in ms.
#[cfg_attr(not(any(feature = "redis", feature = "postgres", feature = "mysql")), allow(dead_code))]
fn offset(before: f64, after: f64, server_s: f64) -> (f64, f64) {
    let mid = (before + after) / 2.0;
    (((server_s - mid) * 1e4).round() / 10.0, (((after - before) / 2.0) * 1e4).round() / 10.0)
}

#[cfg_attr(not(any(feature = "redis", feature = "etcd")), allow(dead_code))]
fn query_flag(url: &str, name: &str) -> Option<String> {
    let (_, q) = url.split_once('?')?;
    q.split('&').find_map(|p| {
        let (k, v) = p.split_once('=').unwrap_or((p, ""));
        (k == name).then(|| v.to_owned())
    })
}

pub async fn run(url: &str, locker: &Locker) -> R<Report> {
    let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or("");
    let mut r = Report::default();
    let limit = Duration::from_secs(20);
    let work = async {
        match scheme {
            #[cfg(feature = "redis")]
            "redis" | "rediss" => redis::redis(url, &mut r).await,
            #[cfg(feature = "redis")]
            "redlock" => redis::redlock(url, &mut r).await,
            #[cfg(feature = "postgres")]
            "postgres" | "postgresql" => postgres::postgres(url, &mut r).await,
            #[cfg(feature = "mysql")]
            "mysql" => mysql::mysql(url, &mut r).await,
            #[cfg(feature = "etcd")]
            "etcd" => etcd::etcd(url, locker, &mut r).await,
            #[cfg(feature = "zookeeper")]
            "zk" => zookeeper::zookeeper(url, &mut r).await,
            "sqlite" => {
                r.set("path", &url["sqlite://".len()..]);
                r.verdict(
                    "one machine only: processes on other hosts do not see these leases, even on \
                     a shared file system",
                );
                r.verdict(
                    "leases survive process and machine restarts in the file; a reboot frees \
                     them (boot id); fences survive power loss (synchronous=FULL)",
                );
                r.change("for exclusion across machines, use a networked store (postgres://, etcd://, redis://)");
                Ok(())
            }
            "file" => {
                r.set("dir", &url["file://".len()..]);
                r.verdict(
                    "one host, local file system only: flock on NFS or other network file \
                     systems does not exclude other hosts",
                );
                r.verdict("the holder's death releases its lock at once; fences survive in the lock files");
                Ok(())
            }
            other => Err(format!("doctor does not know the {other}:// store")),
        }
    };
    match tokio::time::timeout(limit, work).await {
        Ok(res) => res?,
        Err(_) => {
            return Err(format!("the store did not answer doctor's questions within {limit:?}"));
        }
    }
    if locker.guarantees().fence_repeat == leasehold::FenceRepeat::ClockBacked {
        fence_clock(&mut r);
    }
    Ok(r)
}

/// The clock-backed fences' assumption, and what doctor could check of it.
fn fence_clock(r: &mut Report) {
    r.verdict(format!(
        "fences are max(counter + 1, the store's clock in µs), so they never go back after a \
         restart or failover; this assumes that {}",
        leasehold::CLOCK_ASSUMPTION
    ));
    if let Some((o, u)) = r.clock
        && o.abs() > FAILOVER_CLOCK_SLACK_MS + u
    {
        r.verdict(format!(
            "the store's clock is {o:+.0} ms from this host's: one of the two is not kept by \
             NTP; a store server with a clock that far off could, after a failover, issue \
             fences below the last ones"
        ));
    }
}

/// How far behind the old primary a promoted server's clock may be before doctor warns: a
/// failover takes at least this long, and the clock-backed fences rely on it.
pub(super) const FAILOVER_CLOCK_SLACK_MS: f64 = 1000.0;

// ---------------------------------------------------------------------------- output

pub fn json(url: &str, locker: &Locker, r: &Report) -> Value {
    json!({
        "store": leasehold::redact(url),
        "guarantees": locker.guarantees(),
        "settings": r.settings.iter().map(|(k, v)| json!({ "setting": k, "value": v })).collect::<Vec<_>>(),
        "clock_offset_ms": r.clock.map(|(o, u)| json!({ "store_minus_local": o, "uncertainty": u })),
        "this_deployment": r.verdicts,
        "would_change_it": r.changes,
    })
}

pub fn text(url: &str, locker: &Locker, r: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "store: {}", leasehold::redact(url));
    let _ = writeln!(out, "\nthe backend promises:");
    for line in locker.guarantees().to_string().lines() {
        let _ = writeln!(out, "  {line}");
    }
    if !r.settings.is_empty() {
        let _ = writeln!(out, "\nthis deployment:");
        let w = r.settings.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        for (k, v) in &r.settings {
            let _ = writeln!(out, "  {k:<w$}  {v}");
        }
    }
    if let Some((o, u)) = r.clock {
        let _ = writeln!(
            out,
            "  {:<w$}  {o:+.1} ms (±{u:.1} ms); leasehold never compares the two clocks",
            "store clock − local clock",
            w = r.settings.iter().map(|(k, _)| k.len()).max().unwrap_or(0)
        );
    }
    let _ = writeln!(out, "\nwhat it guarantees:");
    for v in &r.verdicts {
        let _ = writeln!(out, "  - {v}");
    }
    if !r.changes.is_empty() {
        let _ = writeln!(out, "\nwhat would change it:");
        for c in &r.changes {
            let _ = writeln!(out, "  - {c}");
        }
    }
    out
}
