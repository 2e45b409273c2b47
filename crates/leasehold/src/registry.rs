//! The registry: the one list of stores and their URL schemes, built in or not, and the
//! typed [`StoreUrl`] a URL is parsed into once, which knows its store's descriptor. Opening
//! a URL, probing a deployment, the URL forms in messages and the option checks all come
//! from here. Adding a store: its folder under `backends/`, and one line in
//! `for_each_store!` below.

use std::sync::Arc;
use std::time::Duration;

use crate::backends::{Descriptor, StoreConfig};
use crate::limits::{Limits, within};
use crate::probe::findings::Probe;
use crate::url::{redact, secret};
use crate::{Error, Result, Store};

/// The registry's expansion of `for_each_store!`: the `Scheme` enum and the table of
/// stores (a store compiled out keeps its line, so a URL naming it is told which feature to
/// enable, without its descriptor).
macro_rules! stores {
    ($(
        $(#[$doc:meta])*
        $variant:ident [$($scheme:literal),+] feature $feature:literal if ($($cfg:tt)+) => $store:path
            $(; speaks $wire:expr)?,
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

/// The one list of stores, one line per store: the `Scheme` variant, its URL schemes, the
/// cargo feature that builds it in, the `cfg` it needs, its descriptor and, for a store on a
/// network port, how its protocol shows itself (`speaks`, a `crate::wire::Wire`: its name, and
/// its greeting or its answer to the wrong-service probe's questions, `backends/peer.rs`).
/// `for_each_store!(m)` hands the list to the macro `m`: `stores!` here (the `Scheme` enum and
/// the descriptors), and `wire.rs`'s `wires!` (the protocols the probe names, which need no
/// store's code: a store compiled out is still named at a wrong port, and the probe, which the
/// stores call, does not reach the registry).
macro_rules! for_each_store {
    ($then:ident) => {
        $then! {
    /// `sqlite://PATH`, the embedded default.
    Sqlite ["sqlite"] feature "sqlite" if (feature = "sqlite") => crate::backends::sqlite::STORE,
    /// `file://DIR`, `flock(2)` session locks (Linux).
    File ["file"] feature "file" if (all(feature = "file", target_os = "linux"))
        => crate::backends::file::STORE,
    /// `redis://`.
    Redis ["redis"] feature "redis" if (feature = "redis") => crate::backends::redis::STORE;
        // RESP: `+PONG`, or an error such as `-NOAUTH`, to the probe's PING.
        speaks Wire::a("Redis").shown_by(|b| {
            let upper = |b: &[u8]| b.iter().all(u8::is_ascii_uppercase);
            b.len() >= 4 && matches!(b[0], b'+' | b'-') && upper(&b[1..4])
        }),
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
        => crate::backends::postgres::STORE;
        // One byte, `N` or `S`, to the probe's SSLRequest (PostgreSQL, PgBouncer).
        speaks Wire::a("PostgreSQL").shown_by(|b| b == b"N" || b == b"S"),
    /// `mysql://` (MySQL and MariaDB).
    Mysql ["mysql"] feature "mysql" if (feature = "mysql") => crate::backends::mysql::STORE;
        // The server's greeting, sent first: a packet (3-byte length, sequence 0) of protocol
        // version 10, or an error packet.
        speaks Wire::a("MySQL/MariaDB").shown_by(|b| {
            b.len() >= 5 && b[3] == 0 && matches!(b[4], 0x0a | 0xff)
        }),
    /// `etcd://`.
    Etcd ["etcd"] feature "etcd" if (feature = "etcd") => crate::backends::etcd::STORE;
        // gRPC over HTTP/2, which the probe does not tell; HTTP/1 on the same port, whose
        // `GET /version` answers `{"etcdserver":…}`.
        speaks Wire::an("etcd").over_http(b"etcdserver\""),
    /// `zk://` (ZooKeeper).
    Zk ["zk"] feature "zookeeper" if (feature = "zookeeper") => crate::backends::zookeeper::STORE;
        // Answers none of the probe's questions: named only as the protocol expected.
        speaks Wire::a("ZooKeeper"),
    /// `nats://` (NATS JetStream KV).
    Nats ["nats"] feature "nats" if (feature = "nats") => crate::backends::nats::STORE;
        // The server's `INFO {json}` greeting, sent to every client before it reads a byte.
        speaks Wire::a("NATS").shown_by(|b| b.starts_with(b"INFO {")),
        }
    };
}

for_each_store!(stores);

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

/// The URL of each store built into this build, with its options, and what the store is in a
/// few words, in the order messages list them (for a command's help; each from its store's
/// descriptor, so a new store adds its own line).
pub fn url_usage() -> Vec<(&'static str, &'static str)> {
    STORES.iter().filter_map(|e| e.descriptor).map(|d| (d.usage, d.summary)).collect()
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

/// A store URL, parsed once: its [`Scheme`], and its store's typed configuration, made by
/// the store's own parser (an unknown or repeated option or a bad value refused, naming it
/// and the valid ones). Opening the store and probing its deployment use that configuration;
/// nothing reads the URL text again. `Display` and `Debug` redact the password (and print
/// nothing of the configuration); [`StoreUrl::expose`] gives the text, for the one use that
/// needs it: handing the store to another process.
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
    config: Arc<dyn StoreConfig>,
}

impl StoreUrl {
    /// Parses and checks `url`, before any connection. A scheme this build lacks is an
    /// error naming the cargo feature that builds it in. No error carries the password.
    pub fn parse(url: &str) -> Result<StoreUrl> {
        let (e, descriptor) = scrubbed(url, entry(url))?;
        let config = scrubbed(url, (descriptor.parse)(url))?;
        Ok(StoreUrl { raw: url.to_owned(), scheme: e.scheme, config })
    }

    /// The kind of store.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The URL as given, credentials included. Kept for what truly needs the text: handing
    /// the store to another process (a child's environment, a client such as pgbench), which
    /// parses it again as its own, and finding the text where it must not leak (the CLI's
    /// `run` withholds environment variables that carry it). Never print it (print the
    /// `StoreUrl`); within a process, use the `StoreUrl` and its store's typed answers.
    pub fn expose(&self) -> &str {
        &self.raw
    }

    /// The store's configuration as its own type `C`, if this URL is that store's: how a
    /// store's `tools` answers questions about its URL without parsing it again.
    #[cfg_attr(
        not(all(
            feature = "tools",
            any(
                feature = "redis",
                feature = "postgres",
                feature = "mysql",
                feature = "etcd",
                feature = "nats"
            )
        )),
        allow(dead_code)
    )]
    pub(crate) fn config<C: StoreConfig>(&self) -> Option<&C> {
        let any: &dyn std::any::Any = &*self.config;
        any.downcast_ref()
    }

    /// [`StoreUrl::config`], or [`Error::InvalidInput`] saying this URL is not one of `form`
    /// (a store's `tools`, given another store's URL).
    #[cfg(feature = "tools")]
    #[cfg_attr(
        not(any(
            feature = "redis",
            feature = "postgres",
            feature = "mysql",
            feature = "etcd",
            feature = "nats"
        )),
        allow(dead_code)
    )]
    pub(crate) fn config_of<C: StoreConfig>(&self, form: &str) -> Result<&C> {
        self.config().ok_or_else(|| Error::invalid(format!("{self} is not a {form} URL")))
    }

    /// How long the store keeps a silent holder's session on its servers before its locks
    /// go: etcd's lease TTL (`ttl=`, 10 s by default), ZooKeeper's session timeout
    /// (`session=`, 10 s by default); `None` for stores whose locks are not bound to such a
    /// session (leases, and session locks that end with the holder's connection or file).
    /// A lock with one outlives a holder that died without releasing it by up to this long:
    /// `leasehold run` releases it on its way out, chaos waits this long for a cut-off
    /// holder's locks to go.
    pub fn session_timeout(&self) -> Option<Duration> {
        self.config.session_timeout()
    }

    /// The servers the URL names, `HOST:PORT` each (feature `tools`: the chaos tools put a
    /// fault proxy in front of one).
    #[cfg(feature = "tools")]
    pub fn hosts(&self) -> Vec<&str> {
        let (_, _, hosts, _) = crate::url::authority(&self.raw);
        hosts.split(',').filter(|h| !h.is_empty()).collect()
    }

    /// The same store URL (scheme, credentials, path and options) naming the servers
    /// `hosts` (`HOST:PORT[,HOST:PORT…]`) instead, parsed again as a new URL (feature
    /// `tools`: a holder reaching its store through a fault proxy).
    #[cfg(feature = "tools")]
    pub fn with_hosts(&self, hosts: &str) -> Result<StoreUrl> {
        let (scheme, userinfo, _, rest) = crate::url::authority(&self.raw);
        StoreUrl::parse(&format!("{scheme}://{userinfo}{hosts}{rest}"))
    }

    /// What follows the servers in the URL: its path and options (`/PATH?OPTIONS`, or `""`),
    /// without the scheme and credentials (feature `tools`: the same options on a private
    /// server the chaos tools start, which has no credentials and may be another form).
    #[cfg(feature = "tools")]
    pub fn path_and_options(&self) -> &str {
        crate::url::authority(&self.raw).3
    }

    /// Opens the store within `limits.connect`; no error carries the URL's password.
    pub(crate) async fn open(&self, limits: Limits) -> Result<Arc<dyn Store>> {
        // The store bounds each of its connections itself; this bounds the whole of opening,
        // several connections and table creation included.
        let open = self.config.open(limits);
        scrubbed(&self.raw, within(limits.connect, || self.to_string(), open).await)
    }

    /// Reads the deployment's settings into `p`, within `limit`.
    pub(crate) async fn read_settings(&self, p: &mut Probe, limit: Duration) -> Result<()> {
        let read = match tokio::time::timeout(limit, self.config.probe(p)).await {
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
        // Parsed once, into the store's own typed configuration.
        let c = u.config::<crate::backends::redis::RedisUrl>().unwrap();
        assert_eq!((c.base.as_str(), c.opts.prefix.as_str()), ("redis://u:PW@127.0.0.1:1", "a:"));
        assert_eq!(c.opts.wait_replicas, None, "wait_timeout alone asks for no WAIT");
        let w = StoreUrl::parse("redis://h:1?wait_replicas=2&wait_timeout=1s").unwrap();
        let w = w.config::<crate::backends::redis::RedisUrl>().unwrap().opts.wait_replicas;
        assert_eq!(w, Some((2, Duration::from_secs(1))));
        assert!(u.config::<crate::backends::redis::cluster_url::ClusterUrl>().is_none());
        assert!(!format!("{u} {u:?}").contains("PW"));
        assert!(u.expose().contains("PW"));
        #[cfg(feature = "tools")]
        {
            let u = StoreUrl::parse("redis://u:PW@h:1/2?prefix=a:").unwrap();
            assert_eq!((u.hosts(), u.path_and_options()), (vec!["h:1"], "/2?prefix=a:"));
            let moved = u.with_hosts("127.0.0.1:7").unwrap();
            assert_eq!(moved.expose(), "redis://u:PW@127.0.0.1:7/2?prefix=a:");
            let pg = StoreUrl::parse("postgres://u@h1:1,h2:2/db").unwrap();
            assert_eq!(pg.hosts(), ["h1:1", "h2:2"]);
        }
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
