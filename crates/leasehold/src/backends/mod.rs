//! Store implementations, one folder per store, each behind its cargo feature. Each store's
//! folder exports one descriptor (`Descriptor`: its URL form and its URL parser, which yields
//! the store's typed configuration, a `StoreConfig` that opens and probes it);
//! `crate::registry` lists them, with their schemes.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::probe::findings::Probe;
use crate::{Result, Store};

#[cfg(feature = "sqlite")]
pub(crate) mod doorbell;
#[cfg(feature = "etcd")]
pub mod etcd;
/// `file://` needs Linux: `flock(2)` plus inotify for waiting and `/proc/locks` for `status`.
#[cfg(all(feature = "file", target_os = "linux"))]
pub mod file;
#[cfg(all(target_os = "linux", feature = "_local"))]
pub(crate) mod inotify;
#[cfg(feature = "mysql")]
pub mod mysql;
#[cfg(feature = "nats")]
pub mod nats;
#[cfg(feature = "_peer")]
pub(crate) mod peer;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "_undoing")]
pub(crate) mod session;
#[cfg(feature = "sqlite")]
pub mod sqlite;
#[cfg(feature = "zookeeper")]
pub mod zookeeper;

/// A boxed future borrowing the store's configuration.
pub(crate) type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

pub(crate) use crate::limits::Limits;

/// A store's configuration, parsed once from its URL by the store's own parser (the
/// descriptor's `parse`): the typed options, and what its driver takes, already parsed.
/// Opening the store and probing its deployment take this value and never read the URL
/// again. Each store's config is its own type, in its own folder; the tools that need one
/// of its answers get it through that store's `tools` module, which downcasts
/// ([`crate::StoreUrl::config`]).
pub(crate) trait StoreConfig: std::any::Any + Send + Sync {
    /// Connects (each connection bounded by `limits.connect`; the caller bounds the whole).
    fn open(&self, limits: Limits) -> Boxed<'_, Result<Arc<dyn Store>>>;
    /// Reads the deployment's real settings into a [`Probe`].
    fn probe<'a>(&'a self, p: &'a mut Probe) -> Boxed<'a, std::result::Result<(), String>>;
    /// How long the store keeps a silent holder's session (etcd's lease TTL, ZooKeeper's
    /// session timeout), for stores whose locks live in a session; `None` for others.
    fn session_timeout(&self) -> Option<std::time::Duration> {
        None
    }
}

/// How a descriptor parses a URL into its store's configuration: an unknown, repeated or
/// bad option is [`crate::Error::InvalidInput`] naming it (and the valid ones).
pub(crate) type ParseFn = fn(&str) -> Result<Arc<dyn StoreConfig>>;

/// What the rest of the crate knows of one store: everything else is in its folder.
pub(crate) struct Descriptor {
    /// The URL form, for messages.
    pub form: &'static str,
    /// The URL with its options, as `leasehold --help` lists it.
    pub usage: &'static str,
    /// What the store is, in a few words, beside [`Descriptor::usage`] in that list.
    pub summary: &'static str,
    /// The store's URL parser, run once on every URL before any connection.
    pub parse: ParseFn,
}

cfg_any_store! {
    /// A descriptor's `parse`: the configuration `parsed` yields, shared.
    pub(crate) fn parsed<C: StoreConfig>(parsed: Result<C>) -> Result<Arc<dyn StoreConfig>> {
        Ok(Arc::new(parsed?))
    }
}

cfg_any_store! {
    /// A [`StoreConfig::open`]: the store `opening` yields, shared.
    pub(crate) fn opened<'a, S: Opened>(
        opening: impl Future<Output = Result<S>> + Send + 'a,
    ) -> Boxed<'a, Result<Arc<dyn Store>>> {
        Box::pin(async move { Ok(opening.await?.shared()) })
    }
}

cfg_any_store! {
    /// What a store's opening yields: a store, or one already shared (a form chosen by the URL).
    pub(crate) trait Opened {
        /// The store, shared.
        fn shared(self) -> Arc<dyn Store>;
    }
}

impl<S: Store + 'static> Opened for S {
    fn shared(self) -> Arc<dyn Store> {
        Arc::new(self)
    }
}

impl Opened for Arc<dyn Store> {
    fn shared(self) -> Arc<dyn Store> {
        self
    }
}
