//! The `Store` of the Redis forms that run the scripts on one node per key (one server, the
//! Sentinel form's primary, a cluster), written once: each form says how its scripts reach a
//! key's node ([`Form`]) and writes what it does its own way (`guarantees`, `renew_many`,
//! `release`, `holders`); [`form_store!`] writes the rest of `Store` over that.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use redis::aio::ConnectionLike;

use super::Names;
use super::script_calls::{Answer, On};
use super::wait::Intents;
use crate::store::{AcquireRequest, Attempt, Grant, RenewItem};
use crate::{FenceToken, Key, OwnerToken, Result, Store};

/// What differs between the forms in how a request reaches the node of its key.
#[async_trait]
pub(super) trait Form: Intents {
    /// The connection its scripts are sent on.
    type Conn: ConnectionLike + Clone + Send + Sync;

    /// Its key names (they carry the op timeout a release's tombstone lasts).
    fn names(&self) -> &Names;

    /// The scripts, on the connection that reaches a request's key now: the server, the
    /// primary in use, or the cluster connection (which routes each call by its first key).
    async fn scripts(&self) -> Result<On<'_, Self::Conn>>;

    /// A grant attempt of any mode: the fence, or the holder's time left. One script call,
    /// unless the form waits for replicas or retries on a new primary.
    async fn grant(&self, req: &AcquireRequest<'_>) -> Result<Answer> {
        self.scripts().await?.grant(req).await
    }
}

/// [`Store::try_acquire`]: [`Form::grant`]'s fence is a grant, its time left busy.
pub(super) async fn try_acquire<F: Form>(form: &F, req: &AcquireRequest<'_>) -> Result<Attempt> {
    let sent = Instant::now();
    Ok(match form.grant(req).await? {
        Ok(fence) => Attempt::Granted(Grant::new(FenceToken::new(fence), sent)),
        Err(pttl) => Attempt::Busy { holder_expires_in: pttl },
    })
}

/// [`Store::renew`]: a batch of one.
pub(super) async fn renew<F: Form + Store>(
    form: &F,
    key: &Key,
    owner: &OwnerToken,
    ttl: Duration,
) -> Result<bool> {
    let item = RenewItem { key: key.clone(), owner: *owner, ttl };
    Ok(form.renew_many(std::slice::from_ref(&item)).await?[0])
}

/// [`Store::forget`]: the `FORGET` script on the key's node.
pub(super) async fn forget<F: Form>(form: &F, key: &Key) -> Result<()> {
    form.scripts().await?.forget(key).await
}

/// `impl Store for $form`: the methods given, and the rest written once (above, and waiting
/// by watching, a waiting writer recording its intent: `wait.rs`).
macro_rules! form_store {
    ($form:ty { $($own:tt)* }) => {
        #[async_trait::async_trait]
        impl $crate::Store for $form {
            $($own)*

            async fn try_acquire(
                &self,
                req: &$crate::store::AcquireRequest<'_>,
            ) -> $crate::Result<$crate::store::Attempt> {
                $crate::backends::redis::form::try_acquire(self, req).await
            }

            async fn acquire(
                &self,
                req: &$crate::store::AcquireRequest<'_>,
                until: Option<std::time::Instant>,
            ) -> $crate::Result<$crate::store::Attempt> {
                $crate::backends::redis::wait::acquire(self, req, until).await
            }

            async fn renew(
                &self,
                key: &$crate::Key,
                owner: &$crate::OwnerToken,
                ttl: std::time::Duration,
            ) -> $crate::Result<bool> {
                $crate::backends::redis::form::renew(self, key, owner, ttl).await
            }

            fn set_op_timeout(&self, op_timeout: std::time::Duration) {
                $crate::backends::redis::form::Form::names(self).set_op_timeout(op_timeout);
            }

            async fn forget(&self, key: &$crate::Key) -> $crate::Result<()> {
                $crate::backends::redis::form::forget(self, key).await
            }
        }
    };
}
pub(super) use form_store;
