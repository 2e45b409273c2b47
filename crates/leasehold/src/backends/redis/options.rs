//! The options of a `redis://`, `rediss://` and `redlock://` URL: its keys, parsed once into
//! [`Options`], and the URL the driver sees (leasehold's options removed): together a
//! [`RedisUrl`], the single server's configuration; a [`RedlockUrl`] is its instances and
//! the same options.

use std::time::Duration;

use crate::{Error, Result};

crate::url::option_keys! {
    /// The options a `redis://` (and `redlock://`) URL takes: leasehold's, and redis-rs's
    /// `protocol`; `rediss://` also takes `tls_ca`.
    pub(crate) enum OptionKey {
        Prefix = "prefix",
        WaitReplicas = "wait_replicas",
        WaitTimeout = "wait_timeout",
        Protocol = "protocol",
        TlsCa = "tls_ca",
        Horizon = "horizon",
    }
}

/// Options read from the URL's query string (and removed before the driver sees it).
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub prefix: String,
    pub wait_replicas: Option<(u32, Duration)>,
    /// PEM file of the CA that signed the server's certificate (`rediss://` only).
    pub tls_ca: Option<std::path::PathBuf>,
    /// How long a key's fence counter outlives its last grant or renewal (`horizon=`,
    /// [`crate::horizon`]).
    pub horizon: Duration,
}

/// A `redis://` or `rediss://` URL, parsed once.
#[derive(Clone)]
pub(crate) struct RedisUrl {
    /// The URL the driver connects with: leasehold's options removed, credentials kept.
    pub base: String,
    /// leasehold's options.
    pub opts: Options,
}

impl RedisUrl {
    /// Parses a `redis://` or `rediss://` URL (see [`parse_query`]).
    pub(crate) fn parse(url: &str) -> Result<RedisUrl> {
        let (base, opts) = parse_query(url)?;
        Ok(RedisUrl { base, opts })
    }

    /// Whether it asks for TLS (`rediss://`).
    pub(crate) fn tls(&self) -> bool {
        self.base.starts_with("rediss://")
    }
}

/// A `redlock://` URL, parsed once: its instances and the options `redis://` takes.
#[derive(Clone)]
pub(crate) struct RedlockUrl {
    /// `[user:pass@]host:port` of each instance.
    pub hosts: Vec<String>,
    pub opts: Options,
}

impl RedlockUrl {
    /// Parses `redlock://H1:P1,H2:P2,H3:P3[?…]`: at least 3 instances.
    pub(crate) fn parse(url: &str) -> Result<RedlockUrl> {
        let (base, opts) = parse_query(url)?;
        let hosts = base.strip_prefix("redlock://").unwrap_or(&base);
        let hosts: Vec<String> = hosts
            .split(',')
            .filter(|h| !h.is_empty())
            .map(|h| h.trim_end_matches('/').to_owned())
            .collect();
        if hosts.len() < 3 {
            return Err(Error::invalid(format!(
                "redlock needs at least 3 instances, got {} in {:?}",
                hosts.len(),
                crate::redact(url)
            )));
        }
        Ok(RedlockUrl { hosts, opts })
    }
}

