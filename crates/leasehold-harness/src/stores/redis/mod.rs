//! Redis in the tools: private servers (one, a primary and replica, a Cluster, a Sentinel
//! deployment, independent instances for Redlock) to kill and fail over, chaos's resource
//! under the user's prefix, and the keys chaos's trials leave that only chaos uses.

use leasehold::{Scheme, StoreUrl};

#[cfg(feature = "redis")]
use std::sync::Arc;

#[cfg(feature = "redis")]
use crate::baseline::{Baseline, HandoffBaseline, PrimitivePeer, RequestLoad, ServerView};
use crate::failure::Plan;
use crate::kit::{ResourceSpec, StoreKit};
use crate::resource::Resource;

#[cfg(feature = "redis")]
pub mod baseline;
pub mod cluster;
#[cfg(feature = "redis")]
pub mod family;
#[cfg(feature = "redis")]
pub mod fence_file;
#[cfg(any(feature = "peer-rslock", feature = "peer-distributed-lock"))]
pub mod peers;
pub mod redlock_set;
#[cfg(feature = "redis")]
pub mod resource;
#[cfg(feature = "redis")]
pub mod scale;
pub mod sentinel;
pub mod server;

/// Redis's entry in [`super::KITS`] (`redis://`; its other forms are run through topologies).
pub struct Kit;

/// Redis Cluster's entry in [`super::KITS`]: the bench's comparison with one server
/// (its failures run through [`crate::stores::topology`]).
pub struct ClusterKit;

#[async_trait::async_trait]
impl StoreKit for ClusterKit {
    fn schemes(&self) -> &'static [Scheme] {
        &[Scheme::RedisCluster]
    }

    /// Against one `redis://` server.
    async fn compare_with(
        &self,
        url: &StoreUrl,
        reference: &StoreUrl,
    ) -> Result<Option<Box<dyn crate::family::Family>>, String> {
        #[cfg(feature = "redis")]
        return family::compare_with(url, reference).await.map(Some);
        #[cfg(not(feature = "redis"))]
        {
            let _ = (url, reference);
            Ok(None)
        }
    }
}

/// Redlock's entry in [`super::KITS`]: its fences can come from a file.
pub struct RedlockKit;

#[async_trait::async_trait]
impl StoreKit for RedlockKit {
    fn schemes(&self) -> &'static [Scheme] {
        &[Scheme::Redlock]
    }

    async fn open_with_fence_file(
        &self,
        url: &str,
        file: std::path::PathBuf,
    ) -> Option<leasehold::Result<leasehold::Locker>> {
        #[cfg(feature = "redis")]
        {
            use leasehold::backends::redis::redlock::RedlockStore;
            let store = match RedlockStore::connect(url).await {
                Ok(s) => s,
                Err(e) => return Some(Err(e)),
            };
            let fences = std::sync::Arc::new(fence_file::FileFences(file));
            Some(Ok(leasehold::Locker::new(store.with_fence_source(fences))))
        }
        #[cfg(not(feature = "redis"))]
        {
            let _ = (url, file);
            None
        }
    }
}

/// The key prefix a Redis URL asks for, else leasehold's default.
#[cfg(feature = "redis")]
fn prefix(url: &StoreUrl) -> &str {
    leasehold::backends::redis::tools::prefix(url).unwrap_or("leasehold:")
}

