//! MySQL/MariaDB in the tools: a private MariaDB to kill, and chaos's resource in the user's
//! database.

use leasehold::{Scheme, StoreUrl};

use crate::baseline::Baseline;
use crate::failure::Plan;
use crate::kit::{ResourceSpec, StoreKit};
use crate::resource::Resource;

#[cfg(feature = "mysql")]
pub mod baseline;
#[cfg(feature = "mysql")]
pub mod resource;
pub mod server;

/// MySQL's entry in [`super::KITS`].
pub struct Kit;

#[async_trait::async_trait]
impl StoreKit for Kit {
    fn schemes(&self) -> &'static [Scheme] {
        &[Scheme::Mysql]
    }

    /// Its waiters in other processes are woken by the store: measure one connection each.
    fn handoff_per_connection(&self) -> bool {
        true
    }

    /// Raw mysql_async sending leasehold's statements.
    async fn baselines(&self, url: &StoreUrl) -> Result<Vec<Baseline>, String> {
        #[cfg(feature = "mysql")]
        return baseline::baselines(url).await;
        #[cfg(not(feature = "mysql"))]
        {
            let _ = url;
            Ok(Vec::new())
        }
    }

    fn plan(&self, failover: bool) -> Option<Plan> {
        server::plan(failover)
    }

    /// The URL's own database.
    fn resource(&self, url: &StoreUrl) -> Option<ResourceSpec> {
        if !cfg!(feature = "mysql") {
            return None;
        }
        Some(ResourceSpec {
            spec: url.expose().to_owned(),
            what: "MySQL: tables data (id 'row-1') and leasehold_fence".into(),
            transactional: true,
        })
    }

    /// The URL's own database (its tables created).
    async fn open_resource(&self, url: &StoreUrl) -> Option<Box<dyn Resource>> {
        #[cfg(feature = "mysql")]
        if self.schemes().contains(&url.scheme()) {
            return Some(Box::new(resource::MyResource::open(url).await));
        }
        let _ = url;
        None
    }
}
