//! The bounds of `docs/design.md` §3 ("Bounds"): the default bounds on a round trip and on
//! connecting, the limits a store is opened with, and the one way a step is bounded.

use std::future::Future;
use std::time::Duration;

use crate::{Error, Result};

/// Default bound on one store round trip.
pub const DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(5);

/// Default bound on connecting ([`crate::Locker::connect`]), and on every connection a store
/// opens later (a reconnect after a failure).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The bounds a store is opened with (`docs/design.md` §3, "Bounds").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Every connection the store opens, now or later (name lookup, TCP, TLS,
    /// authentication, creating its tables), answers within this.
    pub connect: Duration,
    /// One request, until [`crate::store::Store::set_op_timeout`] says otherwise.
    pub op: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { connect: DEFAULT_CONNECT_TIMEOUT, op: DEFAULT_OP_TIMEOUT }
    }
}

/// `f`, or [`Error::Unavailable`] naming `what` when it takes longer than `limit`.
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
