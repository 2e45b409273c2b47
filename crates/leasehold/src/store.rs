//! What store implementors need: the small async trait every backend implements, the types
//! of its requests and answers, and the two ways a store waits ([`acquire_watching`],
//! [`acquire_in_server`]). Users of the built-in stores need none of this.
//!
//! A store only knows single operations on `(key, owner)`; timing, waiting policy, the lost
//! signal, auto-renew and unknown-outcome cleanup live in [`crate::Locker`] and
//! [`crate::Lease`] so that every backend gets the same semantics.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use async_trait::async_trait;

pub use crate::mode::SlotOf;
use crate::{Error, FenceToken, Guarantees, Holder, HolderInfo, Key, Mode, OwnerToken, Result};

/// The largest fence a store may issue (see [`Guarantees`]).
pub use crate::guarantees::MAX_FENCE;

/// A future that resolves, with a description, when the session carrying a session lock ends.
pub type SessionEnd = Pin<Box<dyn Future<Output = String> + Send + 'static>>;

/// One acquisition request.
#[derive(Debug, Clone, Copy)]
pub struct AcquireRequest<'a> {
    /// The key.
    pub key: &'a Key,
    /// The owner token minted for this acquisition.
    pub owner: &'a OwnerToken,
    /// Requested lease length (ignored by session stores).
    pub ttl: Duration,
    /// Upper bound for one round trip; an attempt that takes longer has an unknown outcome.
    pub op_timeout: Duration,
    /// Who is asking, for operators: a store that can keep it beside the grant does, and
    /// returns it in [`Holder::info`]. Never used for any safety decision.
    pub info: Option<&'a HolderInfo>,
    /// Exclusive (the mutex, a writer) or shared (a reader). The locker sends
    /// [`Mode::Shared`] only to a store whose [`crate::Guarantees::primitives`] says
    /// `shared`; renew and release by `(key, owner)` must then find a reader's grant too.
    pub mode: Mode,
    /// For a semaphore's slot: which semaphore, and the permit count the caller named, to
    /// record and check with the grant. Sent only to a store that says `permits`.
    pub slot: Option<SlotOf<'a>>,
}

/// A successful grant.
#[non_exhaustive]
pub struct Grant {
    /// The fence issued atomically with the grant.
    pub fence: FenceToken,
    /// The instant **before** the request that was granted was sent; the local deadline is
    /// measured from here.
    pub sent_at: Instant,
    /// For session locks: resolves when the session ends. `None` for leases, and for sessions
    /// that can only end with this process (`flock`).
    pub session_end: Option<SessionEnd>,
    /// For session locks whose session can be suspended (a ZooKeeper or etcd client that lost
    /// its connection but whose session may still be alive): `false` while the store cannot
    /// confirm the session, so [`crate::Lease::admit`] refuses new work at once.
    pub session_live: Option<tokio::sync::watch::Receiver<bool>>,
}

impl Grant {
    /// A grant of `fence` whose request was sent at `sent_at`.
    pub fn new(fence: FenceToken, sent_at: Instant) -> Self {
        Grant { fence, sent_at, session_end: None, session_live: None }
    }

    /// Attaches a session-end signal.
    pub fn with_session_end(mut self, end: SessionEnd) -> Self {
        self.session_end = Some(end);
        self
    }

    /// Attaches a session-liveness signal (see [`Grant::session_live`]).
    pub fn with_session_live(mut self, live: tokio::sync::watch::Receiver<bool>) -> Self {
        self.session_live = Some(live);
        self
    }
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grant")
            .field("fence", &self.fence)
            .field("sent_at", &self.sent_at)
            .field("session", &self.session_end.is_some())
            .finish()
    }
}

/// The answer to one attempt.
#[derive(Debug)]
#[non_exhaustive]
pub enum Attempt {
    /// The key is ours.
    Granted(Grant),
    /// Someone else holds the key.
    Busy {
        /// How long the current holder's grant still runs, if the store knows: a waiter need
        /// not wake later than this even if no release notification arrives.
        holder_expires_in: Option<Duration>,
    },
}

