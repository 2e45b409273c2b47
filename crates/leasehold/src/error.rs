//! The one error type of the crate.

use std::fmt;

use crate::{FenceToken, Key};

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
    /// The holder released the lease itself: a normal end, not a loss. Only
    /// [`crate::Lease::ended`] reports it ([`crate::Lease::lost`] does not resolve on a
    /// release), and an effect a fence resource refuses after the release.
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

/// Why a fenced resource refused a grant (see [`Error::StaleFence`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StaleReason {
    /// This grant has not claimed the resource (nothing, or an older grant, is installed):
    /// claim first.
    Unclaimed,
    /// The resource is guarded by another lock key: a fence only orders grants of one key.
    OtherKey {
        /// The key the resource is guarded by.
        installed_key: String,
    },
    /// A newer grant (a successor) has claimed the resource.
    Newer,
    /// The same fence is installed by another owner: a forged or replayed claim.
    OtherOwner,
    /// The grant carries no fence (its store issues none) and cannot claim anything.
    NoFence,
    /// The grant no longer holds its lock in the store (etcd: the lock key is gone or was
    /// created again).
    GrantGone,
    /// Nothing is installed for this grant and its fence is older than the resource's horizon
    /// ([`crate::horizon`]): a holder frozen past the horizon, whose resource has forgotten
    /// the claims it knew. Acquire again.
    PastHorizon,
}

impl fmt::Display for StaleReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StaleReason::Unclaimed => f.write_str("this grant has not claimed it (claim first)"),
            StaleReason::OtherKey { installed_key } => {
                write!(f, "the resource is guarded by lock key {installed_key:?}")
            }
            StaleReason::Newer => f.write_str("a newer grant has claimed it"),
            StaleReason::OtherOwner => f.write_str("the same fence is installed by another owner"),
            StaleReason::NoFence => {
                f.write_str("this grant carries no fence (its store issues none)")
            }
            StaleReason::GrantGone => f.write_str("the grant no longer holds its lock"),
            StaleReason::PastHorizon => {
                f.write_str("its fence is older than the resource's horizon (acquire again)")
            }
        }
    }
}

