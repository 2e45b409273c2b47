//! The registry: the one list of stores and their URL schemes, built in or not, and the
//! typed [`StoreUrl`] a URL is parsed into once, which knows its store's descriptor. Opening
//! a URL, probing a deployment, the URL forms in messages and the option checks all come
//! from here. Adding a store: its folder under `backends/`, and one line in `stores!` below.

use std::sync::Arc;
use std::time::Duration;

use crate::backends::Descriptor;
use crate::limits::{Limits, within};
use crate::probe::findings::Probe;
use crate::url::{redact, secret};
use crate::{Error, Result, Store};

/// One line per store: the `Scheme` variant, its URL schemes, the cargo feature that builds
/// it in, the `cfg` it needs, and its descriptor. A store compiled out keeps its line (so a
/// URL naming it is told which feature to enable), without its descriptor.
macro_rules! stores {
    ($(
        $(#[$doc:meta])*
        $variant:ident [$($scheme:literal),+] feature $feature:literal if ($($cfg:tt)+) => $store:path,
    )+) => {
        /// The kinds of store URL leasehold knows, built into this build or not.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Scheme {
            $($(#[$doc])* $variant,)+
        }

        /// Every store leasehold knows, in the order messages list them.
        const STORES: &[Entry] = &[$(
            Entry {
                scheme: Scheme::$variant,
                schemes: &[$($scheme),+],
                feature: $feature,
                #[cfg($($cfg)+)]
                descriptor: Some(&$store),
                #[cfg(not($($cfg)+))]
                descriptor: None,
            },
        )+];
    };
}

stores! {
    /// `sqlite://PATH`, the embedded default.
    Sqlite ["sqlite"] feature "sqlite" if (feature = "sqlite") => crate::backends::sqlite::STORE,
    /// `file://DIR`, `flock(2)` session locks (Linux).
    File ["file"] feature "file" if (all(feature = "file", target_os = "linux"))
        => crate::backends::file::STORE,
    /// `redis://`.
    Redis ["redis"] feature "redis" if (feature = "redis") => crate::backends::redis::STORE,
    /// `rediss://` (TLS).
    Rediss ["rediss"] feature "redis-tls" if (feature = "redis-tls")
        => crate::backends::redis::TLS_STORE,
    /// `redis-cluster://H:P[,H:P…]` (Redis Cluster; the hosts are seeds).
    RedisCluster ["redis-cluster"] feature "redis" if (feature = "redis")
        => crate::backends::redis::cluster::STORE,
    /// `redis-sentinel://S1:P1[,S2:P2…]/SERVICE` (the primary Sentinel names).
    RedisSentinel ["redis-sentinel"] feature "redis" if (feature = "redis")
        => crate::backends::redis::sentinel::STORE,
    /// `redlock://H1,H2,H3…`.
    Redlock ["redlock"] feature "redis" if (feature = "redis")
        => crate::backends::redis::redlock::STORE,
    /// `postgres://` (also spelled `postgresql://`).
    Postgres ["postgres", "postgresql"] feature "postgres" if (feature = "postgres")
        => crate::backends::postgres::STORE,
    /// `mysql://` (MySQL and MariaDB).
    Mysql ["mysql"] feature "mysql" if (feature = "mysql") => crate::backends::mysql::STORE,
    /// `etcd://`.
    Etcd ["etcd"] feature "etcd" if (feature = "etcd") => crate::backends::etcd::STORE,
    /// `zk://` (ZooKeeper).
    Zk ["zk"] feature "zookeeper" if (feature = "zookeeper") => crate::backends::zookeeper::STORE,
    /// `nats://` (NATS JetStream KV).
    Nats ["nats"] feature "nats" if (feature = "nats") => crate::backends::nats::STORE,
}

/// One line of the registry.
struct Entry {
    scheme: Scheme,
    /// The URL schemes it answers, the first its name.
    schemes: &'static [&'static str],
    /// The cargo feature that builds it in.
    feature: &'static str,
    /// `None` when this build lacks it.
    descriptor: Option<&'static Descriptor>,
}

impl Scheme {
    /// The scheme as written in URLs (the first, where a store takes two spellings).
    pub fn as_str(self) -> &'static str {
        STORES.iter().find(|e| e.scheme == self).map_or("", |e| e.schemes[0])
    }
}

