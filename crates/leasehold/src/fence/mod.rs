//! Resource-side fencing (`docs/design.md`, "Fencing"): the protected resource, not the lock, rejects a holder
//! whose lease has ended.
//!
//! The protocol, for every resource kind:
//! 1. **claim**: before its first effect, the holder installs `(key, fence, owner)` on the
//!    resource. It succeeds iff the fence is greater than the installed one, or equal with the
//!    same owner (an idempotent re-claim), and the resource is guarded by the same lock key.
//! 2. **check**: every effect applies iff the installed fence is still exactly this holder's,
//!    checked atomically with the effect (same transaction, same script).
//!
//! Binding the owner stops two holders with one number from interleaving, but it keeps the
//! *first* claimant; after a store failure that would be the stale holder. So a repeated
//! fence is a safety failure, and no store here issues fences that go back (see
//! [`crate::FenceRepeat`]).

use std::fmt;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::error::StaleReason;
use crate::{Error, FenceToken, Key, LostReason, OwnerToken, Result};

// Each store's fence resource lives in its folder (`backends/<store>/fence.rs`); this is its
// one public path.
#[cfg(feature = "etcd")]
#[path = "../backends/etcd/fence.rs"]
pub mod etcd;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "mysql")]
#[path = "../backends/mysql/fence.rs"]
pub mod mysql;
#[cfg(feature = "postgres")]
#[path = "../backends/postgres/fence.rs"]
pub mod postgres;
#[cfg(feature = "redis")]
#[path = "../backends/redis/fence.rs"]
pub mod redis;
pub(crate) mod rule;
#[cfg(feature = "sqlite")]
#[path = "../backends/sqlite/fence.rs"]
pub mod sqlite;

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

/// An idempotency key for an effect on a resource that cannot check fences (a payment API, a
/// mail service, a webhook): derived from the lock key and the work item, **not** from the
/// grant, so two holders doing the same work (the overlap fencing would have refused) send the
/// same key and the resource applies the effect once. Stable across processes and versions;
/// at most 64 characters.
///
/// ```
/// let k = leasehold::Key::new("invoices").unwrap();
/// let a = leasehold::fence::idempotency_key(&k, "invoice-42/charge");
/// assert_eq!(a, leasehold::fence::idempotency_key(&k, "invoice-42/charge"));
/// assert_ne!(a, leasehold::fence::idempotency_key(&k, "invoice-43/charge"));
/// assert!(a.len() <= 64);
/// ```
pub fn idempotency_key(key: &Key, work_item: &str) -> String {
    // FNV-1a, 128 bits, over the key's and the item's lengths and bytes.
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let mut h = OFFSET;
    for part in [key.as_str().as_bytes(), work_item.as_bytes()] {
        for b in (part.len() as u64).to_le_bytes().iter().chain(part) {
            h ^= u128::from(*b);
            h = h.wrapping_mul(PRIME);
        }
    }
    format!("leasehold-{h:032x}")
}

cfg_fence_claim! {
    /// What a resource has installed, as read back when refusing.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct Installed {
        pub key: String,
        pub token: u64,
        pub owner: String,
    }
}

cfg_fence_resource! {
    /// Fence 0 means "this store issued no fence" (see [`crate::FenceRepeat::NoFence`]): such a
    /// grant cannot claim a fenced resource.
    pub(crate) fn require_token(resource: &str, fencing: &Fencing) -> Result<()> {
        if fencing.token.get() == 0 {
            return Err(Error::StaleFence {
                resource: resource.to_owned(),
                presented: fencing.token,
                installed: None,
                reason: StaleReason::NoFence,
            });
        }
        Ok(())
    }
}

cfg_fence_claim! {
    /// The error for a claim whose fence is older than the resource's horizon.
    #[cfg_attr(
        not(any(feature = "sqlite", feature = "redis", feature = "postgres")),
        allow(dead_code)
    )]
    pub(crate) fn past_horizon(resource: &str, presented: &Fencing) -> Error {
        Error::StaleFence {
            resource: resource.to_owned(),
            presented: presented.token,
            installed: None,
            reason: StaleReason::PastHorizon,
        }
    }

    pub(crate) fn stale(
        resource: &str,
        presented: &Fencing,
        installed: Option<Installed>,
    ) -> Error {
        let (installed, reason) = match installed {
            None => (None, StaleReason::Unclaimed),
            Some(i) if i.key != presented.key.as_str() => {
                (Some(FenceToken::new(i.token)), StaleReason::OtherKey { installed_key: i.key })
            }
            Some(i) if i.token == presented.token.get() => {
                (Some(FenceToken::new(i.token)), StaleReason::OtherOwner)
            }
            Some(i) if i.token < presented.token.get() => {
                (Some(FenceToken::new(i.token)), StaleReason::Unclaimed)
            }
            Some(i) => (Some(FenceToken::new(i.token)), StaleReason::Newer),
        };
        Error::StaleFence {
            resource: resource.to_owned(),
            presented: presented.token,
            installed,
            reason,
        }
    }
}

impl Installed {
    cfg_fence_table! {
        fn as_claim(&self) -> (&str, u64, &str) {
            (&self.key, self.token, &self.owner)
        }
    }
}

/// The claim rule ([`rule::may_claim`]) for a claim read back from a resource.
#[cfg_attr(not(feature = "mysql"), allow(dead_code))]
pub(crate) fn may_claim(installed: Option<&Installed>, f: &Fencing) -> bool {
    let owner = f.owner.hex();
    let owner = std::str::from_utf8(&owner).unwrap_or_default();
    rule::may_claim(installed.map(Installed::as_claim), (f.key.as_str(), f.token.get(), owner))
}

cfg_fence_table! {
    /// Succeeds iff `installed` is exactly `fencing` (key, token and owner): [`rule::may_apply`].
    pub(crate) fn verify(
        resource: &str,
        fencing: &Fencing,
        installed: Option<Installed>,
    ) -> Result<()> {
        let owner = fencing.owner().hex();
        let owner = std::str::from_utf8(&owner).unwrap_or_default();
        let presented = (fencing.key().as_str(), fencing.token().get(), owner);
        if rule::may_apply(installed.as_ref().map(Installed::as_claim), presented) {
            Ok(())
        } else {
            Err(stale(resource, fencing, installed))
        }
    }
}
