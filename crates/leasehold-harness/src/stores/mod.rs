//! What the tools and tests know about each store, one folder per store: how to start a
//! private server and fail it, the fenced resource chaos writes to on it, and what a chaos
//! run leaves on it (how long a frozen holder's session outlives it is the library's
//! `StoreUrl::session_timeout`). Each folder implements
//! [`StoreKit`]; [`KITS`] is the one list, looked up by the library's [`Scheme`].
//!
//! Adding a store here: its folder (`mod.rs` with its `Kit`, `server.rs`, and `resource.rs`
//! behind its feature when it can hold the resource: a [`crate::resource::Resource`] its
//! kit's [`StoreKit::open_resource`] opens) and one line in [`KITS`].

use std::path::{Path, PathBuf};

use leasehold::{Locker, Scheme, StoreUrl};

use crate::failure::Plan;
pub use crate::kit::{ResourceSpec, StoreKit};
use crate::resource::Resource;

pub mod etcd;
pub mod mysql;
pub mod nats;
pub mod postgres;
pub mod redis;
pub mod sqlite;
pub mod topology;
pub mod zookeeper;

/// Every store the tools know something about, in the order messages list them.
pub const KITS: &[&dyn StoreKit] = &[
    &redis::Kit,
    &redis::RedlockKit,
    &redis::ClusterKit,
    &postgres::Kit,
    &mysql::Kit,
    &etcd::Kit,
    &zookeeper::Kit,
    &nats::Kit,
    &sqlite::Kit,
];

/// What the tools know about the store `scheme` names (a store with no entry knows nothing:
/// the trait's defaults).
pub fn kit(scheme: Scheme) -> &'static dyn StoreKit {
    KITS.iter().copied().find(|k| k.schemes().contains(&scheme)).unwrap_or(&NONE)
}

/// A store the tools know nothing special about.
struct NoKit;

static NONE: NoKit = NoKit;

impl StoreKit for NoKit {
    fn schemes(&self) -> &'static [Scheme] {
        &[]
    }
}

/// The plan for `store-kill` (or, with `failover`, `failover`) on the store `scheme` names;
/// an error naming the stores that have one.
pub fn plan(scheme: Scheme, failover: bool) -> Result<Plan, String> {
    if let Some(p) = kit(scheme).plan(failover) {
        return Ok(p);
    }
    let with: Vec<String> =
        with_plan(failover).iter().map(|(s, outline)| format!("{s}://{outline}")).collect();
    let listed = match with.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => {
            let sep = if failover { " or " } else { ", " };
            format!("{}{sep}{last}", rest.join(", "))
        }
        None => String::new(),
    };
    Err(if failover {
        format!(
            "failover runs on replicated stores this tool starts itself: {listed}; not {}://",
            scheme.as_str()
        )
    } else {
        format!(
            "store-kill kills and restarts a store this tool starts itself ({listed}), never one \
             it did not start; not {}://",
            scheme.as_str()
        )
    })
}

/// The stores `store-kill` (with `failover`, `failover`) runs on, in [`KITS`]'s order, as
/// errors and `chaos --help` list them: each one's first scheme and, in words, what its plan
/// starts ([`StoreKit::plan_outline`]).
pub fn with_plan(failover: bool) -> Vec<(&'static str, &'static str)> {
    KITS.iter()
        .filter(|k| k.plan(failover).is_some())
        .map(|k| (k.schemes()[0].as_str(), k.plan_outline(failover)))
        .collect()
}

/// Chaos's resource for `url`: on the user's store where its kit can hold one, else an
/// SQLite file in `out`. With `transactional`, only a resource whose write can be held open.
pub fn resource_spec(url: &StoreUrl, out: &Path, transactional: bool) -> ResourceSpec {
    match kit(url.scheme()).resource(url) {
        Some(r) if r.transactional || !transactional => r,
        _ => own_resource(out),
    }
}

/// The tool's own resource in `out`, where a store holds none (an SQLite file).
pub fn own_resource(out: &Path) -> ResourceSpec {
    sqlite::resource_in(out)
}

/// Whether `spec` is the tool's own resource ([`own_resource`]): a file on this machine,
/// whose frozen holder no server can end a transaction of, and which a run starts fresh
/// (another store's fences, from an earlier run, are not comparable).
pub fn is_own_resource(spec: &str) -> bool {
    sqlite::is_own_file(spec)
}

/// Opens the tool's own resource, when `spec` is one ([`own_resource`]; creating the file
/// and its tables).
pub fn open_own_resource(spec: &str) -> Option<Box<dyn Resource>> {
    sqlite::resource::SqliteResource::open(spec).map(|r| Box::new(r) as Box<dyn Resource>)
}

/// Opens a resource spec, as [`resource_spec`] makes them: the tool's own resource (a file),
/// or a store URL (the lock store's own), opened by the first kit in [`KITS`] that holds a
/// resource on its scheme, connecting as its parsed configuration says; sets up the fence
/// table if needed. Panics on a spec no store of this build opens (its feature is off) or
/// a store it cannot reach: the tests and chaos's holders have nothing to go on without it.
pub async fn open_resource(spec: &str) -> Box<dyn Resource> {
    if let Some(r) = open_own_resource(spec) {
        return r;
    }
    let url = StoreUrl::parse(spec).expect("resource store URL");
    for kit in KITS {
        if let Some(r) = kit.open_resource(&url).await {
            return r;
        }
    }
    panic!("no resource on {url} in this build (its store's feature is off)")
}

/// Removes the tool's own resource in `out`, so that a run starts it fresh.
pub fn remove_own_resource(out: &Path) {
    sqlite::remove_file_in(out);
}

/// A locker on `url`, its fences from `file` where the store takes an external fence source
/// (Redlock), else a plain one.
pub async fn open_with_fence_file(url: &str, file: PathBuf) -> leasehold::Result<Locker> {
    let scheme = StoreUrl::parse(url)?.scheme();
    match kit(scheme).open_with_fence_file(url, file).await {
        Some(opened) => opened,
        None => Locker::connect(url).await,
    }
}
