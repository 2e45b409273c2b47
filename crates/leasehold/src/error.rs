//! The one error type of the crate.

use std::fmt;

/// A boxed error from a store client, kept as the `source` of [`Error`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a lease is no longer (or may no longer be) held.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "cause", content = "detail", rename_all = "snake_case")]
#[non_exhaustive]
pub enum LostReason {
    /// The local deadline passed without a confirmed renewal: the holder must presume the
    /// store has expired (or is about to expire) the lease.
    DeadlinePassed,
    /// The store answered that another owner (or nobody) holds the key.
    NotOwner,
    /// The session that carried the lock ended (connection closed, session expired).
    SessionEnded(String),
    /// The holder released the lease itself.
    Released,
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LostReason::DeadlinePassed => {
                f.write_str("local deadline passed without a confirmed renewal")
            }
            LostReason::NotOwner => f.write_str("the store says the key is no longer ours"),
            LostReason::SessionEnded(why) => write!(f, "the store session ended: {why}"),
            LostReason::Released => f.write_str("released by its holder"),
        }
    }
}

/// Everything that can go wrong. Store unreachability is always surfaced (fail closed).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bad key, ttl, URL or option. Never retried.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// Another owner holds the key and the wait (if any) ran out.
    #[error("busy: {key:?} is held by another owner")]
    Busy {
        /// The key that was busy.
        key: String,
    },
    /// The store could not be reached or refused service; nothing was changed.
    #[error("store unavailable: {message}")]
    Unavailable {
        /// What failed.
        message: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// The request may or may not have taken effect (timeout, dropped connection). For an
    /// acquire, an owner-conditional cleanup has been scheduled; the caller holds nothing.
    #[error("outcome unknown: {0}")]
    UnknownOutcome(String),
    /// Renew or release of a lease the store says is no longer ours.
    #[error("not the owner of {key:?}: the lease expired or was taken over")]
    NotOwner {
        /// The key concerned.
        key: String,
    },
    /// The lease was lost (or must be presumed lost); the critical section must stop.
    #[error("lease on {key:?} lost: {reason}")]
    Lost {
        /// The key concerned.
        key: String,
        /// Why it was lost.
        reason: LostReason,
    },
    /// A fenced resource refused an effect because a newer (or foreign) fence is installed.
    #[error("stale fence for resource {resource:?}: presented {presented}, {installed}")]
    StaleFence {
        /// The resource that refused.
        resource: String,
        /// The fence the caller presented.
        presented: u64,
        /// What the resource has installed, in words.
        installed: String,
    },
    /// The store answered with an error that is neither of the above.
    #[error("{backend} error: {message}")]
    Backend {
        /// Which backend.
        backend: &'static str,
        /// What failed.
        message: String,
        /// The underlying error.
        #[source]
        source: Option<BoxError>,
    },
}

impl Error {
    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidInput(msg.into())
    }

    #[cfg_attr(not(any(feature = "sqlite", feature = "file", feature = "redis")), allow(dead_code))]
    pub(crate) fn backend(
        backend: &'static str,
        message: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        Error::Backend { backend, message: message.into(), source: Some(source.into()) }
    }

    pub(crate) fn unavailable(message: impl Into<String>, source: Option<BoxError>) -> Self {
        Error::Unavailable { message: message.into(), source }
    }
}
