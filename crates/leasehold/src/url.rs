//! Store URLs: the one duration syntax every option uses, the options each store accepts
//! (anything else is refused before a connection is made), and credentials kept out of
//! every message ([`redact`]).

use std::time::Duration;

use crate::{Error, Result};

/// Parses a duration in the one syntax every option and the CLI use: `500ms`, `30s`, `2m`,
/// `1h`, combinations such as `1m30s`, decimals such as `1.5s`, and a bare `0`. Anything else
/// (a bare number, an unknown unit, a negative or absurdly long value) is
/// [`Error::InvalidInput`] saying what is wrong.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(leasehold::parse_duration("1m30s").unwrap(), Duration::from_secs(90));
/// assert!(leasehold::parse_duration("5000").is_err());
/// ```
pub fn parse_duration(s: &str) -> Result<Duration> {
    let bad = |why: &str| {
        Error::invalid(format!("{s:?} is not a duration ({why}; use e.g. 500ms, 30s, 2m, 1h)"))
    };
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(bad("empty"));
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(rest.len());
        let (num, tail) = rest.split_at(digits);
        if num.is_empty() {
            return Err(bad("expected a number"));
        }
        let unit_len = tail.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(bad("missing unit")),
            _ => return Err(bad(&format!("unknown unit {unit:?}"))),
        };
        let n: f64 = num.parse().map_err(|_| bad("bad number"))?;
        let secs = n * scale;
        if !secs.is_finite() || secs > 1e10 {
            return Err(bad("too long"));
        }
        total += Duration::from_secs_f64(secs);
        rest = tail;
    }
    Ok(total)
}

/// A duration option `name=value` within `[min, max]`, in the one syntax.
#[cfg_attr(
    not(any(
        feature = "redis",
        feature = "postgres",
        feature = "mysql",
        feature = "etcd",
        feature = "zookeeper"
    )),
    allow(dead_code)
)]
pub(crate) fn duration_option(
    name: &str,
    v: &str,
    min: Duration,
    max: Duration,
) -> Result<Duration> {
    let d = parse_duration(v).map_err(|e| match e {
        Error::InvalidInput(m) => Error::invalid(format!("{name}={v:?}: {m}")),
        other => other,
    })?;
    if d < min || d > max {
        return Err(Error::invalid(format!(
            "{name}={v:?} is out of range ({} to {})",
            show(min),
            show(max)
        )));
    }
    Ok(d)
}

fn show(d: Duration) -> String {
    if d.subsec_millis() != 0 || d.as_secs() == 0 {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}s", d.as_secs())
    }
}

/// Refuses an option the store does not take (`known` lists the ones it does), naming it
/// and listing the valid ones.
pub(crate) fn check_options(url: &str, scheme: &str, known: &[&str]) -> Result<()> {
    let query = url.split_once('?').map_or("", |(_, q)| q);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let name = pair.split_once('=').map_or(pair, |(k, _)| k);
        if !known.contains(&name) {
            let valid = if known.is_empty() { "none".to_owned() } else { known.join(", ") };
            return Err(Error::invalid(format!(
                "unknown option {name:?} for {scheme}:// URLs; valid options: {valid}"
            )));
        }
    }
    Ok(())
}

/// The value of option `name` (`?name=value`; a bare `?name` is ""), if given.
pub(crate) fn option_of<'a>(url: &'a str, name: &str) -> Option<&'a str> {
    let (_, q) = url.split_once('?')?;
    q.split('&').find_map(|p| match p.split_once('=') {
        Some((k, v)) if k == name => Some(v),
        None if p == name => Some(""),
        _ => None,
    })
}

/// The password a store URL carries, in its userinfo (`scheme://user:PASS@host`) or in a
/// `password=` option, if any.
pub(crate) fn secret(url: &str) -> Option<String> {
    let from_userinfo = url.split_once("://").and_then(|(_, rest)| {
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (userinfo, _) = rest[..end].rsplit_once('@')?;
        userinfo.split_once(':').map(|(_, p)| p.to_owned())
    });
    let from_query = url.split_once('?').and_then(|(_, q)| {
        q.split('&').find_map(|p| p.strip_prefix("password=")).map(str::to_owned)
    });
    from_userinfo.or(from_query).filter(|p| !p.is_empty())
}

