//! PostgreSQL in the tools: a private server (or a primary with a streaming standby, or a
//! synchronous pair) to kill and fail over, and chaos's resource in a schema of the user's
//! database.

use leasehold::{Scheme, StoreUrl};

use crate::baseline::{Baseline, NativeLoad};
use crate::failure::Plan;
use crate::kit::{ResourceSpec, StoreKit};
use crate::resource::Resource;

#[cfg(feature = "postgres")]
pub mod baseline;
#[cfg(feature = "postgres")]
pub mod resource;
#[cfg(feature = "postgres")]
pub mod scale;
pub mod server;
pub mod sync_pair;

/// PostgreSQL's entry in [`super::KITS`].
pub struct Kit;

#[async_trait::async_trait]
impl StoreKit for Kit {
    fn schemes(&self) -> &'static [Scheme] {
        &[Scheme::Postgres]
    }

    /// Its waiters in other processes are woken by the store: measure one connection each.
    fn handoff_per_connection(&self) -> bool {
        true
    }

    /// For session locks, raw tokio-postgres sending leasehold's try-lock and unlock.
    async fn baselines(&self, url: &StoreUrl) -> Result<Vec<Baseline>, String> {
        #[cfg(feature = "postgres")]
        return baseline::baselines(url).await;
        #[cfg(not(feature = "postgres"))]
        {
            let _ = url;
            Ok(Vec::new())
        }
    }

    /// pgbench running leasehold's statements (and, for session locks, the bare advisory
    /// lock).
    fn native_loads(&self, url: &StoreUrl) -> Result<Vec<std::sync::Arc<dyn NativeLoad>>, String> {
        #[cfg(feature = "postgres")]
        return baseline::native_loads(url);
        #[cfg(not(feature = "postgres"))]
        {
            let _ = url;
            Ok(Vec::new())
        }
    }

    fn plan(&self, failover: bool) -> Option<Plan> {
        Some(server::plan(failover))
    }

    #[cfg(feature = "postgres")]
    fn scale(&self) -> Option<&'static dyn crate::scale::ScaleRun> {
        Some(&scale::Run)
    }

    fn plan_outline(&self, failover: bool) -> &'static str {
        if failover { " (a primary and a streaming standby)" } else { "" }
    }

    /// The store's own schema when the URL names one (letters, digits, `_`), else
    /// `leasehold_chaos`, in the URL's database.
    fn resource(&self, url: &StoreUrl) -> Option<ResourceSpec> {
        #[cfg(feature = "postgres")]
        {
            use leasehold::backends::postgres::tools;
            let schema = tools::schema(url).ok().flatten().unwrap_or("leasehold_chaos");
            let spec = tools::with_search_path(url, schema).ok()?;
            Some(ResourceSpec {
                spec: spec.expose().to_owned(),
                what: format!(
                    "PostgreSQL: table {schema}.data (id 'row-1') and fence table \
                     {schema}.leasehold_fence"
                ),
                transactional: true,
            })
        }
        #[cfg(not(feature = "postgres"))]
        {
            let _ = url;
            None
        }
    }

    /// The schema the URL's `search_path` names (created with its tables).
    async fn open_resource(&self, url: &StoreUrl) -> Option<Box<dyn Resource>> {
        #[cfg(feature = "postgres")]
        if self.schemes().contains(&url.scheme()) {
            return Some(Box::new(resource::PgResource::open(url).await));
        }
        let _ = url;
        None
    }
}
