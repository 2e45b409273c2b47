//! PostgreSQL in the tools: a private server (or a primary with a streaming standby, or a
//! synchronous pair) to kill and fail over, and chaos's resource in a schema of the user's
//! database.

use leasehold::{Scheme, StoreUrl};

use crate::failure::Plan;
use crate::kit::{ResourceSpec, StoreKit};

#[cfg(feature = "postgres")]
pub mod resource;
pub mod server;
pub mod sync_pair;

/// PostgreSQL's entry in [`super::KITS`].
pub struct Kit;

impl StoreKit for Kit {
    fn schemes(&self) -> &'static [Scheme] {
        &[Scheme::Postgres]
    }

    fn plan(&self, failover: bool) -> Option<Plan> {
        Some(server::plan(failover))
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
}
