//! Store implementations, one folder per store, each behind its cargo feature. Each store's
//! folder exports one descriptor (its schemes, URL form, options, how to open and probe it);
//! one list of them is where opening a URL, probing a deployment, the URL forms in messages and
//! the option checks all come from.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::probe::Probe;
use crate::{Error, Result, Store};

#[cfg(feature = "sqlite")]
pub(crate) mod doorbell;
#[cfg(feature = "etcd")]
pub mod etcd;
/// `file://` needs Linux: `flock(2)` plus inotify for waiting and `/proc/locks` for `status`.
#[cfg(all(feature = "file", target_os = "linux"))]
pub mod file;
#[cfg(all(target_os = "linux", any(feature = "sqlite", feature = "file")))]
pub(crate) mod inotify;
#[cfg(feature = "mysql")]
pub mod mysql;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "redis")]
pub use redis::redlock;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "etcd", feature = "zookeeper"))]
pub(crate) mod session;
#[cfg(feature = "sqlite")]
pub mod sqlite;
#[cfg(feature = "zookeeper")]
pub mod zookeeper;

/// A boxed future borrowing the URL.
pub(crate) type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
/// How a descriptor opens its store.
pub(crate) type OpenFn = for<'a> fn(&'a str, Limits) -> Boxed<'a, Result<Arc<dyn Store>>>;

/// The bounds a store is opened with (`docs/design.md` §3, "Bounds").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Every connection the store opens, now or later (name lookup, TCP, TLS,
    /// authentication, creating its tables), answers within this.
    pub connect: Duration,
    /// One request, until [`Store::set_op_timeout`] says otherwise.
    pub op: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { connect: crate::DEFAULT_CONNECT_TIMEOUT, op: crate::DEFAULT_OP_TIMEOUT }
    }
}

/// `f`, or [`Error::Unavailable`] naming `what` when it takes longer than `limit`.
#[cfg_attr(
    not(any(feature = "postgres", feature = "mysql", feature = "zookeeper")),
    allow(dead_code)
)]
pub(crate) async fn within<T>(
    limit: Duration,
    what: impl FnOnce() -> String,
    f: impl Future<Output = Result<T>>,
) -> Result<T> {
    match tokio::time::timeout(limit, f).await {
        Ok(r) => r,
        Err(_) => {
            Err(Error::unavailable(format!("{} got no answer within {limit:?}", what()), None))
        }
    }
}
/// How a descriptor probes a deployment.
pub(crate) type ProbeFn =
    for<'a> fn(&'a str, &'a mut Probe) -> Boxed<'a, std::result::Result<(), String>>;

/// What the rest of the crate knows of one store: everything else is in its folder.
pub(crate) struct Descriptor {
    /// The URL schemes it answers (`postgres`, `postgresql`).
    pub schemes: &'static [&'static str],
    /// The URL form, for messages.
    pub form: &'static str,
    /// The options its URLs take, checked before any connection; `None` when its driver
    /// refuses unknown parameters itself (leasehold's own are checked by its parser).
    pub options: Option<&'static [&'static str]>,
    /// Connects.
    pub open: OpenFn,
    /// Reads the deployment's real settings into a [`Probe`].
    pub probe: ProbeFn,
}

/// The stores of this build. Adding a store: its folder, and one line here.
const STORES: &[Descriptor] = &[
    #[cfg(feature = "sqlite")]
    sqlite::STORE,
    #[cfg(all(feature = "file", target_os = "linux"))]
    file::STORE,
    #[cfg(feature = "redis")]
    redis::STORE,
    #[cfg(feature = "redis-tls")]
    redis::TLS_STORE,
    #[cfg(feature = "redis")]
    redlock::STORE,
    #[cfg(feature = "postgres")]
    postgres::STORE,
    #[cfg(feature = "mysql")]
    mysql::STORE,
    #[cfg(feature = "etcd")]
    etcd::STORE,
    #[cfg(feature = "zookeeper")]
    zookeeper::STORE,
];

/// Every scheme leasehold knows, built in or not, and the cargo feature that builds it in:
/// the one list that must name stores a build may not contain.
const KNOWN: &[(&str, &str)] = &[
    ("sqlite", "sqlite"),
    ("file", "file"),
    ("redis", "redis"),
    ("rediss", "redis-tls"),
    ("redlock", "redis"),
    ("postgres", "postgres"),
    ("postgresql", "postgres"),
    ("mysql", "mysql"),
    ("etcd", "etcd"),
    ("zk", "zookeeper"),
];

/// The store a URL names, its options checked; a clear error for a scheme this build lacks.
fn descriptor(url: &str) -> Result<&'static Descriptor> {
    let forms = || STORES.iter().map(|d| d.form).collect::<Vec<_>>().join(", ");
    let Some((scheme, _)) = url.split_once("://") else {
        return Err(Error::invalid(format!(
            "store URL {:?} has no scheme; expected one of {}",
            crate::redact(url),
            forms()
        )));
    };
    if let Some(d) = STORES.iter().find(|d| d.schemes.contains(&scheme)) {
        if let Some(known) = d.options {
            crate::url::check_options(url, scheme, known)?;
        }
        return Ok(d);
    }
    if scheme == "file" && cfg!(feature = "file") {
        return Err(Error::invalid(
            "the file:// store needs Linux (flock, inotify, /proc/locks); use sqlite:// here",
        ));
    }
    match KNOWN.iter().find(|(s, _)| *s == scheme) {
        Some((_, feature)) => Err(Error::invalid(format!(
            "the {scheme}:// store is not in this build: enable the cargo feature \"{feature}\" \
             (for the CLI: cargo install leasehold-cli --features {feature}); available: {}",
            forms()
        ))),
        None => Err(Error::invalid(format!(
            "unknown store URL scheme {scheme:?}; expected one of {}",
            forms()
        ))),
    }
}

/// Checks a URL as [`open`] would before connecting: a known scheme of this build, and its
/// options.
pub(crate) fn check(url: &str) -> Result<()> {
    scrubbed(url, descriptor(url).map(|_| ()))
}

/// `result` with the URL's password scrubbed from its error, if it has one.
fn scrubbed<T>(url: &str, result: Result<T>) -> Result<T> {
    match crate::url::secret(url) {
        Some(secret) => result.map_err(|e| e.scrubbed(&secret)),
        None => result,
    }
}

/// Opens a store from its URL within `limits.connect`. Unknown options are refused before
/// any connection is made, and no error carries the URL's password (see [`crate::redact`]).
pub(crate) async fn open(url: &str, limits: Limits) -> Result<Arc<dyn Store>> {
    let opened = match descriptor(url) {
        // The store bounds each of its connections itself; this bounds the whole of opening,
        // several connections and table creation included.
        Ok(d) => within(limits.connect, || crate::redact(url), (d.open)(url, limits)).await,
        Err(e) => Err(e),
    };
    scrubbed(url, opened)
}

/// Connects (for the store's guarantees, within `limits.connect`) and probes the deployment,
/// within `limit`. The outer error: the store could not be opened; the inner one: reading
/// its settings failed.
pub(crate) async fn probe(
    url: &str,
    p: &mut Probe,
    limits: Limits,
    limit: Duration,
) -> Result<(Arc<dyn Store>, Result<()>)> {
    let d = scrubbed(url, descriptor(url))?;
    let store = open(url, limits).await?;
    let read = match tokio::time::timeout(limit, (d.probe)(url, p)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(Error::unavailable(e, None)),
        Err(_) => Err(Error::unavailable(
            format!("the store did not answer the probe's questions within {limit:?}"),
            None,
        )),
    };
    Ok((store, scrubbed(url, read)))
}