/// One renewal in a batch.
#[derive(Debug, Clone)]
pub struct RenewItem {
    /// The key.
    pub key: Key,
    /// The owner that must still hold it.
    pub owner: OwnerToken,
    /// The new lease length, counted from when the store applies the renewal.
    pub ttl: Duration,
}

/// Something a waiter awaits between attempts. Created **before** the first attempt, so a
/// release that happens between a refused attempt and the wait is not missed.
#[async_trait]
pub trait Watch: Send {
    /// Returns when the key may have become free (a notification arrived) or at `until`,
    /// whichever is first. Spurious returns are allowed; missed notifications are not.
    async fn changed(&mut self, until: Instant);
}

/// A lock store. Object-safe: the locker holds an `Arc<dyn Store>`.
///
/// Every method is a single, atomic, owner-checked operation in the store; none may delete or
/// extend a grant without comparing the owner token in the same atomic step.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug + 'static {
    /// What this store, as configured, promises.
    fn guarantees(&self) -> Guarantees;

    /// One attempt: grant (issuing a fence atomically with it) or report busy.
    async fn try_acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt>;

    /// Acquires, waiting until `until` (None: one attempt). A store waits in one of two ways,
    /// and says which by how it answers:
    /// - it can be told (or can poll) when a key may have become free: subscribe, then
    ///   alternate attempts and waits, with [`acquire_watching`];
    /// - the server itself waits (a blocking lock call, a server-side queue): one bounded call
    ///   that carries the whole wait, with [`acquire_in_server`].
    ///
    /// Either way an attempt whose answer does not come within the op timeout (plus the wait,
    /// for a server-side wait) is [`Error::UnknownOutcome`].
    async fn acquire(&self, req: &AcquireRequest<'_>, until: Option<Instant>) -> Result<Attempt>;

    /// Extends the grant iff `owner` still holds `key`. `Ok(false)`: not ours any more.
    async fn renew(&self, key: &Key, owner: &OwnerToken, ttl: Duration) -> Result<bool>;

    /// Renews many grants in one round trip where the store allows; answers in input order.
    async fn renew_many(&self, items: &[RenewItem]) -> Result<Vec<bool>> {
        let mut out = Vec::with_capacity(items.len());
        for it in items {
            out.push(self.renew(&it.key, &it.owner, it.ttl).await?);
        }
        Ok(out)
    }

    /// Deletes the grant iff `owner` still holds `key`; answers whether it was still ours.
    async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool>;

    /// Current holders, of one key or of all keys.
    async fn holders(&self, key: Option<&Key>) -> Result<Vec<Holder>>;

    /// The bound on one request ([`crate::Locker::with_op_timeout`] passes it on), so that a
    /// store can bound the work it leaves in the server too (statement and lock timeouts),
    /// not only the wait for its answer. The default keeps nothing: the locker's timeout
    /// around each call is then the only bound.
    fn set_op_timeout(&self, op_timeout: Duration) {
        let _ = op_timeout;
    }

    /// Removes what the store keeps of `key` once nobody holds it (its fence counter, its
    /// lease row, its lock file), for throwaway keys such as the sizing probe's; a key still
    /// held is left alone. Only for keys nobody else will use: a later grant starts its
    /// fence from the store's clock again (still above the old ones on clock-backed stores),
    /// and a waiter that opened a `file://` lock file before it was removed would not exclude
    /// a newcomer. Default: nothing kept, nothing to do.
    async fn forget(&self, key: &Key) -> Result<()> {
        let _ = key;
        Ok(())
    }
}

/// Waiting by watching: `watch` subscribes to changes of the key **before** the first attempt
/// (so a release between a refused attempt and the wait is not missed); then attempts and
/// waits alternate, each wait ending at a notification, at the holder's expiry (plus a
/// millisecond, so the store's clock has passed it) or at `until`.
pub async fn acquire_watching<S, F, Fut>(
    store: &S,
    req: &AcquireRequest<'_>,
    until: Option<Instant>,
    watch: F,
) -> Result<Attempt>
where
    S: Store + ?Sized,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Box<dyn Watch>>>,
{
    acquire_watching_with(req, until, watch, || store.try_acquire(req)).await
}

