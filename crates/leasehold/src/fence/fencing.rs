//! What a fenced resource needs to know about a grant ([`Fencing`]), and the time limit a
//! fencing taken from a lease carries.

use std::fmt;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::{Error, FenceToken, Key, LostReason, OwnerToken, Result};

/// Environment variables the CLI exports to the child of `leasehold run`.
pub const ENV_KEY: &str = "LEASEHOLD_KEY";
/// See [`ENV_KEY`].
pub const ENV_FENCE: &str = "LEASEHOLD_FENCE";
/// See [`ENV_KEY`].
pub const ENV_OWNER: &str = "LEASEHOLD_OWNER";

/// What a fenced resource needs to know about a grant: which lock, which fence, whose.
///
/// One from [`crate::Lease::fencing`] also knows the lease's local deadline, and the SQL
/// fence resources bound their transactions by it (see [`Fencing::time_left`]). Equality and
/// serialization look at key, fence and owner only.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Fencing {
    key: Key,
    token: FenceToken,
    owner: OwnerToken,
    #[serde(skip)]
    bound: Option<Bound>,
}

/// What a fencing reads of the lease it is bound to (the client's lease state implements
/// it), so that this module does not depend on the protocol core.
pub(crate) trait Authority: Send + Sync {
    /// Why the lease was lost, if it was.
    fn lost_now(&self) -> Option<LostReason>;
    /// Its local deadline, if it has one.
    fn deadline(&self) -> Option<Instant>;
    /// The most time left a confirmed renewal gives it (`ttl·(1 − drift) − margin`), if it
    /// has a deadline.
    fn window(&self) -> Option<Duration>;
}

/// Where a fencing's time limit comes from.
#[derive(Debug, Clone)]
enum Bound {
    /// The lease it was taken from: its deadline as it moves, zero once lost or gone.
    Lease(Weak<dyn Authority>),
    /// A fixed instant.
    At(Instant),
}

impl PartialEq for Fencing {
    fn eq(&self, o: &Self) -> bool {
        (&self.key, self.token, self.owner) == (&o.key, o.token, o.owner)
    }
}

impl Eq for Fencing {}

impl Fencing {
    /// Builds one from its parts (e.g. read back from a request). It has no time limit: see
    /// [`Fencing::with_deadline`].
    pub fn new(key: Key, token: FenceToken, owner: OwnerToken) -> Self {
        Fencing { key, token, owner, bound: None }
    }

