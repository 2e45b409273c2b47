//! The `etcd://` URL.

use crate::{Error, Result};

const DEFAULT_PREFIX: &str = "leasehold";

/// Parsed `etcd://` URL.
#[derive(Debug, Clone)]
pub(super) struct Config {
    pub(super) endpoints: Vec<String>,
    pub(super) user: Option<(String, String)>,
    pub(super) prefix: String,
    pub(super) ttl_secs: i64,
}

pub(super) fn parse_url(url: &str) -> Result<Config> {
    let rest = url
        .strip_prefix("etcd://")
        .ok_or_else(|| Error::invalid(format!("{url:?} is not an etcd:// URL")))?;
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (auth_hosts, prefix) = match rest.split_once('/') {
        Some((h, p)) => (h, p.trim_end_matches('/').to_owned()),
        None => (rest, DEFAULT_PREFIX.to_owned()),
    };
    let (user, hosts) = match auth_hosts.rsplit_once('@') {
        Some((u, h)) => {
            let (name, pass) = u.split_once(':').unwrap_or((u, ""));
            (Some((name.to_owned(), pass.to_owned())), h)
        }
        None => (None, auth_hosts),
    };
    let endpoints: Vec<String> = hosts
        .split(',')
        .filter(|h| !h.is_empty())
        .map(|h| {
            if h.contains(':') {
                Ok(format!("http://{h}"))
            } else {
                Err(Error::invalid(format!("etcd endpoint {h:?} has no port (HOST:PORT)")))
            }
        })
        .collect::<Result<_>>()?;
    if endpoints.is_empty() {
        return Err(Error::invalid(format!("{url:?} names no etcd endpoint (etcd://HOST:PORT)")));
    }
    let mut cfg = Config { endpoints, user, prefix, ttl_secs: 10 };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "ttl" => {
                // etcd leases count whole seconds: a fraction is rounded up, never down.
                let d = crate::url::duration_option(
                    "ttl",
                    v,
                    std::time::Duration::from_millis(1),
                    std::time::Duration::from_secs(3600),
                )?;
                cfg.ttl_secs = d.as_secs_f64().ceil() as i64;
            }
            _ => return Err(Error::invalid(format!("unknown etcd URL option {k:?} (known: ttl)"))),
        }
    }
    Ok(cfg)
}