/// [`acquire_watching`] with the store's own attempt instead of [`Store::try_acquire`]: for a
/// store whose attempts while waiting differ from a one-shot attempt (a refused writer that
/// records its intent, so that new readers wait behind it). Each attempt is bounded by the
/// op timeout.
pub async fn acquire_watching_with<F, Fut, A, AFut>(
    req: &AcquireRequest<'_>,
    until: Option<Instant>,
    watch: F,
    mut attempt: A,
) -> Result<Attempt>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Box<dyn Watch>>>,
    A: FnMut() -> AFut,
    AFut: Future<Output = Result<Attempt>>,
{
    let mut watch = match until {
        // Bounded too: a subscription to a frozen store must not hang the acquire.
        Some(_) => match tokio::time::timeout(req.op_timeout, watch()).await {
            Ok(w) => Some(w?),
            Err(_) => {
                return Err(Error::unavailable(
                    format!(
                        "subscribing to releases of {:?} got no answer within {:?}",
                        req.key, req.op_timeout
                    ),
                    None,
                ));
            }
        },
        None => None,
    };
    loop {
        let attempt = within_op_timeout(req, attempt()).await?;
        let Attempt::Busy { holder_expires_in } = attempt else {
            return Ok(attempt);
        };
        let (Some(until), Some(watch)) = (until, watch.as_mut()) else {
            return Ok(Attempt::Busy { holder_expires_in });
        };
        let now = Instant::now();
        if now >= until {
            return Ok(Attempt::Busy { holder_expires_in });
        }
        let wake = holder_expires_in
            .map(|d| now + d + Duration::from_millis(1))
            .map_or(until, |w| w.min(until));
        watch.changed(wake).await;
    }
}

/// Waiting in the server (a blocking lock call, a server-side queue): one call to `grant`
/// carrying the whole wait (`None`: a single attempt), whose answer must come within the wait
/// plus the op timeout, else the outcome is unknown.
pub async fn acquire_in_server<F, Fut>(
    req: &AcquireRequest<'_>,
    until: Option<Instant>,
    grant: F,
) -> Result<Attempt>
where
    F: FnOnce(Option<Duration>) -> Fut,
    Fut: Future<Output = Result<Attempt>>,
{
    let wait = until.map(|u| u.saturating_duration_since(Instant::now())).filter(|w| !w.is_zero());
    let limit = wait.map_or(req.op_timeout, |w| w + req.op_timeout);
    tokio::time::timeout(limit, grant(wait))
        .await
        .map_err(|_| Error::UnknownOutcome(format!("acquire of {:?} got no answer", req.key)))?
}

/// One acquire attempt bounded by the request's op timeout; no answer in time is an unknown
/// outcome (the store may have granted).
pub(crate) async fn within_op_timeout<T>(
    req: &AcquireRequest<'_>,
    attempt: impl Future<Output = Result<T>>,
) -> Result<T> {
    tokio::time::timeout(req.op_timeout, attempt).await.map_err(|_| {
        Error::UnknownOutcome(format!(
            "acquire of {:?} got no answer within {:?}",
            req.key, req.op_timeout
        ))
    })?
}

#[cfg(test)]
mod tests {
    use super::HolderInfo;

    #[test]
    fn holder_info_round_trips_as_one_line() {
        let info = HolderInfo::this_process().with_command("sh -c 'a\tb\nc'");
        let line = info.encode();
        assert!(!line.contains('\n'));
        let back = HolderInfo::decode(&line).expect("decodes");
        assert_eq!(back, info);
        assert_eq!(back.command, "sh -c 'a b c'");
        assert_eq!(back.pid, std::process::id());
        assert!(back.since_ms > 1_700_000_000_000);
        assert_eq!(HolderInfo::decode("not a holder line"), None);
    }

    #[test]
    fn long_commands_are_cut_at_a_char_boundary() {
        let info = HolderInfo::this_process().with_command("é".repeat(300));
        assert!(info.command.len() <= HolderInfo::MAX_COMMAND);
        assert!(info.command.chars().all(|c| c == 'é'));
    }
}