#[async_trait::async_trait]
impl StoreKit for Kit {
    fn schemes(&self) -> &'static [Scheme] {
        &[Scheme::Redis]
    }

    fn plan(&self, failover: bool) -> Option<Plan> {
        Some(server::plan(failover))
    }

    #[cfg(feature = "redis")]
    fn scale(&self) -> Option<&'static dyn crate::scale::ScaleRun> {
        Some(&scale::Run)
    }

    fn plan_outline(&self, failover: bool) -> &'static str {
        if failover { " (a primary and a replica)" } else { "" }
    }

    /// Raw redis-rs: a plain SET NX PX (the headline), and leasehold's two scripts; rslock
    /// with `peer-rslock`.
    #[cfg(feature = "redis")]
    async fn baselines(&self, url: &StoreUrl) -> Result<Vec<Baseline>, String> {
        #[cfg_attr(not(feature = "peer-rslock"), allow(unused_mut))]
        let mut v = baseline::baselines(url).await?;
        #[cfg(feature = "peer-rslock")]
        v.push(peers::rslock_baseline(url)?);
        Ok(v)
    }

    /// rslock, with `peer-rslock`.
    #[cfg(feature = "redis")]
    async fn handoff_baselines(
        &self,
        url: &StoreUrl,
        tasks: usize,
    ) -> Result<Vec<HandoffBaseline>, String> {
        #[cfg(feature = "peer-rslock")]
        return Ok(vec![peers::rslock_handoff(url, tasks)?]);
        #[cfg(not(feature = "peer-rslock"))]
        {
            let _ = (url, tasks);
            Ok(Vec::new())
        }
    }

    /// `INFO server`, `INFO commandstats` and `PTTL`.
    #[cfg(feature = "redis")]
    async fn server_view(&self, url: &StoreUrl) -> Result<Option<Arc<dyn ServerView>>, String> {
        baseline::server_view(url).await.map(Some)
    }

    /// The two raw clients of [`StoreKit::baselines`], 64 tasks on one connection.
    #[cfg(feature = "redis")]
    async fn many_keys_baselines(&self, url: &StoreUrl) -> Result<Vec<Baseline>, String> {
        baseline::many_keys_baselines(url).await
    }

    /// `redis-benchmark` `SET … NX PX`.
    #[cfg(feature = "redis")]
    fn request_load(&self, url: &StoreUrl) -> Result<Option<Arc<dyn RequestLoad>>, String> {
        baseline::request_load(url).map(Some)
    }

    /// `distributed-lock-redis`, with `peer-distributed-lock`.
    #[cfg(feature = "redis")]
    async fn primitive_peer(
        &self,
        url: &StoreUrl,
        permits: u32,
    ) -> Result<Option<PrimitivePeer>, String> {
        #[cfg(feature = "peer-distributed-lock")]
        return peers::primitive_peer(url, permits).await.map(Some);
        #[cfg(not(feature = "peer-distributed-lock"))]
        {
            let _ = (url, permits);
            Ok(None)
        }
    }

    /// The whole URL: its prefix option names the resource's keys too.
    fn resource(&self, url: &StoreUrl) -> Option<ResourceSpec> {
        #[cfg(feature = "redis")]
        {
            let prefix = prefix(url);
            Some(ResourceSpec {
                spec: url.expose().to_owned(),
                what: format!(
                    "Redis: key {prefix}{{row-1}}:value and fence hash {prefix}fence:{{row-1}}"
                ),
                transactional: false,
            })
        }
        #[cfg(not(feature = "redis"))]
        {
            let _ = url;
            None
        }
    }

    /// On `redis://` and `rediss://` (TLS) alike: the URL's prefix names its keys.
    async fn open_resource(&self, url: &StoreUrl) -> Option<Box<dyn Resource>> {
        #[cfg(feature = "redis")]
        if matches!(url.scheme(), Scheme::Redis | Scheme::Rediss) {
            return Some(Box::new(resource::RedisResource::open(url).await));
        }
        let _ = url;
        None
    }

    /// The lock key's (and a semaphore's slots') fence counters and the release tombstone
    /// (fences stay clock-backed, so a later run's still grow).
    async fn forget(&self, url: &StoreUrl, key: &str, permits: Option<u32>) -> Result<(), String> {
        #[cfg(feature = "redis")]
        {
            use leasehold::backends::redis::tools;
            use leasehold::fence::redis::redis;
            let client = tools::client(url).map_err(|e| e.to_string())?;
            let mut conn =
                client.get_multiplexed_async_connection().await.map_err(|e| e.to_string())?;
            let names = |k: &str| {
                let key = leasehold::Key::new(k).map_err(|e| e.to_string())?;
                tools::key_names(url, &key).map_err(|e| e.to_string())
            };
            let lock = names(key)?;
            let mut del = vec![lock.fence, lock.released_by];
            // A semaphore's slots KEY#i each have a counter of their own.
            for i in 0..permits.unwrap_or(0) {
                del.push(names(&format!("{key}#{i}"))?.fence);
            }
            // leasehold: ignore[release-without-owner-check] chaos's cleanup after its trials: it deletes only the fence counters and the release tombstone of a key no trial holds any more, never a lease
            redis::cmd("DEL")
                .arg(del)
                .query_async::<i64>(&mut conn)
                .await
                .map_err(|e| e.to_string())?;
        }
        #[cfg(not(feature = "redis"))]
        let _ = (url, key, permits);
        Ok(())
    }
}
