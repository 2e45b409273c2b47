//! Store implementations, one folder per store, each behind its cargo feature. Each store's
//! folder exports one descriptor (`Descriptor`: its URL form, option parser, how to open and
//! probe it); `crate::registry` lists them, with their schemes.

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
#[cfg(all(target_os = "linux", any(feature = "sqlite", feature = "file")))]
pub(crate) mod inotify;
#[cfg(feature = "mysql")]
pub mod mysql;
#[cfg(feature = "nats")]
pub mod nats;
#[cfg(any(
    feature = "redis",
    feature = "postgres",
    feature = "mysql",
    feature = "etcd",
    feature = "zookeeper"
))]
pub(crate) mod peer;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
pub mod redis;
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

pub(crate) use crate::limits::Limits;

/// How a descriptor probes a deployment.
pub(crate) type ProbeFn =
    for<'a> fn(&'a str, &'a mut Probe) -> Boxed<'a, std::result::Result<(), String>>;

/// What the rest of the crate knows of one store: everything else is in its folder.
pub(crate) struct Descriptor {
    /// The URL form, for messages.
    pub form: &'static str,
    /// The store's option parser, run on every URL before any connection: refuses an
    /// unknown option or a bad value.
    pub options: fn(&str) -> Result<()>,
    /// Connects.
    pub open: OpenFn,
    /// Reads the deployment's real settings into a [`Probe`].
    pub probe: ProbeFn,
}

cfg_any_store! {
    /// A descriptor's `open`: the store `opening` yields, shared.
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
