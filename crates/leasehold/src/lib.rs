//! Distributed locks and leases that stay correct when a holder stalls, a store fails over or
//! the network drops.
//!
//! - [`Locker`] acquires a [`Lease`] on a key from a [`store::Store`]; waiting uses the store's
//!   notification, and an acquire whose answer never came is reported as unknown and cleaned
//!   up, never taken for a grant or a refusal.
//! - Every grant carries an owner token (checked by every renew and release) and a
//!   [`FenceToken`] that only grows. A lease has a conservative *local deadline*; when it
//!   passes unconfirmed, or the store says not-owner, [`Lease::lost`] fires and
//!   [`Lease::guard`] cancels the work.
//! - A lock alone cannot stop a holder that stalled past its lease from writing. The
//!   protected resource can: see [`fence`].
//! - Beyond the mutex, on the same protocol: semaphores ([`Locker::acquire_permit`], N slots
//!   each with its own fence), readers and writers ([`Locker::acquire_shared`]; the writer is
//!   the plain grant), and several keys at once ([`Locker::acquire_all`], sorted, all or
//!   nothing). Stores that cannot hold one refuse it ([`Error::Unsupported`]).
//! - Each store says what it promises under which faults: [`Guarantees`].
//! - [`sizing`] measures the store's renewal round trips and this process's pauses and
//!   recommends a ttl, renew interval and margin, with the arithmetic.
//!
//! ```
//! use std::time::Duration;
//! use leasehold::{Locker, Wait};
//!
//! async fn report(locker: &Locker) -> leasehold::Result<()> {
//!     let lease = locker
//!         .acquire("nightly-report", Duration::from_secs(30))
//!         .wait(Wait::For(Duration::from_secs(10)))
//!         .await?;
//!     let fence = lease.fence(); // present it to the resource you write to
//!     lease.guard(async { /* the critical section; cancelled if the lease is lost */ }).await?;
//!     assert!(lease.release().await?.is_clean(), "it was still ours");
//!     # let _ = fence;
//!     Ok(())
//! }
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> leasehold::Result<()> {
//!     # let dir = tempfile::tempdir().unwrap();
//!     # let url = format!("sqlite://{}/locks.db", dir.path().display());
//!     let locker = Locker::connect(&url).await?;
//!     let result = report(&locker).await;
//!     // On a current-thread runtime, close before returning: a lease that a `?` dropped in
//!     // `report` is released in the background, and this waits for it (a multi-threaded
//!     // runtime's last locker handle does so by itself). `#[tokio::test]` is a
//!     // current-thread runtime too: tests that take leases want
//!     // `#[tokio::test(flavor = "multi_thread")]`.
//!     locker.close().await?;
//!     result
//! }
//! ```
//!
//! # Cargo features
//!
//! | feature | stores and resources | pulls in | platforms |
//! |---|---|---|---|
//! | `sqlite` (default) | `sqlite://PATH`, the embedded store; `fence::sqlite` | rusqlite with **bundled C SQLite** (a C compiler at build time) | Linux, Android, macOS, iOS, FreeBSD (a boot identity is needed) |
//! | `file` (default) | `file://DIR`, `flock(2)` session locks | nix (fs, inotify) | Linux only; elsewhere the URL is refused |
//! | `redis` | `redis://`, `redlock://`; `fence::redis` | redis-rs (tokio, connection manager, scripts) | any |
//! | `redis-tls` | `rediss://` | rustls with ring | any |
//! | `postgres` | `postgres://` lease table, session and transaction locks; `fence::postgres` | tokio-postgres | any |
//! | `mysql` | `mysql://` lease table and `GET_LOCK`; `fence::mysql` | mysql_async (pure Rust) | any |
//! | `etcd` | `etcd://`; `fence::etcd` | tonic and prost (no `protoc`: the messages are written in Rust) | any |
//! | `zookeeper` | `zk://` | zookeeper-client | any |
//! | `http` | `fence::http`, a tower layer that fences HTTP requests | http, tower-layer, tower-service | any |
//! | `tools` | `backends::<store>::tools` for each store built in: for leasehold's own bench/chaos tools, not a stable API | nothing | any |
//!
//! Without default features nothing platform-specific or written in C is compiled:
//! `leasehold = { version = "0.1", default-features = false, features = ["redis"] }`.
//!
//! Warnings (a lease dropped without release, a failed heartbeat) go through `tracing`: install
//! a subscriber to see them.
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[macro_use]
mod macros;

mod client;
mod error;
mod guarantees;
mod holder;
pub mod horizon;
mod key;
mod limits;
mod mode;
pub mod probe;
// `for_each_store!`, the one list of stores, for `wire.rs` too.
#[macro_use]
mod registry;
pub mod sizing;
pub mod store;
pub mod telemetry;
mod token;
mod url;
#[cfg(feature = "_peer")]
mod wire;

pub mod backends;
pub mod fence;

/// The protocol's rules as pure functions, for leasehold's own model and tests (feature
/// `tools`, not a stable API): the library's code calls each of them where it applies the
/// rule (`docs/model.md`).
#[cfg(feature = "tools")]
pub mod rules {
    pub use crate::client::lease_state::deadline_after;
    pub use crate::fence::rule::{may_apply, may_claim, may_forget, past_horizon};
    pub use crate::token::next_fence;
}

pub use client::{
    Acquire, AcquireAll, AcquirePermit, Lease, Leases, Locker, MAX_PERMITS, MAX_TTL, Permit,
    Released, Wait, default_margin,
};
pub use error::{BoxError, Error, LostReason, Result, StaleReason};
pub use fence::Fencing;
pub use guarantees::{CLOCK_ASSUMPTION, FenceRepeat, Guarantees, LockKind};
pub use holder::{Holder, HolderInfo};
pub use key::Key;
pub use limits::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_OP_TIMEOUT};
pub use mode::{Mode, Primitives};
pub use registry::{Scheme, StoreUrl, url_usage};
// For the crate's own code; the public path is `leasehold::store::Store`.
pub(crate) use store::Store;
pub use token::{FenceToken, OwnerToken};
pub use url::{parse_duration, redact};