/// `url` with its password (in the userinfo or a `password=` option) replaced by `***`, for
/// every message, log line and report that names a store.
///
/// ```
/// assert_eq!(
///     leasehold::redact("redis://app:s3cret@10.0.0.7:6379/2?prefix=x:"),
///     "redis://app:***@10.0.0.7:6379/2?prefix=x:"
/// );
/// assert_eq!(
///     leasehold::redact("postgres://app@db/app?password=s3cret&mode=session"),
///     "postgres://app@db/app?password=***&mode=session"
/// );
/// ```
pub fn redact(url: &str) -> String {
    let Some(secret) = secret(url) else { return url.to_owned() };
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = match rest[..end].rsplit_once('@') {
        Some((userinfo, hosts)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{hosts}"),
            None => rest[..end].to_owned(),
        },
        None => rest[..end].to_owned(),
    };
    let tail = rest[end..]
        .split('&')
        .map(|p| match p.split_once("password=") {
            Some((head, _)) if head.is_empty() || head.ends_with('?') => {
                format!("{head}password=***")
            }
            _ => p.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("&");
    let out = format!("{scheme}://{authority}{tail}");
    // Whatever form it took, the secret itself never survives.
    out.replace(&secret, "***")
}

/// The kinds of store URL leasehold knows, built into this build or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Scheme {
    /// `sqlite://PATH`, the embedded default.
    Sqlite,
    /// `file://DIR`, `flock(2)` session locks.
    File,
    /// `redis://`.
    Redis,
    /// `rediss://` (TLS).
    Rediss,
    /// `redlock://H1,H2,H3…`.
    Redlock,
    /// `postgres://` (also spelled `postgresql://`).
    Postgres,
    /// `mysql://` (MySQL and MariaDB).
    Mysql,
    /// `etcd://`.
    Etcd,
    /// `zk://` (ZooKeeper).
    Zk,
}

impl Scheme {
    /// The scheme as written in URLs.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Sqlite => "sqlite",
            Scheme::File => "file",
            Scheme::Redis => "redis",
            Scheme::Rediss => "rediss",
            Scheme::Redlock => "redlock",
            Scheme::Postgres => "postgres",
            Scheme::Mysql => "mysql",
            Scheme::Etcd => "etcd",
            Scheme::Zk => "zk",
        }
    }

    fn of(s: &str) -> Option<Scheme> {
        Some(match s {
            "sqlite" => Scheme::Sqlite,
            "file" => Scheme::File,
            "redis" => Scheme::Redis,
            "rediss" => Scheme::Rediss,
            "redlock" => Scheme::Redlock,
            "postgres" | "postgresql" => Scheme::Postgres,
            "mysql" => Scheme::Mysql,
            "etcd" => Scheme::Etcd,
            "zk" => Scheme::Zk,
            _ => return None,
        })
    }
}

/// A store URL, parsed once: its [`Scheme`] and options, checked as the store checks them
/// (unknown options refused, with the valid ones named). `Display` and `Debug` redact the
/// password; [`StoreUrl::expose`] gives the text that connects.
///
/// ```
/// use leasehold::{Scheme, StoreUrl};
/// let url: StoreUrl = "sqlite:///tmp/locks.db".parse().unwrap();
/// assert_eq!(url.scheme(), Scheme::Sqlite);
/// assert!("sqlite:///tmp/locks.db?bogus=1".parse::<StoreUrl>().is_err());
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct StoreUrl {
    raw: String,
    scheme: Scheme,
}

impl StoreUrl {
    /// Parses and checks `url`. A scheme this build lacks is an error naming the cargo
    /// feature that builds it in.
    pub fn parse(url: &str) -> Result<StoreUrl> {
        crate::backends::check(url)?;
        let scheme = url.split_once("://").and_then(|(s, _)| Scheme::of(s));
        let scheme = scheme.ok_or_else(|| Error::invalid("unknown store URL scheme"))?;
        Ok(StoreUrl { raw: url.to_owned(), scheme })
    }

    /// The kind of store.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The value of option `name` (`?name=value`), if given.
    pub fn option(&self, name: &str) -> Option<&str> {
        option_of(&self.raw, name)
    }

    /// Duration option `name` in the one syntax ([`parse_duration`]), if given.
    pub fn duration(&self, name: &str) -> Result<Option<Duration>> {
        self.option(name).map(parse_duration).transpose()
    }

    /// The URL with its credentials, to connect with. Never print it: print the `StoreUrl`.
    pub fn expose(&self) -> &str {
        &self.raw
    }
}

impl std::str::FromStr for StoreUrl {
    type Err = Error;
    fn from_str(s: &str) -> Result<StoreUrl> {
        StoreUrl::parse(s)
    }
}

impl std::fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&redact(&self.raw))
    }
}

impl std::fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoreUrl({:?})", redact(&self.raw))
    }
}

