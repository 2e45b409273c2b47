//! A store's raw-client baseline: the requests the store's leasehold backend sends for an
//! uncontended acquire and release, sent by the store's own client crate without leasehold's
//! `Locker`, `Lease` or store trait, so `leasehold bench` can measure both in the same run.
//! A store's baselines live in its folder under [`crate::stores`] (`baseline.rs`) and are
//! handed out by its kit ([`crate::stores::StoreKit::baselines`]); the bench names no store.

use std::sync::Arc;

/// What a baseline's request failed with, in words.
pub type RawError = String;

/// One way of taking a free key and giving it back with a store's raw client. Object-safe,
/// so the bench holds any store's as `Arc<dyn RawClient>`.
#[async_trait::async_trait]
pub trait RawClient: Send + Sync {
    /// One attempt to take `key` (no waiting): `Ok(None)` when the store says it is held.
    /// An error is a request that failed or got an answer the baseline does not expect.
    async fn acquire(&self, key: &str) -> Result<Option<Box<dyn RawHeld>>, RawError>;

    /// Takes `key`, waiting up to `wait` where the client can wait (a store's own lock
    /// recipe); `Ok(None)` when it was not granted in that time. One attempt by default.
    async fn acquire_within(
        &self,
        key: &str,
        _wait: std::time::Duration,
    ) -> Result<Option<Box<dyn RawHeld>>, RawError> {
        self.acquire(key).await
    }
}

/// A key a [`RawClient`] holds.
#[async_trait::async_trait]
pub trait RawHeld: Send {
    /// Gives the key back; an error when the store says it was no longer this holder's (or
    /// the request failed).
    async fn release(self: Box<Self>) -> Result<(), RawError>;
}

/// A raw baseline as the bench reports it: what it sends, in words (its row's label), and
/// the client.
#[derive(Clone)]
pub struct Baseline {
    /// The report's label for this baseline: the client and the requests it sends.
    pub label: &'static str,
    /// Whether this is the baseline sending the same requests as leasehold's store, which the
    /// headline ratio is taken against (a store has at most one).
    pub same_requests: bool,
    /// The client.
    pub client: Arc<dyn RawClient>,
}

impl std::fmt::Debug for Baseline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Baseline")
            .field("label", &self.label)
            .field("same_requests", &self.same_requests)
            .finish()
    }
}

/// A baseline of the handoff scenario: one client per contending task (each with a session
/// of its own where the store's recipe needs one), waiting with
/// [`RawClient::acquire_within`].
#[derive(Clone)]
pub struct HandoffBaseline {
    /// The report's label for it.
    pub label: &'static str,
    /// One client per task.
    pub clients: Vec<Arc<dyn RawClient>>,
}

/// A store's own load tool (pgbench) running leasehold's requests, or the store's bare lock,
/// for `leasehold bench`'s uncontended scenario: a separate process, so it runs a whole
/// measurement at a time rather than in slices with the in-process contenders.
#[async_trait::async_trait]
pub trait NativeLoad: Send + Sync {
    /// The report's label for it: the tool and what it runs.
    fn label(&self) -> &'static str;

    /// Cycles per second the tool measured running on `key` for `d` (whole seconds, at least
    /// one, where the tool counts in seconds). An error when the tool is missing or failed.
    async fn cycles_per_s(&self, key: &str, d: std::time::Duration) -> Result<f64, RawError>;
}