/// The URL for the driver (leasehold's options removed) and leasehold's options.
pub(crate) fn parse_query(url: &str) -> Result<(String, Options)> {
    let (base, query) = crate::url::options::<OptionKey>(url)?;
    let mut keep = Vec::new();
    let mut opts = Options {
        prefix: "leasehold:".into(),
        wait_replicas: None,
        tls_ca: None,
        horizon: crate::horizon::DEFAULT_HORIZON,
    };
    let mut wait_n = None;
    let mut wait_t = Duration::from_millis(100);
    for opt in query {
        let crate::url::Opt { key, value: v, .. } = opt;
        match key {
            OptionKey::Prefix => {
                if v.contains(['{', '}']) {
                    return Err(Error::invalid("redis prefix must not contain '{' or '}'"));
                }
                opts.prefix = v.to_owned();
            }
            OptionKey::TlsCa if !base.starts_with("rediss://") => {
                return Err(Error::invalid(
                    "option \"tls_ca\" is for rediss:// (TLS) URLs only; valid options: prefix, \
                     wait_replicas, wait_timeout, protocol, horizon",
                ));
            }
            OptionKey::TlsCa => opts.tls_ca = Some(v.into()),
            OptionKey::WaitReplicas => {
                wait_n = Some(v.parse::<u32>().map_err(|_| {
                    Error::invalid(format!("wait_replicas={v:?} is not a replica count"))
                })?)
            }
            OptionKey::WaitTimeout => {
                // WAIT takes whole milliseconds: a fraction is rounded up.
                let d = crate::url::duration_option(
                    "wait_timeout",
                    v,
                    Duration::from_millis(1),
                    Duration::from_secs(60),
                )?;
                wait_t = Duration::from_millis(d.as_micros().div_ceil(1000) as u64);
            }
            OptionKey::Horizon => opts.horizon = crate::horizon::horizon_option(v)?,
            OptionKey::Protocol => keep.push(opt),
        }
    }
    opts.wait_replicas = wait_n.filter(|n| *n > 0).map(|n| (n, wait_t));
    Ok((crate::url::with_query(base, &keep), opts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_options() {
        let (b, o) = parse_query(
            "redis://h:1/2?prefix=app:&wait_replicas=1&wait_timeout=50ms&protocol=resp3",
        )
        .unwrap();
        assert_eq!(b, "redis://h:1/2?protocol=resp3");
        assert_eq!(o.prefix, "app:");
        assert_eq!(o.wait_replicas, Some((1, Duration::from_millis(50))));
        assert_eq!(o.horizon, crate::horizon::DEFAULT_HORIZON);
        let (_, o) = parse_query("redis://h?horizon=90s").unwrap();
        assert_eq!(o.horizon, Duration::from_secs(90));
        assert!(parse_query("redis://h?wait_replicas=x").is_err());
        assert!(parse_query("redis://h?prefix={x}").is_err());
        let (b, o) = parse_query("redis://h").unwrap();
        assert_eq!(
            (b.as_str(), o.prefix.as_str(), o.wait_replicas),
            ("redis://h", "leasehold:", None)
        );
    }

    /// Each option's bad values are refused at parse time, naming the option.
    #[test]
    fn bad_options_are_named() {
        let (_, o) = parse_query("rediss://h:1?tls_ca=/etc/ca.pem&wait_replicas=0").unwrap();
        assert_eq!(o.tls_ca.as_deref(), Some(std::path::Path::new("/etc/ca.pem")));
        assert_eq!(o.wait_replicas, None, "0 replicas: no WAIT");
        let (_, o) = parse_query("redis://h?wait_replicas=2&wait_timeout=1.5ms").unwrap();
        assert_eq!(o.wait_replicas, Some((2, Duration::from_millis(2))), "rounded up to whole ms");
        let cases = [
            ("redis://h?wait_replicas=x", "wait_replicas"),
            ("redis://h?wait_replicas=-1", "wait_replicas"),
            ("redis://h?wait_timeout=5", "wait_timeout"),
            ("redis://h?wait_timeout=2m", "wait_timeout"),
            ("redis://h?prefix=a{b", "prefix"),
            ("redis://h?tls_ca=/ca.pem", "tls_ca"),
            ("redlock://h:1,h:2?tls_ca=/ca.pem", "tls_ca"),
            ("redis://h?wait_replica=1", "wait_replica"),
            ("redis://h?bogus", "prefix, wait_replicas, wait_timeout, protocol, tls_ca, horizon"),
            ("redis://h?horizon=500ms", "horizon"),
        ];
        crate::url::assert_refused(parse_query, &cases);
    }
}