impl Error {
    /// This error with `secret` replaced by `***` in every message, and a source whose text
    /// contains it replaced by that text, scrubbed.
    pub(crate) fn scrubbed(self, secret: &str) -> Error {
        let s = |m: String| m.replace(secret, "***");
        let src = |e: Option<crate::BoxError>| {
            e.map(|e| {
                let text = e.to_string();
                if text.contains(secret) { s(text).into() } else { e }
            })
        };
        match self {
            Error::InvalidInput(m) => Error::InvalidInput(s(m)),
            Error::Unavailable { message, source } => {
                Error::Unavailable { message: s(message), source: src(source) }
            }
            Error::UnknownOutcome(m) => Error::UnknownOutcome(s(m)),
            Error::Config { message, source } => {
                Error::Config { message: s(message), source: src(source) }
            }
            Error::Backend { backend, message, source } => {
                Error::Backend { backend, message: s(message), source: src(source) }
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        for bad in ["", "5", "5x", "s", "ms", "-1s", "1..2s", "forever", "1e400s", "99999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        let e = duration_option("ttl", "1h30m", Duration::from_secs(1), Duration::from_secs(3600));
        assert!(e.unwrap_err().to_string().contains("out of range (1s to 3600s)"));
    }

    #[test]
    fn redaction() {
        for (url, want) in [
            ("redis://u:PW@127.0.0.1:99999", "redis://u:***@127.0.0.1:99999"),
            ("redis://:PW@h:1/0", "redis://:***@h:1/0"),
            ("mysql://root:PW@h:3306/db?mode=session", "mysql://root:***@h:3306/db?mode=session"),
            ("etcd://u:PW@h1:1,h2:2/pfx?ttl=2s", "etcd://u:***@h1:1,h2:2/pfx?ttl=2s"),
            ("postgres://u@h/db?password=PW", "postgres://u@h/db?password=***"),
            (
                "postgres://u@h/db?sslmode=disable&password=PW",
                "postgres://u@h/db?sslmode=disable&password=***",
            ),
            ("sqlite:///tmp/x.db", "sqlite:///tmp/x.db"),
            ("redis://u@h:1", "redis://u@h:1"),
        ] {
            assert_eq!(redact(url), want, "{url}");
            assert!(!redact(url).contains("PW"));
        }
        let e = Error::unavailable("cannot reach redis://u:PW@h", Some("auth PW refused".into()));
        let e = e.scrubbed("PW");
        assert!(!format!("{e} {:?}", std::error::Error::source(&e)).contains("PW"));
    }

    #[test]
    #[cfg(all(feature = "redis", feature = "postgres"))]
    fn store_urls() {
        let u = StoreUrl::parse("redis://u:PW@127.0.0.1:1?prefix=a:&wait_timeout=1s").unwrap();
        assert_eq!(u.scheme(), Scheme::Redis);
        assert_eq!(u.option("prefix"), Some("a:"));
        assert_eq!(u.duration("wait_timeout").unwrap(), Some(Duration::from_secs(1)));
        assert_eq!(u.duration("absent").unwrap(), None);
        assert!(!format!("{u} {u:?}").contains("PW"));
        assert!(u.expose().contains("PW"));
        assert!(StoreUrl::parse("redis://h:1?wait_replica=1").is_err());
        assert!(StoreUrl::parse("nope://x").is_err());
        assert_eq!(StoreUrl::parse("postgresql://u@h/db").unwrap().scheme(), Scheme::Postgres);
    }

    #[test]
    #[cfg(feature = "sqlite")]
    fn store_urls_of_the_default_build() {
        assert_eq!(StoreUrl::parse("sqlite:///x.db").unwrap().scheme(), Scheme::Sqlite);
        assert!(StoreUrl::parse("sqlite:///x.db?bogus=1").is_err());
        let missing = StoreUrl::parse("nope://x").unwrap_err().to_string();
        assert!(missing.contains("unknown store URL scheme"), "{missing}");
    }

    #[test]
    fn options() {
        let only = &["prefix", "wait_replicas"];
        assert!(check_options("redis://h:1?prefix=a:", "redis", only).is_ok());
        let e = check_options("redis://h:1?wait_replica=1", "redis", only).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("\"wait_replica\"") && m.contains("prefix, wait_replicas"), "{m}");
        let none: &[&str] = &[];
        assert!(check_options("sqlite:///x.db?bogus=1", "sqlite", none).is_err());
        assert!(check_options("sqlite:///x.db", "sqlite", none).is_ok());
    }
}
