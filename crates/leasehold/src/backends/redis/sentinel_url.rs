//! The `redis-sentinel://` URL ([`super::sentinel`]) and asking one sentinel for the
//! service's primary, with the credentials the URL gives the sentinels.

use std::time::Duration;

use super::options::Options;
use crate::{Error, Result};

crate::url::option_keys! {
    /// The options a `redis-sentinel://` URL takes.
    pub(crate) enum SentinelOption {
        Db = "db",
        Prefix = "prefix",
        SentinelAuth = "sentinel_auth",
        WaitReplicas = "wait_replicas",
        WaitTimeout = "wait_timeout",
        Horizon = "horizon",
    }
}

/// A `redis-sentinel://` URL, parsed.
#[derive(Debug, Clone)]
pub(crate) struct SentinelUrl {
    /// `host:port` of each sentinel.
    pub sentinels: Vec<String>,
    pub service: String,
    /// `user:pass@` (or empty), for the data nodes.
    pub auth: String,
    /// `user:pass@` for the sentinels: empty unless `sentinel_auth=url`.
    pub sentinel_auth: String,
    pub db: u32,
    pub opts: Options,
}

impl SentinelUrl {
    /// The `redis://` URL of the sentinel at `addr`.
    pub fn sentinel_url(&self, addr: &str) -> String {
        format!("redis://{}{addr}", self.sentinel_auth)
    }

    /// The `redis://` URL of the data node at `addr`.
    pub fn node_url(&self, addr: &str) -> String {
        format!("redis://{}{addr}/{}", self.auth, self.db)
    }
}

/// Parses a `redis-sentinel://` URL.
pub(crate) fn parse_url(url: &str) -> Result<SentinelUrl> {
    let (base, opts) = crate::url::options::<SentinelOption>(url)?;
    let mut db = 0u32;
    let mut sentinel_auth = false;
    // The options redis:// shares, checked by its own parser.
    let mut shared = Vec::new();
    for crate::url::Opt { key, value, text } in opts {
        match key {
            SentinelOption::Db => {
                db = value
                    .parse()
                    .map_err(|_| Error::invalid(format!("db={value:?} is not a database index")))?
            }
            SentinelOption::SentinelAuth => match value {
                "url" => sentinel_auth = true,
                "none" => sentinel_auth = false,
                _ => {
                    return Err(Error::invalid(format!(
                        "sentinel_auth={value:?}: \"url\" (the URL's user and password go to \
                         the sentinels too) or \"none\""
                    )));
                }
            },
            _ => shared.push(text),
        }
    }
    let (_, o) = super::parse_query(&format!("redis://x?{}", shared.join("&")))?;
    let rest = base
        .strip_prefix("redis-sentinel://")
        .ok_or_else(|| Error::invalid("a Redis Sentinel URL starts with redis-sentinel://"))?;
    let form = "redis-sentinel://S1:P1[,S2:P2…]/SERVICE";
    let (authority, service) = rest
        .split_once('/')
        .filter(|(_, s)| !s.is_empty() && !s.contains('/'))
        .ok_or_else(|| Error::invalid(format!("no service name: the form is {form}")))?;
    let (auth, hosts) = match authority.rsplit_once('@') {
        Some((a, h)) => (format!("{a}@"), h),
        None => (String::new(), authority),
    };
    let mut sentinels = Vec::new();
    for h in hosts.split(',') {
        let ok = h.rsplit_once(':').is_some_and(|(host, port)| {
            !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
        });
        if !ok {
            return Err(Error::invalid(format!(
                "redis-sentinel:// sentinel {h:?} is not HOST:PORT (form: {form})"
            )));
        }
        sentinels.push(h.to_owned());
    }
    if sentinel_auth && auth.is_empty() {
        return Err(Error::invalid("sentinel_auth=url, but the URL has no user or password"));
    }
    let sentinel_auth = if sentinel_auth { auth.clone() } else { String::new() };
    Ok(SentinelUrl { sentinels, service: service.to_owned(), auth, sentinel_auth, db, opts: o })
}

