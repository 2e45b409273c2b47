//! etcd in the tools: a private cluster (one member to kill, three to fail over), chaos's
//! resource beside the lock keys.

use leasehold::{Scheme, StoreUrl};

use crate::failure::Plan;
use crate::kit::{ResourceSpec, StoreKit};

#[cfg(feature = "etcd")]
pub mod resource;
pub mod server;

/// etcd's entry in [`super::KITS`].
pub struct Kit;

impl StoreKit for Kit {
    fn schemes(&self) -> &'static [Scheme] {
        &[Scheme::Etcd]
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
}
