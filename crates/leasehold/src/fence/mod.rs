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

use crate::Key;

pub(crate) mod claim;
mod fencing;
pub(crate) use fencing::Authority;
pub use fencing::{ENV_FENCE, ENV_KEY, ENV_OWNER, Fencing};

// Each store's fence resource lives in its folder (`backends::<store>::fence`, hidden
// there); this is its one public path.
#[cfg(feature = "etcd")]
#[doc(inline)]
pub use crate::backends::etcd::fence as etcd;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "mysql")]
#[doc(inline)]
pub use crate::backends::mysql::fence as mysql;
#[cfg(feature = "postgres")]
#[doc(inline)]
pub use crate::backends::postgres::fence as postgres;
#[cfg(feature = "redis")]
#[doc(inline)]
pub use crate::backends::redis::fence as redis;
pub(crate) mod rule;
#[cfg(feature = "sqlite")]
#[doc(inline)]
pub use crate::backends::sqlite::fence as sqlite;

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
