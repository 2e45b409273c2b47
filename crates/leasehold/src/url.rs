//! Store URL syntax, the same for every store: the one duration syntax every option uses, a
//! store's options as typed keys (anything else refused before a connection is made), and
//! credentials kept out of every message ([`redact`]).

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

cfg_networked! {
    /// A duration option `name=value` within `[min, max]`, in the one syntax.
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
}

cfg_sql! {
    /// The SQL stores' `connect_timeout=`: a duration in the one syntax (`5s`, `500ms`), or
    /// whole seconds as libpq and the MySQL client take it (`5`), from 1 ms to 1 h.
    pub(crate) fn connect_timeout_option(v: &str) -> Result<Duration> {
        let (min, max) = (Duration::from_millis(1), Duration::from_secs(3600));
        if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
            return match v.parse::<u64>().ok().map(Duration::from_secs) {
                Some(d) if d >= min && d <= max => Ok(d),
                _ => Err(Error::invalid(format!(
                    "connect_timeout={v:?} is out of range ({} to {})",
                    show(min),
                    show(max)
                ))),
            };
        }
        duration_option("connect_timeout", v, min, max)
    }
}

fn show(d: Duration) -> String {
    if d.subsec_millis() != 0 || d.as_secs() == 0 {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}s", d.as_secs())
    }
}

