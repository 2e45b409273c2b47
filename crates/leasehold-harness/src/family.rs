//! A store against a reference store of the same family in one run (`leasehold bench
//! --single`: a sharded deployment against one server of its kind): what the bench needs of
//! each side beyond a locker, handed out by the store's kit
//! ([`crate::stores::StoreKit::compare_with`]) so that the comparison names no store.

use std::sync::Arc;

use crate::baseline::{RawClient, RawError, RequestLoad, ServerView};

/// One server of a side whose request counters count (a shard's primary, or the one server).
pub struct Member {
    /// Its address, `host:port`, as the report names it.
    pub addr: String,
    /// Its counters.
    pub view: Arc<dyn ServerView>,
}

/// One side of the comparison.
pub struct Side {
    /// The servers whose counters count, in the order the report lists them.
    pub members: Vec<Member>,
    /// The raw client sending leasehold's own grant and release, uncontended, on this side's
    /// connection kind (routed by key where the side is sharded).
    pub raw: Arc<dyn RawClient>,
    /// The store's load tool on this side (across every shard where it is sharded).
    pub load: Arc<dyn RequestLoad>,
}

/// The two sides and what the comparison reads of them.
#[async_trait::async_trait]
pub trait Family: Send + Sync {
    /// The store measured (index 1 in the report) and the reference (index 0), in that order.
    fn sides(&self) -> [&Side; 2];

    /// The names of every request leasehold's store sends on either side, by the members'
    /// counters' names: the server time they took is the time per cycle.
    fn counted(&self) -> &'static [&'static str];

    /// The names of the requests a cycle sends once per grant and once per release (their
    /// calls count the cycles each member served).
    fn per_cycle(&self) -> &'static [&'static str];

    /// How the table names the load tool's figures: what it runs, and what it adds on the
    /// measured side (e.g. a flag to reach every shard), with its leading space.
    fn load_label(&self) -> (&'static str, &'static str);

    /// The report's name for the raw client's scenario.
    fn raw_label(&self) -> &'static str;

    /// The name the store gives the lease of the leasehold key `key` (what the raw client is
    /// given); an error for a key leasehold refuses.
    fn key_name(&self, key: &str) -> Result<String, RawError>;

    /// Of the leasehold keys `keys`, the share each member of the measured side serves, in
    /// the members' order.
    async fn key_share(&self, keys: &[String]) -> Result<Vec<f64>, RawError>;
}
