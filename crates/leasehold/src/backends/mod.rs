//! Store implementations, one module per backend, each behind its cargo feature.

use std::sync::Arc;

use crate::{Error, Result, Store};

#[cfg(any(feature = "mysql", feature = "sqlite"))]
pub(crate) mod bell;
#[cfg(feature = "etcd")]
pub mod etcd;
/// `file://` needs Linux: `flock(2)` plus inotify for waiting and `/proc/locks` for `status`.
#[cfg(all(feature = "file", target_os = "linux"))]
pub mod file;
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

/// The schemes this build understands, for error messages.
pub const SCHEMES: &[&str] = &[
    #[cfg(feature = "sqlite")]
    "sqlite://PATH",
    #[cfg(feature = "file")]
    "file://DIR",
    #[cfg(feature = "redis")]
    "redis://HOST:PORT",
    #[cfg(feature = "redis-tls")]
    "rediss://HOST:PORT[?tls_ca=PEM]",
    #[cfg(feature = "redis")]
    "redlock://H1:P1,H2:P2,H3:P3",
    #[cfg(feature = "postgres")]
    "postgres://USER@HOST:PORT/DB[?mode=lease|session]",
    #[cfg(feature = "mysql")]
    "mysql://USER@HOST:PORT/DB[?mode=lease|session]",
    #[cfg(feature = "etcd")]
    "etcd://H1:P1[,H2:P2…][/PREFIX][?ttl=10s]",
    #[cfg(feature = "zookeeper")]
    "zk://H1:P1[,H2:P2…][/CHROOT][?session=10s]",
];

/// Every scheme leasehold knows, built in or not.
const KNOWN: &[&str] = &[
    "sqlite",
    "file",
    "redis",
    "rediss",
    "redlock",
    "postgres",
    "postgresql",
    "mysql",
    "etcd",
    "zk",
];

/// The cargo feature that builds the store of a known scheme in.
fn feature_of(scheme: &str) -> &str {
    match scheme {
        "rediss" => "redis-tls",
        "redlock" => "redis",
        "postgresql" => "postgres",
        "zk" => "zookeeper",
        other => other,
    }
}

/// Opens a store from its URL. Unknown options are refused before any connection is made,
/// and no error carries the URL's password (see [`crate::redact`]).
pub(crate) async fn open(url: &str) -> Result<Arc<dyn Store>> {
    let opened = open_unscrubbed(url).await;
    match crate::url::secret(url) {
        Some(secret) => opened.map_err(|e| e.scrubbed(&secret)),
        None => opened,
    }
}

async fn open_unscrubbed(url: &str) -> Result<Arc<dyn Store>> {
    let Some((scheme, _)) = url.split_once("://") else {
        return Err(Error::invalid(format!(
            "store URL {:?} has no scheme; expected one of {}",
            crate::redact(url),
            SCHEMES.join(", ")
        )));
    };
    let check = |known: &[&str]| crate::url::check_options(url, scheme, known);
    let _ = &check; // unused when only the driver-checked stores are built
    match scheme {
        #[cfg(feature = "sqlite")]
        "sqlite" => {
            check(&[])?;
            Ok(Arc::new(sqlite::SqliteStore::open(&url["sqlite://".len()..]).await?))
        }
        #[cfg(all(feature = "file", target_os = "linux"))]
        "file" => {
            check(&[])?;
            Ok(Arc::new(file::FileStore::open(&url["file://".len()..])?))
        }
        #[cfg(all(feature = "file", not(target_os = "linux")))]
        "file" => Err(Error::invalid(
            "the file:// store needs Linux (flock, inotify, /proc/locks); use sqlite:// here",
        )),
        #[cfg(feature = "redis")]
        "redis" => {
            check(redis::OPTIONS)?;
            Ok(Arc::new(redis::RedisStore::connect(url).await?))
        }
        #[cfg(feature = "redis-tls")]
        "rediss" => {
            check(redis::TLS_OPTIONS)?;
            Ok(Arc::new(redis::RedisStore::connect(url).await?))
        }
        #[cfg(feature = "redis")]
        "redlock" => {
            check(redis::OPTIONS)?;
            Ok(Arc::new(redlock::RedlockStore::connect(url).await?))
        }
        // The drivers refuse parameters they do not know; leasehold's own are checked by
        // the stores' parsers.
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => postgres::connect(url).await,
        #[cfg(feature = "mysql")]
        "mysql" => mysql::connect(url).await,
        #[cfg(feature = "etcd")]
        "etcd" => {
            check(&["ttl"])?;
            Ok(Arc::new(etcd::EtcdStore::connect(url).await?))
        }
        #[cfg(feature = "zookeeper")]
        "zk" => {
            check(&["session"])?;
            Ok(Arc::new(zookeeper::ZkStore::connect(url).await?))
        }
        known if KNOWN.contains(&known) => Err(Error::invalid(format!(
            "the {known}:// store is not in this build: enable the cargo feature \"{}\" (for \
             the CLI: cargo install leasehold-cli --features {0}); available: {}",
            feature_of(known),
            SCHEMES.join(", ")
        ))),
        other => Err(Error::invalid(format!(
            "unknown store URL scheme {other:?}; expected one of {}",
            SCHEMES.join(", ")
        ))),
    }
}