/// Everything that can go wrong. Store unreachability is always surfaced (fail closed).
///
/// Match on the variant, or ask the helpers ([`Error::is_retryable`],
/// [`Error::is_unavailable`], [`Error::is_lost`]). To combine with the errors of the
/// resource you protect, use an error type of your own with a `From<leasehold::Error>`
/// (thiserror's `#[from]`), or `Box<dyn std::error::Error + Send + Sync>`: `Error` is a
/// `std::error::Error` that is `Send + Sync + 'static`.
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
        key: Key,
    },
    /// This locker already holds the key: the acquire would wait on itself (the task that
    /// acquired the lease asking again, or a one-shot acquire while any task of this locker
    /// holds it). Answered at once, without a store round trip.
    #[error("{key:?} is already held by this locker (fence {fence}); release that lease first")]
    HeldByThisLocker {
        /// The key.
        key: Key,
        /// The fence of the grant this locker holds.
        fence: FenceToken,
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
    /// The store refused this client's configuration or credentials: authentication,
    /// authorization, TLS verification, a database, role or DB index that does not exist.
    /// Not an outage: never retried, never [`Error::is_unavailable`], so `leasehold run
    /// --if-unavailable run` never runs a command because a password is wrong.
    #[error("store refused the configuration: {message}")]
    Config {
        /// What the store refused.
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
        key: Key,
    },
    /// The lease was lost (or must be presumed lost); the critical section must stop.
    #[error("lease on {key:?} lost: {reason}")]
    Lost {
        /// The key concerned.
        key: Key,
        /// Why it was lost.
        reason: LostReason,
    },
    /// A fenced resource refused an effect: a newer (or foreign) grant is installed, or
    /// none. Nothing was applied.
    #[error("stale fence for resource {resource:?}: presented {presented}{}, {reason}", installed.map(|i| format!(", installed {i}")).unwrap_or_default())]
    StaleFence {
        /// The resource that refused.
        resource: String,
        /// The fence the caller presented.
        presented: FenceToken,
        /// The fence the resource has installed, when it has one.
        installed: Option<FenceToken>,
        /// Why.
        reason: StaleReason,
    },
    /// The store cannot hold the primitive asked for (a semaphore or a reader on a store
    /// whose [`crate::Guarantees::primitives`] says it does not). Nothing was asked of the
    /// store; never retried. The CLI exits 64.
    #[error("{backend} cannot hold {primitive}: {note}")]
    Unsupported {
        /// The store.
        backend: &'static str,
        /// What was asked for (`"a semaphore"`, `"readers (--shared)"`).
        primitive: &'static str,
        /// What the store holds instead (its [`crate::Primitives::note`]).
        note: &'static str,
    },
    /// The store answered with an error that is neither of the above.
    #[error("{}", backend_text(backend, message))]
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

/// `Backend`'s text: the store's name once, whether or not the message starts with it.
fn backend_text(backend: &str, message: &str) -> String {
    match message.strip_prefix(backend) {
        Some(rest) if rest.starts_with([' ', ':']) => format!("{backend} error:{rest}"),
        _ => format!("{backend} error: {message}"),
    }
}

impl Error {
    /// Whether the same call may succeed later: busy, unavailable, or an unknown outcome
    /// (after which the caller holds nothing; acquiring again is safe). Never true for bad
    /// input, a lost lease or a stale fence, which retrying cannot fix.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Busy { .. } | Error::Unavailable { .. } | Error::UnknownOutcome(_))
    }

    /// Whether the store could not be reached or did not answer: the case
    /// `leasehold run --if-unavailable` is about. Busy is never unavailable.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::Unavailable { .. } | Error::UnknownOutcome(_))
    }

    /// Whether the store refused this client's configuration or credentials (see
    /// [`Error::Config`]): fix the URL, the password or the server, do not retry.
    pub fn is_config(&self) -> bool {
        matches!(self, Error::Config { .. })
    }

    /// Whether the lease is gone (lost, or the store says it is not ours): stop the work.
    pub fn is_lost(&self) -> bool {
        matches!(self, Error::Lost { .. } | Error::NotOwner { .. })
    }

    /// Whether another owner holds the key ([`Error::Busy`]). Not
    /// [`Error::HeldByThisLocker`]: that key is held by this locker's own grant, which
    /// waiting or retrying cannot get past (match that variant to treat both alike).
    pub fn is_busy(&self) -> bool {
        matches!(self, Error::Busy { .. })
    }

    /// The key concerned, for the variants that have one.
    pub fn key(&self) -> Option<&Key> {
        match self {
            Error::Busy { key }
            | Error::HeldByThisLocker { key, .. }
            | Error::NotOwner { key }
            | Error::Lost { key, .. } => Some(key),
            _ => None,
        }
    }

    /// The message without the variant's prefix (`invalid input: `, `store unavailable: `…),
    /// for an error that is wrapped into another's message: one prefix, not two.
    pub(crate) fn detail(&self) -> String {
        match self {
            Error::InvalidInput(m) | Error::UnknownOutcome(m) => m.clone(),
            Error::Unavailable { message, .. } | Error::Config { message, .. } => message.clone(),
            other => other.to_string(),
        }
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidInput(msg.into())
    }

    #[cfg_attr(not(feature = "_driver-error"), allow(dead_code))]
    pub(crate) fn backend(
        backend: &'static str,
        message: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        Error::Backend { backend, message: message.into(), source: Some(source.into()) }
    }

    cfg_any_store! {
        pub(crate) fn config(message: impl Into<String>, source: Option<BoxError>) -> Self {
            Error::Config { message: message.into(), source }
        }
    }

    /// A local path a store cannot use: [`Error::Config`] when the path itself is wrong
    /// (permission denied, a read-only file system, a directory where a file belongs or the
    /// reverse, a parent that does not exist and cannot be made); anything else (a full
    /// disk, an I/O error, too many open files) is [`Error::Unavailable`].
    #[cfg(feature = "_local")]
    pub(crate) fn local_io(message: impl Into<String>, e: std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        let message = format!("{}: {e}", message.into());
        match e.kind() {
            K::PermissionDenied
            | K::ReadOnlyFilesystem
            | K::IsADirectory
            | K::NotADirectory
            | K::AlreadyExists
            | K::NotFound
            | K::InvalidFilename
            | K::InvalidInput => Error::config(message, Some(e.into())),
            _ => Error::unavailable(message, Some(e.into())),
        }
    }

    pub(crate) fn unavailable(message: impl Into<String>, source: Option<BoxError>) -> Self {
        Error::Unavailable { message: message.into(), source }
    }
}

#[cfg(test)]
mod text_tests {
    use super::Error;

    /// No message says its kind twice (issue 35: "invalid input: invalid input: …",
    /// "postgres error: postgres acquire: …").
    #[test]
    fn no_doubled_prefixes() {
        let b = Error::Backend {
            backend: "postgres",
            message: "postgres acquire: x".into(),
            source: None,
        };
        assert_eq!(b.to_string(), "postgres error: acquire: x");
        let b = Error::Backend { backend: "mysql", message: "fence claim: y".into(), source: None };
        assert_eq!(b.to_string(), "mysql error: fence claim: y");
        let wrapped = Error::invalid(format!("outer: {}", Error::invalid("inner").detail()));
        assert_eq!(wrapped.to_string(), "invalid input: outer: inner");
    }

    /// Waiting on yourself is not "another owner holds it" (issue 35).
    #[test]
    fn held_by_this_locker_is_not_busy() {
        let key = crate::Key::new("k").unwrap();
        let ours = Error::HeldByThisLocker { key: key.clone(), fence: crate::FenceToken::new(1) };
        assert!(!ours.is_busy() && !ours.is_retryable());
        assert!(Error::Busy { key }.is_busy());
    }
}

#[cfg(all(test, feature = "_local"))]
mod tests {
    use super::Error;

    /// Which local I/O failures are a wrong path (configuration) and which an outage.
    #[test]
    fn local_paths_that_cannot_work_are_config() {
        use nix::libc;
        for errno in [libc::EROFS, libc::EACCES, libc::EPERM, libc::EISDIR, libc::ENOTDIR] {
            let e = Error::local_io("open", std::io::Error::from_raw_os_error(errno));
            assert!(e.is_config() && !e.is_unavailable(), "errno {errno}: {e:?}");
        }
        for errno in [libc::ENOSPC, libc::EIO, libc::EMFILE] {
            let e = Error::local_io("open", std::io::Error::from_raw_os_error(errno));
            assert!(e.is_unavailable() && !e.is_config(), "errno {errno}: {e:?}");
        }
    }
}