    /// Bound to a live lease: its local deadline, as renewals move it.
    pub(crate) fn bound_to<A: Authority + 'static>(mut self, lease: &Arc<A>) -> Self {
        let weak: Weak<dyn Authority> = Arc::downgrade(lease) as Weak<dyn Authority>;
        self.bound = Some(Bound::Lease(weak));
        self
    }

    /// This fencing with `deadline` as the end of its authority (for a grant whose lease
    /// lives elsewhere, e.g. another task that knows it).
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.bound = Some(Bound::At(deadline));
        self
    }

    /// Time left before the local deadline of the grant this came from, for the SQL fence
    /// resources' bounds: `None` without one (built with [`Fencing::new`] or read from the
    /// environment, or taken from a session lock, which has no deadline of its own); zero
    /// once the lease is lost, released or dropped.
    pub fn time_left(&self) -> Option<Duration> {
        let now = Instant::now();
        match self.bound.as_ref()? {
            Bound::At(d) => Some(d.saturating_duration_since(now)),
            Bound::Lease(w) => match w.upgrade() {
                None => Some(Duration::ZERO),
                Some(s) if s.lost_now().is_some() => Some(Duration::ZERO),
                Some(s) => s.deadline().map(|d| d.saturating_duration_since(now)),
            },
        }
    }

    /// The server-side backstop of a checked transaction (`docs/fencing.md`, "Transactions
    /// bounded by the lease"): the longest any one statement, or the idle time between two,
    /// may last before the database ends the transaction. For a fixed deadline, the time
    /// left; for a lease, the most time left a confirmed renewal can give it (its window),
    /// since a healthy lease's deadline keeps moving and the server cannot hear of it
    /// mid-transaction. `None` without a deadline; zero once the time is up.
    #[cfg_attr(not(feature = "_sql"), allow(dead_code))]
    pub(crate) fn backstop(&self) -> Option<Duration> {
        let left = self.time_left()?;
        if left.is_zero() {
            return Some(left);
        }
        match &self.bound {
            Some(Bound::Lease(w)) => {
                let window = w.upgrade().and_then(|s| s.window()).unwrap_or_default();
                Some(left.max(window))
            }
            _ => Some(left),
        }
    }

    /// The grant's local deadline as microseconds since a point fixed for this process, or
    /// `None` without one: recorded on the server by a check, so that the last check before
    /// the commit can move the server's deadline by exactly as much as renewals confirmed
    /// since moved the local one (see [`Fencing::renews`]).
    #[cfg_attr(not(feature = "_sql"), allow(dead_code))]
    pub(crate) fn deadline_mark(&self) -> Option<i64> {
        static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        let epoch = *EPOCH.get_or_init(Instant::now);
        let deadline = match self.bound.as_ref()? {
            Bound::At(d) => *d,
            Bound::Lease(w) => w.upgrade()?.deadline()?,
        };
        let us = deadline.saturating_duration_since(epoch).as_micros();
        Some(i64::try_from(us).unwrap_or(i64::MAX))
    }

    /// Whether renewals can move this fencing's deadline (it is bound to a lease, not to a
    /// fixed instant): only then may a commit's last check take a deadline later than the
    /// one its checks recorded.
    #[cfg_attr(not(feature = "_sql"), allow(dead_code))]
    pub(crate) fn renews(&self) -> bool {
        matches!(self.bound, Some(Bound::Lease(_)))
    }

    cfg_fence_table! {
        /// The error for an effect refused because the grant's time is up.
        pub(crate) fn time_is_up(&self) -> Error {
            let reason = match &self.bound {
                Some(Bound::Lease(w)) => match w.upgrade() {
                    None => LostReason::Released,
                    Some(s) => s.lost_now().unwrap_or(LostReason::DeadlinePassed),
                },
                _ => LostReason::DeadlinePassed,
            };
            Error::Lost { key: self.key.clone(), reason }
        }

        /// The error for a checked transaction the database ended (its session closed, its
        /// statement cancelled by the backstop): the grant's loss once its time is up, else
        /// [`LostReason::SessionEnded`] saying the transaction outlived the backstop, so the
        /// holder hears a loss of its transaction, never a bare driver error. Nothing of the
        /// transaction was committed.
        #[cfg_attr(not(feature = "_sql"), allow(dead_code))]
        pub(crate) fn ended_by_bound(&self, why: &str) -> Error {
            if self.time_left().is_some_and(|l| l.is_zero()) {
                return self.time_is_up();
            }
            let bound = self.backstop().unwrap_or_default();
            Error::Lost {
                key: self.key.clone(),
                reason: LostReason::SessionEnded(format!(
                    "the database ended the checked transaction, nothing committed: a statement \
                     ran, or the transaction sat idle, longer than the lease's window \
                     ({bound:?}); do long work outside the transaction ({why})"
                )),
            }
        }
    }

    /// Reads `LEASEHOLD_KEY`, `LEASEHOLD_FENCE` and `LEASEHOLD_OWNER`, as exported by
    /// `leasehold run`. Missing or malformed variables are [`Error::InvalidInput`].
    pub fn from_env() -> Result<Self> {
        let var = |name: &str| {
            std::env::var(name)
                .map_err(|_| Error::invalid(format!("{name} is not set (or not UTF-8)")))
        };
        let token = var(ENV_FENCE)?
            .parse::<u64>()
            .map_err(|_| Error::invalid(format!("{ENV_FENCE} is not an unsigned integer")))?;
        Ok(Fencing::new(Key::new(var(ENV_KEY)?)?, FenceToken::new(token), var(ENV_OWNER)?.parse()?))
    }

    /// The lock key the fence belongs to.
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// The fence.
    pub fn token(&self) -> FenceToken {
        self.token
    }

    /// The owner token of the grant.
    pub fn owner(&self) -> OwnerToken {
        self.owner
    }
}

impl fmt::Display for Fencing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{} ({})", self.key, self.token, self.owner)
    }
}
