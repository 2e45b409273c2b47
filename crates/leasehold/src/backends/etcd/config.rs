//! The `etcd://` URL.

use crate::{Error, Result};

const DEFAULT_PREFIX: &str = "leasehold";

crate::url::option_keys! {
    /// The options an `etcd://` URL takes.
    enum OptionKey {
        Ttl = "ttl",
    }
}

/// Parsed `etcd://` URL.
#[derive(Debug, Clone)]
pub(super) struct Config {
    pub(super) endpoints: Vec<String>,
    pub(super) user: Option<(String, String)>,
    pub(super) prefix: String,
    /// The session lease's TTL, in whole seconds (`ttl=`, rounded up; 10 by default).
    pub(super) ttl_secs: i64,
    /// Whether `ttl=` was given.
    pub(super) ttl_given: bool,
}

pub(super) fn parse_url(url: &str) -> Result<Config> {
    let rest = url
        .strip_prefix("etcd://")
        .ok_or_else(|| Error::invalid(format!("{url:?} is not an etcd:// URL")))?;
    let rest = rest.split_once('?').map_or(rest, |(r, _)| r);
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
    let mut cfg = Config { endpoints, user, prefix, ttl_secs: 10, ttl_given: false };
    for crate::url::Opt { key, value: v, .. } in crate::url::options::<OptionKey>(url)?.1 {
        match key {
            OptionKey::Ttl => {
                // etcd leases count whole seconds: a fraction is rounded up, never down.
                let d = crate::url::duration_option(
                    "ttl",
                    v,
                    std::time::Duration::from_millis(1),
                    std::time::Duration::from_secs(3600),
                )?;
                cfg.ttl_secs = d.as_secs_f64().ceil() as i64;
                cfg.ttl_given = true;
            }
        }
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_and_options() {
        let c = parse_url("etcd://u:pw@h1:1,h2:2/app?ttl=2.5s").unwrap();
        assert_eq!(c.endpoints, ["http://h1:1", "http://h2:2"]);
        assert_eq!(c.user, Some(("u".into(), "pw".into())));
        assert_eq!((c.prefix.as_str(), c.ttl_secs), ("app", 3), "rounded up to whole seconds");
        let c = parse_url("etcd://h:1").unwrap();
        assert_eq!((c.prefix.as_str(), c.ttl_secs), (DEFAULT_PREFIX, 10));
        let cases = [
            ("etcd://h:1?tll=2s", "\"tll\""),
            ("etcd://h:1?ttl=2", "ttl=\"2\""),
            ("etcd://h:1?ttl=2h", "ttl=\"2h\""),
            ("etcd://h?ttl=2s", "no port"),
            ("etcd:///app", "names no etcd endpoint"),
            ("etcd://h:1?tll=2s", "valid options: ttl"),
        ];
        crate::url::assert_refused(parse_url, &cases);
    }
}