impl std::fmt::Display for Scheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Scheme {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The URL forms of this build, for messages.
fn forms() -> String {
    let built = STORES.iter().filter_map(|e| e.descriptor);
    built.map(|d| d.form).collect::<Vec<_>>().join(", ")
}

/// The store a URL names; a clear error for a scheme this build lacks.
fn entry(url: &str) -> Result<(&'static Entry, &'static Descriptor)> {
    let Some((scheme, _)) = url.split_once("://") else {
        return Err(Error::invalid(format!(
            "store URL {:?} has no scheme; expected one of {}",
            redact(url),
            forms()
        )));
    };
    let Some(e) = STORES.iter().find(|e| e.schemes.contains(&scheme)) else {
        return Err(Error::invalid(format!(
            "unknown store URL scheme {scheme:?}; expected one of {}",
            forms()
        )));
    };
    match e.descriptor {
        Some(d) => Ok((e, d)),
        None if e.scheme == Scheme::File && cfg!(feature = "file") => Err(Error::invalid(
            "the file:// store needs Linux (flock, inotify, /proc/locks); use sqlite:// here",
        )),
        None => Err(Error::invalid(format!(
            "the {scheme}:// store is not in this build: enable the cargo feature \"{f}\" \
             (for the CLI: cargo install leasehold-cli --features {f}); available: {}",
            forms(),
            f = e.feature
        ))),
    }
}

/// `result` with the URL's password scrubbed from its error, if it has one.
fn scrubbed<T>(url: &str, result: Result<T>) -> Result<T> {
    match secret(url) {
        Some(secret) => result.map_err(|e| e.scrubbed(&secret)),
        None => result,
    }
}

/// A store URL, parsed once: its [`Scheme`], its store, and its options, checked by the
/// store's own parser (an unknown option or a bad value refused, naming it and the valid
/// ones). `Display` and `Debug` redact the password; [`StoreUrl::expose`] gives the text
/// that connects.
///
/// ```
/// use leasehold::{Scheme, StoreUrl};
/// let url: StoreUrl = "sqlite:///tmp/locks.db".parse().unwrap();
/// assert_eq!(url.scheme(), Scheme::Sqlite);
/// assert!("sqlite:///tmp/locks.db?bogus=1".parse::<StoreUrl>().is_err());
/// ```
#[derive(Clone)]
pub struct StoreUrl {
    raw: String,
    scheme: Scheme,
    descriptor: &'static Descriptor,
}

impl StoreUrl {
    /// Parses and checks `url`, before any connection. A scheme this build lacks is an
    /// error naming the cargo feature that builds it in. No error carries the password.
    pub fn parse(url: &str) -> Result<StoreUrl> {
        let (e, descriptor) = scrubbed(url, entry(url))?;
        scrubbed(url, (descriptor.options)(url))?;
        Ok(StoreUrl { raw: url.to_owned(), scheme: e.scheme, descriptor })
    }

    /// The kind of store.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The value of option `name` (`?name=value`), if given.
    pub fn option(&self, name: &str) -> Option<&str> {
        crate::url::option_of(&self.raw, name)
    }

    /// Duration option `name` in the one syntax ([`crate::parse_duration`]), if given.
    pub fn duration(&self, name: &str) -> Result<Option<Duration>> {
        self.option(name).map(crate::parse_duration).transpose()
    }

    /// The URL with its credentials, to connect with. Never print it: print the `StoreUrl`.
    pub fn expose(&self) -> &str {
        &self.raw
    }

    /// Opens the store within `limits.connect`; no error carries the URL's password.
    pub(crate) async fn open(&self, limits: Limits) -> Result<Arc<dyn Store>> {
        // The store bounds each of its connections itself; this bounds the whole of opening,
        // several connections and table creation included.
        let open = (self.descriptor.open)(&self.raw, limits);
        scrubbed(&self.raw, within(limits.connect, || self.to_string(), open).await)
    }

    /// Reads the deployment's settings into `p`, within `limit`.
    pub(crate) async fn read_settings(&self, p: &mut Probe, limit: Duration) -> Result<()> {
        let read = match tokio::time::timeout(limit, (self.descriptor.probe)(&self.raw, p)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Error::unavailable(e, None)),
            Err(_) => Err(Error::unavailable(
                format!("the store did not answer the probe's questions within {limit:?}"),
                None,
            )),
        };
        scrubbed(&self.raw, read)
    }
}

impl PartialEq for StoreUrl {
    fn eq(&self, other: &StoreUrl) -> bool {
        self.raw == other.raw
    }
}

impl Eq for StoreUrl {}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each scheme is on one line, and each line's first scheme is its name.
    #[test]
    fn one_line_per_scheme() {
        let all: Vec<&str> = STORES.iter().flat_map(|e| e.schemes.iter().copied()).collect();
        let mut unique = all.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(all.len(), unique.len(), "{all:?}");
        assert_eq!(Scheme::Postgres.as_str(), "postgres");
        assert_eq!(Scheme::Zk.to_string(), "zk");
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
        let typo = StoreUrl::parse("postgres://u:PW@h/db?tabel=x").unwrap_err().to_string();
        assert!(typo.contains("\"tabel\"") && typo.contains("table"), "{typo}");
        assert!(!typo.contains("PW"), "{typo}");
    }

    #[test]
    #[cfg(feature = "sqlite")]
    fn store_urls_of_the_default_build() {
        assert_eq!(StoreUrl::parse("sqlite:///x.db").unwrap().scheme(), Scheme::Sqlite);
        assert!(StoreUrl::parse("sqlite:///x.db?bogus=1").is_err());
        let missing = StoreUrl::parse("nope://x").unwrap_err().to_string();
        assert!(missing.contains("unknown store URL scheme"), "{missing}");
        let none = StoreUrl::parse("x.db").unwrap_err().to_string();
        assert!(none.contains("has no scheme") && none.contains("sqlite://PATH"), "{none}");
    }

    #[test]
    #[cfg(not(feature = "etcd"))]
    fn a_compiled_out_store_names_its_feature() {
        let m = StoreUrl::parse("etcd://h:1").unwrap_err().to_string();
        assert!(m.contains("not in this build") && m.contains("\"etcd\""), "{m}");
    }
}