/// Why a sentinel did not name a primary.
pub(super) enum Unanswered {
    /// It refused this client's password (or lack of one): a configuration error.
    Refused(String),
    /// Anything else: ask the next.
    Other(String),
}

/// A sentinel's refusal of this client's authentication, as a configuration message.
fn refused(u: &SentinelUrl, sentinel: &str, e: &redis::RedisError) -> Option<String> {
    let noauth = e.code() == Some("NOAUTH");
    let wrong = e.kind() == redis::ErrorKind::AuthenticationFailed || e.code() == Some("WRONGPASS");
    if noauth && u.sentinel_auth.is_empty() {
        Some(format!(
            "sentinel {sentinel} requires a password (NOAUTH): add sentinel_auth=url to send \
             the URL's user and password to the sentinels too"
        ))
    } else if noauth || wrong {
        Some(format!("sentinel {sentinel} refused the URL's user or password ({e})"))
    } else {
        None
    }
}

/// Asks one sentinel for the service's primary (`host:port`), within `limit`.
pub(super) async fn ask_sentinel(
    u: &SentinelUrl,
    sentinel: &str,
    limit: Duration,
) -> std::result::Result<String, Unanswered> {
    let service = &u.service;
    let client = redis::Client::open(u.sentinel_url(sentinel))
        .map_err(|e| Unanswered::Other(e.to_string()))?;
    let ask = async {
        let mut c = client.get_multiplexed_async_connection().await?;
        redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(service)
            .query_async::<Option<(String, u16)>>(&mut c)
            .await
    };
    match tokio::time::timeout(limit, ask).await {
        Ok(Ok(Some((h, p)))) => Ok(format!("{h}:{p}")),
        Ok(Ok(None)) => {
            Err(Unanswered::Other(format!("sentinel {sentinel} does not monitor {service:?}")))
        }
        Ok(Err(e)) => Err(match refused(u, sentinel, &e) {
            Some(why) => Unanswered::Refused(why),
            None => Unanswered::Other(format!("sentinel {sentinel}: {e}")),
        }),
        Err(_) => {
            Err(Unanswered::Other(format!("sentinel {sentinel}: no answer within {limit:?}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u =
            parse_url("redis-sentinel://u:PW@a:1,b:2/svc?db=3&prefix=x:&wait_replicas=1").unwrap();
        assert_eq!(u.sentinels, ["a:1", "b:2"]);
        assert_eq!((u.service.as_str(), u.db, u.opts.prefix.as_str()), ("svc", 3, "x:"));
        assert_eq!(u.opts.wait_replicas, Some((1, Duration::from_millis(100))));
        assert_eq!(u.node_url("10.0.0.1:6379"), "redis://u:PW@10.0.0.1:6379/3");
        assert_eq!(parse_url("redis-sentinel://a:1/s").unwrap().node_url("h:1"), "redis://h:1/0");
        assert_eq!(u.sentinel_url("a:1"), "redis://a:1", "sentinels get no password by default");
        let u = parse_url("redis-sentinel://u:PW@a:1/svc?sentinel_auth=url").unwrap();
        assert_eq!(u.sentinel_url("a:1"), "redis://u:PW@a:1");
        for (url, named) in [
            ("redis-sentinel://a:1", "no service name"),
            ("redis-sentinel://a:1/", "no service name"),
            ("redis-sentinel://a/s", "HOST:PORT"),
            ("redis-sentinel://a:1/s?db=x", "db="),
            ("redis-sentinel://a:1/s?prefix={p}", "prefix"),
            ("redis-sentinel://a:1/s?wait_timeout=5", "wait_timeout"),
            ("redis-sentinel://a:1/s?tls_ca=/x", "valid options: db, prefix"),
            ("redis-sentinel://a:1/s?sentinel_auth=url", "no user or password"),
            ("redis-sentinel://:p@a:1/s?sentinel_auth=yes", "sentinel_auth="),
        ] {
            let m = parse_url(url).unwrap_err().to_string();
            assert!(m.contains(named), "{url}: {m}");
        }
    }
}
