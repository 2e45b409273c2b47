//! A store's raw-client baseline: the requests the store's leasehold backend sends for an
//! uncontended acquire and release, sent by the store's own client crate without leasehold's
//! `Locker`, `Lease` or store trait, so `leasehold bench` can measure both in the same run.
//! A store's baselines live in its folder under [`crate::stores`] (`baseline.rs`) and are
//! handed out by its kit ([`crate::stores::StoreKit::baselines`]); the bench names no store.

use std::sync::Arc;
use std::time::Duration;

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
    /// Which of the report's ratios pairs leasehold with it, if any.
    pub paired: Paired,
    /// How a ratio line of the text table names it, where shorter than `label` (none: the
    /// label).
    pub ratio_name: Option<&'static str>,
    /// The client.
    pub client: Arc<dyn RawClient>,
}

impl std::fmt::Debug for Baseline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Baseline")
            .field("label", &self.label)
            .field("paired", &self.paired)
            .finish()
    }
}

/// Which ratio of the report pairs leasehold with a [`Baseline`] (each at most once per store).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paired {
    /// A row of its own, no ratio (a peer crate).
    No,
    /// The headline ratio (`leasehold_time_per_cycle_vs_raw`): the raw client doing what
    /// leasehold's store does, with the store's own requests or, where a bare lock of the
    /// store's is the usual recipe, that.
    Headline,
    /// The second ratio (`leasehold_time_per_cycle_vs_raw_fenced`): the raw client sending
    /// leasehold's very requests, where the headline is the store's bare recipe.
    SameRequests,
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
    /// A peer crate (its ratio is `leasehold_handoffs_vs_peer`) rather than the store's own
    /// lock recipe (`leasehold_handoffs_vs_own_lock`).
    pub peer: bool,
    /// What its clients send, by the names [`ServerView::requests`] counts, to report store
    /// requests per acquisition; empty where not counted.
    pub requests: &'static [&'static str],
}

/// Requests a server counted ([`ServerView::requests`]): how many, and the server time they
/// took in µs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Requests {
    /// Calls.
    pub calls: u64,
    /// Server time, µs.
    pub usec: u64,
}

impl Requests {
    /// What was counted between `before` and `self` (a counter that went back, a restarted
    /// server, counts as none).
    pub fn since(self, before: Requests) -> Requests {
        Requests {
            calls: self.calls.saturating_sub(before.calls),
            usec: self.usec.saturating_sub(before.usec),
        }
    }
}

/// What `leasehold bench` reads of a store's server beside the requests it measures: its
/// version, its counters of requests by name (so a run can report store requests per
/// acquisition and server time per request), and the time left on leases. Handed out by a
/// kit ([`crate::stores::StoreKit::server_view`]) connected to one server.
#[async_trait::async_trait]
pub trait ServerView: Send + Sync {
    /// The server's version, in its words; `?` when it does not say.
    async fn version(&self) -> String;

    /// What counts the requests, as the report names it (the server's statistics command).
    fn counter(&self) -> &'static str;

    /// The requests of the given names the server counted so far (since its start or its
    /// counters' reset). A request a server-side script makes is counted under its own name,
    /// so naming only what a client sends counts client requests. An error when the server
    /// could not be asked.
    async fn requests(&self, names: &[&str]) -> Result<Requests, RawError>;

    /// The names leasehold's store sends (scripts, subscriptions, pings).
    fn leasehold_requests(&self) -> &'static [&'static str];

    /// The names of leasehold's grant and release requests alone, whose server time per
    /// request the uncontended scenario reports.
    fn leasehold_timed(&self) -> &'static [&'static str];

    /// The names of the [`Paired::Headline`] baseline's grant, whose server time per request
    /// the uncontended scenario reports beside leasehold's.
    fn headline_timed(&self) -> &'static [&'static str];

    /// How the report names those two timed requests in words: leasehold's
    /// ([`ServerView::leasehold_timed`]), then the headline baseline's
    /// ([`ServerView::headline_timed`]).
    fn timed_words(&self) -> [&'static str; 2];

    /// Milliseconds left on the lease of each leasehold key in `keys` (negative where the
    /// server keeps none for it); `None` where this store cannot say.
    async fn lease_ms_left(&self, keys: &[&str]) -> Result<Option<Vec<i64>>, RawError>;
}

/// A load tool of the store's that sends one request many times from many clients (the
/// ceiling the server sets), run as a process of its own for a whole measurement.
#[async_trait::async_trait]
pub trait RequestLoad: Send + Sync {
    /// The tool's name, as the table's ratio lines give it.
    fn name(&self) -> &'static str;

    /// The command it runs, as the report states it.
    fn command(&self) -> &'static str;

    /// Requests per second it measured over about `d`. An error when the tool is missing or
    /// failed.
    async fn requests_per_s(&self, d: std::time::Duration) -> Result<f64, RawError>;
}

/// A peer crate's mutex, semaphore permit and reader on the store, for the primitives
/// scenario ([`crate::stores::StoreKit::primitive_peer`]).
pub struct PrimitivePeer {
    /// The crate and its version, as the report names it.
    pub name: &'static str,
    /// Its mutex.
    pub mutex: PeerPrimitive,
    /// A permit of its semaphore of the asked size.
    pub permit: PeerPrimitive,
    /// A reader of its reader-writer lock.
    pub reader: PeerPrimitive,
}

/// One primitive of a [`PrimitivePeer`].
pub struct PeerPrimitive {
    /// The report's label: what its calls send per cycle.
    pub label: String,
    /// What it sends, by the names [`ServerView::requests`] counts.
    pub requests: &'static [&'static str],
    /// The client.
    pub client: Arc<dyn RawClient>,
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

/// The request for a plain exclusive grant of `key` to `owner` for `ttl`, each store request
/// bounded by `ttl` too: what the bench's store-only contender and a baseline's setup send
/// through the store trait, without a `Locker`.
pub fn mutex_request<'a>(
    key: &'a leasehold::Key,
    owner: &'a leasehold::OwnerToken,
    ttl: Duration,
) -> leasehold::store::AcquireRequest<'a> {
    leasehold::store::AcquireRequest {
        key,
        owner,
        ttl,
        op_timeout: ttl,
        info: None,
        mode: Default::default(),
        slot: None,
    }
}
