//! etcd in the tools: a private cluster (one member to kill, three to fail over), chaos's
//! resource beside the lock keys.

use leasehold::{Scheme, StoreUrl};

use crate::baseline::{Baseline, HandoffBaseline};
use crate::failure::Plan;
use crate::kit::{ResourceSpec, StoreKit};
use crate::resource::Resource;

#[cfg(feature = "etcd")]
pub mod baseline;
#[cfg(feature = "etcd")]
pub mod resource;
pub mod server;

/// etcd's entry in [`super::KITS`].
pub struct Kit;

#[async_trait::async_trait]
impl StoreKit for Kit {
    fn schemes(&self) -> &'static [Scheme] {
        &[Scheme::Etcd]
    }

    /// Its waiters in other processes are woken by the store: measure one connection each.
    fn handoff_per_connection(&self) -> bool {
        true
    }

    /// The raw client sending leasehold's transactions, and etcd's Lock RPC.
    async fn baselines(&self, url: &StoreUrl) -> Result<Vec<Baseline>, String> {
        #[cfg(feature = "etcd")]
        return baseline::baselines(url).await;
        #[cfg(not(feature = "etcd"))]
        {
            let _ = url;
            Ok(Vec::new())
        }
    }

    /// etcd's Lock RPC, one lease per task.
    async fn handoff_baselines(
        &self,
        url: &StoreUrl,
        tasks: usize,
    ) -> Result<Vec<HandoffBaseline>, String> {
        #[cfg(feature = "etcd")]
        return baseline::handoff_baselines(url, tasks).await;
        #[cfg(not(feature = "etcd"))]
        {
            let _ = (url, tasks);
            Ok(Vec::new())
        }
    }

    fn plan(&self, failover: bool) -> Option<Plan> {
        Some(server::plan(failover))
    }

    fn plan_outline(&self, failover: bool) -> &'static str {
        if failover { " (three members)" } else { "" }
    }

    /// The store's own URL: the resource's key sits beside the lock keys.
    fn resource(&self, url: &StoreUrl) -> Option<ResourceSpec> {
        if !cfg!(feature = "etcd") {
            return None;
        }
        Some(ResourceSpec {
            spec: url.expose().to_owned(),
            what: "etcd: key leasehold-test/row-1, fenced by the lock key's create revision".into(),
            transactional: false,
        })
    }

    /// The key beside the lock keys, on the URL's cluster.
    async fn open_resource(&self, url: &StoreUrl) -> Option<Box<dyn Resource>> {
        #[cfg(feature = "etcd")]
        if self.schemes().contains(&url.scheme()) {
            return Some(Box::new(resource::EtcdResource::open(url).await));
        }
        let _ = url;
        None
    }
}
