//! The `redis-cluster://` URL ([`super::cluster`]) and the cluster client its seeds make,
//! for the store, its shard subscriber and its probe.

use std::time::Duration;

use redis::cluster::ClusterClientBuilder;

use crate::backends::Limits;
use crate::{Error, Result};

crate::url::option_keys! {
    /// The options a `redis-cluster://` URL takes.
    pub(crate) enum ClusterOption {
        Prefix = "prefix",
        Horizon = "horizon",
    }
}

/// A `redis-cluster://` URL, parsed.
#[derive(Debug, Clone)]
pub(crate) struct ClusterUrl {
    /// `redis://[user:pass@]host:port` per seed.
    pub seeds: Vec<String>,
    pub prefix: String,
    /// How long a key's fence counter outlives its last grant (`crate::horizon`).
    pub horizon: Duration,
    /// `user:pass@` (or empty), for every node.
    #[cfg_attr(not(feature = "tools"), allow(dead_code))]
    pub auth: String,
}

/// Parses a `redis-cluster://` URL: at least one `host:port` seed, no database (a cluster has
/// only database 0), typed options.
pub(crate) fn parse_url(url: &str) -> Result<ClusterUrl> {
    let (base, opts) = crate::url::options::<ClusterOption>(url)?;
    let mut prefix = "leasehold:".to_owned();
    let mut horizon = crate::horizon::DEFAULT_HORIZON;
    for crate::url::Opt { key, value, .. } in opts {
        match key {
            ClusterOption::Prefix => {
                if value.contains(['{', '}']) {
                    return Err(Error::invalid("redis prefix must not contain '{' or '}'"));
                }
                prefix = value.to_owned();
            }
            ClusterOption::Horizon => horizon = crate::horizon::horizon_option(value)?,
        }
    }
    let rest = base
        .strip_prefix("redis-cluster://")
        .ok_or_else(|| Error::invalid("a Redis Cluster URL starts with redis-cluster://"))?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    if !path.is_empty() {
        return Err(Error::invalid(format!(
            "redis-cluster:// takes no database (a cluster has only database 0), got /{path}"
        )));
    }
    let (auth, hosts) = match authority.rsplit_once('@') {
        Some((a, h)) => (format!("{a}@"), h),
        None => (String::new(), authority),
    };
    let mut seeds = Vec::new();
    for h in hosts.split(',') {
        let ok = h.rsplit_once(':').is_some_and(|(host, port)| {
            !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
        });
        if !ok {
            return Err(Error::invalid(format!(
                "redis-cluster:// seed {h:?} is not HOST:PORT (form: \
                 redis-cluster://HOST:PORT[,HOST:PORT…])"
            )));
        }
        seeds.push(format!("redis://{auth}{h}"));
    }
    Ok(ClusterUrl { seeds, prefix, auth, horizon })
}

/// The cluster client for `seeds`: connections bounded by the connect limit, no response
/// timeout of its own (the caller's op timeout bounds every request, and a long renewal must
/// not turn the requests behind it into unknown outcomes), retries on MOVED/ASK/TRYAGAIN and
/// broken connections as redis-rs does (each bounded by the op timeout around it).
pub(super) fn builder(seeds: &[String], limits: Limits) -> ClusterClientBuilder {
    ClusterClientBuilder::new(seeds.to_vec())
        .connection_timeout(limits.connect)
        .response_timeout(Duration::from_secs(3600))
        .retries(8)
        .max_retry_wait(500)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = parse_url("redis-cluster://u:PW@a:1,b:2?prefix=x:").unwrap();
        assert_eq!(u.seeds, ["redis://u:PW@a:1", "redis://u:PW@b:2"]);
        assert_eq!(u.prefix, "x:");
        assert_eq!(parse_url("redis-cluster://a:1").unwrap().prefix, "leasehold:");
        for (url, named) in [
            ("redis-cluster://a:1/2", "database"),
            ("redis-cluster://a", "HOST:PORT"),
            ("redis-cluster://a:1,", "HOST:PORT"),
            ("redis-cluster://a:x", "HOST:PORT"),
            ("redis-cluster://a:1?prefix={p}", "prefix"),
            ("redis-cluster://a:1?wait_replicas=1", "valid options: prefix"),
        ] {
            let m = parse_url(url).unwrap_err().to_string();
            assert!(m.contains(named), "{url}: {m}");
        }
    }
}
