//! What the tools know about one kind of store beyond the library's descriptor
//! ([`StoreKit`]), each store's answer in its folder under [`crate::stores`].

use std::path::PathBuf;

use leasehold::{Locker, Scheme, StoreUrl};

use std::sync::Arc;

use crate::baseline::{
    Baseline, HandoffBaseline, NativeLoad, PrimitivePeer, RequestLoad, ServerView,
};
use crate::failure::Plan;
use crate::family::Family;
use crate::resource::Resource;
use crate::scale::ScaleRun;

/// Where chaos's fenced resource lives and what it is, for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceSpec {
    /// What [`crate::stores::open_resource`] opens (it may carry the store's password).
    pub spec: String,
    /// Where the resource is, in words (tables, keys), for the report.
    pub what: String,
    /// Whether a write to it is a transaction that can be held open (a SQL resource), which
    /// `stalled-holder-tx` needs.
    pub transactional: bool,
}

/// What the tools know about one kind of store beyond the library's descriptor. Every
/// method has the answer of a store that has none of it: no private server to fail, no
/// resource on the store (chaos then writes to an SQLite file of its own), nothing to clean
/// up.
#[async_trait::async_trait]
pub trait StoreKit: Sync {
    /// The URL schemes this entry answers.
    fn schemes(&self) -> &'static [Scheme];

    /// How `store-kill` (with `failover`, `failover`) runs on a private server of this
    /// store; `None` when this tool cannot run it here.
    fn plan(&self, _failover: bool) -> Option<Plan> {
        None
    }

    /// In words, what [`StoreKit::plan`] starts, for the message naming the stores that
    /// have a plan.
    fn plan_outline(&self, _failover: bool) -> &'static str {
        ""
    }

    /// Chaos's fenced resource on the user's store `url`, when this build can hold one there.
    fn resource(&self, _url: &StoreUrl) -> Option<ResourceSpec> {
        None
    }

    /// Opens chaos's fenced resource on `url` (a spec [`StoreKit::resource`] made, or a store
    /// URL a test hands over) when `url`'s scheme is one this entry holds a resource on in
    /// this build; `None` otherwise, and by default. Panics when the store cannot be reached
    /// or its fence table set up (see [`crate::stores::open_resource`]).
    async fn open_resource(&self, _url: &StoreUrl) -> Option<Box<dyn Resource>> {
        None
    }

    /// Removes what chaos's trials on `key` (a semaphore of `permits`) left on the store
    /// beside the resource and the released lease: keys only chaos uses. An error says
    /// what could not be removed.
    async fn forget(
        &self,
        _url: &StoreUrl,
        _key: &str,
        _permits: Option<u32>,
    ) -> Result<(), String> {
        Ok(())
    }

    /// A locker on `url` whose fences come from `file`
    /// (`FileFences` in the Redis folder), for a store that issues none of its own but
    /// takes an external source; `None` where the store's fences are its own.
    async fn open_with_fence_file(
        &self,
        _url: &str,
        _file: PathBuf,
    ) -> Option<leasehold::Result<Locker>> {
        None
    }

    /// The store's raw-client baselines on the user's store `url` (connected, ready to
    /// run), for `leasehold bench`'s uncontended scenario: the store's own client sending
    /// the requests its leasehold backend sends. None where this build has none for the
    /// store; an error when connecting failed.
    async fn baselines(&self, _url: &StoreUrl) -> Result<Vec<Baseline>, String> {
        Ok(Vec::new())
    }

    /// The store's baselines for `leasehold bench`'s handoff scenario on `url`, `tasks`
    /// clients each (a store's own lock recipe, where it has one). None by default; an error
    /// when connecting failed.
    async fn handoff_baselines(
        &self,
        _url: &StoreUrl,
        _tasks: usize,
    ) -> Result<Vec<HandoffBaseline>, String> {
        Ok(Vec::new())
    }

    /// The store's own load tool running on `url` (pgbench), for the uncontended scenario:
    /// one entry per script it runs. None by default; an error when the URL's settings
    /// cannot be read.
    fn native_loads(&self, _url: &StoreUrl) -> Result<Vec<Arc<dyn NativeLoad>>, String> {
        Ok(Vec::new())
    }

    /// Whether `leasehold bench`'s handoff also runs with one store connection per task: for
    /// a store whose waiters in other processes are woken by the store's own notification
    /// (NOTIFY, a watch, the file lock) rather than by one locker's queue.
    fn handoff_per_connection(&self) -> bool {
        false
    }

    /// What the bench reads of the server `url` names (its version, its request counters,
    /// the time left on leases), connected; None where this build has nothing to read of the
    /// store; an error when connecting failed.
    async fn server_view(&self, _url: &StoreUrl) -> Result<Option<Arc<dyn ServerView>>, String> {
        Ok(None)
    }

    /// The raw clients `leasehold bench`'s many-keys scenario runs beside leasehold on `url`,
    /// each shared by all its tasks (as a locker's one connection is). None by default; an
    /// error when connecting failed.
    async fn many_keys_baselines(&self, _url: &StoreUrl) -> Result<Vec<Baseline>, String> {
        Ok(Vec::new())
    }

    /// The store's load tool sending one request from many clients on `url` (the server's
    /// ceiling, which many-keys compares with), where it has one; an error when the URL's
    /// settings cannot be read.
    fn request_load(&self, _url: &StoreUrl) -> Result<Option<Arc<dyn RequestLoad>>, String> {
        Ok(None)
    }

    /// A peer crate's mutex, permit (of a semaphore of `permits`) and reader on `url`, for
    /// the primitives scenario, where this build has one for the store; an error when
    /// connecting failed.
    async fn primitive_peer(
        &self,
        _url: &StoreUrl,
        _permits: u32,
    ) -> Result<Option<PrimitivePeer>, String> {
        Ok(None)
    }

    /// The store `url` against the reference store `reference` of the same family (a
    /// sharded deployment against one server of its kind), connected, for `leasehold bench
    /// --single`; None where this build has no comparison for the store; an error when
    /// `reference` is not of the family or connecting failed.
    async fn compare_with(
        &self,
        _url: &StoreUrl,
        _reference: &StoreUrl,
    ) -> Result<Option<Box<dyn Family>>, String> {
        Ok(None)
    }

    /// The store's part of `leasehold bench --scenario scale` (how it reads its size, its
    /// fenced write, how long it waits out the horizon); None where this build has none.
    fn scale(&self) -> Option<&'static dyn ScaleRun> {
        None
    }
}