/// Declares a store's URL option keys: an enum whose `FromStr` knows each key as written in
/// URLs, so [`options`] refuses any other in one place, naming the valid ones.
macro_rules! option_keys {
    (
        $(#[$m:meta])*
        $vis:vis enum $name:ident { $($(#[$vm:meta])* $var:ident = $key:literal),* $(,)? }
    ) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        $vis enum $name { $($(#[$vm])* $var),* }

        impl $crate::url::OptionKey for $name {
            const NAMES: &'static [&'static str] = &[$($key),*];
        }

        impl std::str::FromStr for $name {
            type Err = $crate::url::UnknownOption;
            fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
                match s {
                    $($key => Ok($name::$var),)*
                    _ => Err($crate::url::UnknownOption),
                }
            }
        }
    };
}
cfg_networked! {
    pub(crate) use option_keys;
}

cfg_any_store! {
    /// A key that is not one of a store's options.
    #[derive(Debug)]
    pub(crate) struct UnknownOption;
}

cfg_any_store! {
/// The option keys of one store's URLs (declared with `option_keys!`).
pub(crate) trait OptionKey: std::str::FromStr<Err = UnknownOption> + Copy + PartialEq {
    /// Every key, as written in URLs, for the message that refuses another.
    const NAMES: &'static [&'static str];
}
}

option_keys! {
    /// The options of a URL that takes none (every store now takes some; the tests' case).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) enum NoOption {}
}

cfg_networked! {
/// One option of a URL's query: its key, its value (`""` for a bare `?key`) and the
/// `key=value` text as written (for options passed on to a driver).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opt<'a, K> {
    pub key: K,
    pub value: &'a str,
    pub text: &'a str,
}
}

cfg_any_store! {
/// A URL's query split into typed options: the URL before the `?`, and each option. A key
/// the store does not take is refused here, naming it and the valid ones; each store's
/// parser refuses a bad value, naming the option.
pub(crate) fn options<K: OptionKey>(url: &str) -> Result<(&str, Vec<Opt<'_, K>>)> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let scheme = url.split_once("://").map_or("", |(s, _)| s);
    let mut out: Vec<Opt<'_, K>> = Vec::new();
    for text in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = text.split_once('=').unwrap_or((text, ""));
        let key = name.parse::<K>().map_err(|_| {
            let valid = if K::NAMES.is_empty() { "none".to_owned() } else { K::NAMES.join(", ") };
            Error::invalid(format!(
                "unknown option {name:?} for {scheme}:// URLs; valid options: {valid}"
            ))
        })?;
        // Which one would win differs between leasehold and the drivers it passes options
        // to (the first, the last): a store URL says each thing once.
        if let Some(first) = out.iter().find(|o| o.key == key) {
            return Err(Error::invalid(format!(
                "option {name:?} is given twice in the {scheme}:// URL ({:?} and {:?}); \
                 give it once",
                first.value, value
            )));
        }
        out.push(Opt { key, value, text });
    }
    Ok((base, out))
}
}

cfg_sql! {
    /// `base` with the options in `keep` (as written) put back, for a driver's own parser.
    pub(crate) fn with_query<K>(base: &str, keep: &[Opt<'_, K>]) -> String {
        let keep: Vec<&str> = keep.iter().map(|o| o.text).collect();
        if keep.is_empty() { base.to_owned() } else { format!("{base}?{}", keep.join("&")) }
    }
}

cfg_sql! {
    /// `value` as one of `choices` (`(text, meaning)`), or an error naming option `name` and
    /// the choices.
    pub(crate) fn choice<T: Copy>(name: &str, value: &str, choices: &[(&str, T)]) -> Result<T> {
        match choices.iter().find(|(c, _)| *c == value) {
            Some((_, t)) => Ok(*t),
            None => {
                let valid = choices.iter().map(|(c, _)| *c).collect::<Vec<_>>().join(", ");
                Err(Error::invalid(format!("{name}={value:?}: expected one of {valid}")))
            }
        }
    }
}

cfg_sql! {
    /// An SQL identifier option (`table=`, `schema=`): 1 to `max` ASCII letters, digits or
    /// `_`, not starting with a digit (so it is written into statements unquoted, safely).
    pub(crate) fn identifier(name: &str, v: &str, max: usize) -> Result<String> {
        let ok = !v.is_empty()
            && v.len() <= max
            && !v.starts_with(|c: char| c.is_ascii_digit())
            && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if ok {
            Ok(v.to_owned())
        } else {
            Err(Error::invalid(format!(
                "{name}={v:?}: use 1-{max} ASCII letters, digits or '_', not starting with a digit"
            )))
        }
    }
}

/// The parts of `scheme://[userinfo@]hosts[/path][?query]`, the syntax every store URL
/// shares: the scheme, the userinfo with its `@` (or `""`), the hosts, and the rest (path
/// and query, or `""`).
#[cfg_attr(not(feature = "tools"), allow(dead_code))]
pub(crate) fn authority(url: &str) -> (&str, &str, &str, &str) {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (userinfo, hosts) = match rest[..end].rfind('@') {
        Some(at) => rest[..end].split_at(at + 1),
        None => ("", &rest[..end]),
    };
    (scheme, userinfo, hosts, &rest[end..])
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

/// For each `(url, named)`, that `parse` refuses `url` with a message containing `named` (the
/// option, its value, the valid options): the option tests of every store with options.
#[cfg(all(test, feature = "_networked"))]
pub(crate) fn assert_refused<T: std::fmt::Debug>(
    parse: impl Fn(&str) -> Result<T>,
    cases: &[(&str, &str)],
) {
    for (url, named) in cases {
        let m = parse(url).unwrap_err().to_string();
        assert!(m.contains(named), "{url}: {m}");
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
    fn authorities() {
        assert_eq!(authority("redis://u:PW@h:1/2?x=y"), ("redis", "u:PW@", "h:1", "/2?x=y"));
        assert_eq!(authority("etcd://h1:1,h2:2"), ("etcd", "", "h1:1,h2:2", ""));
        assert_eq!(authority("zk://h:1?session=2s"), ("zk", "", "h:1", "?session=2s"));
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

    option_keys! {
        enum Demo {
            Prefix = "prefix",
            WaitReplicas = "wait_replicas",
        }
    }

    #[test]
    fn options_are_typed_and_unknown_ones_refused() {
        let (base, got) = options::<Demo>("redis://h:1?prefix=a:&wait_replicas").unwrap();
        assert_eq!(base, "redis://h:1");
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].key, got[0].value, got[0].text), (Demo::Prefix, "a:", "prefix=a:"));
        assert_eq!((got[1].key, got[1].value), (Demo::WaitReplicas, ""));
        let m = options::<Demo>("redis://h:1?wait_replica=1").unwrap_err().to_string();
        assert!(m.contains("\"wait_replica\" for redis://"), "{m}");
        assert!(m.contains("valid options: prefix, wait_replicas"), "{m}");
        let m = options::<NoOption>("sqlite:///x.db?bogus=1").unwrap_err().to_string();
        assert!(m.contains("\"bogus\"") && m.contains("valid options: none"), "{m}");
        assert!(options::<NoOption>("sqlite:///x.db").unwrap().1.is_empty());
        let (base, kept) = options::<Demo>("redis://h?prefix=a&wait_replicas=1").unwrap();
        assert_eq!(with_query(base, &kept[1..]), "redis://h?wait_replicas=1");
        assert_eq!(with_query::<Demo>(base, &[]), "redis://h");
        assert!(!choice("fence", "none", &[("table", true), ("none", false)]).unwrap());
        let m = choice("fence", "nope", &[("table", true), ("none", false)]).unwrap_err();
        assert!(m.to_string().contains("fence=\"nope\": expected one of table, none"), "{m}");
    }
}
