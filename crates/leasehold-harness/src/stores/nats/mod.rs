//! NATS JetStream KV in the tools: private servers (one, or a routed JetStream cluster) for
//! the store's tests and for chaos's `store-kill` (one server, killed and restarted on its
//! store) and `failover` (three nodes, the grants' stream leader killed), and the
//! `nats-cluster` topology. Its locks are leases (no session outlives a frozen holder) and it
//! holds no fenced resource, so chaos writes to an SQLite file of its own; what chaos leaves
//! on the user's store (the key's release marker) it forgets.

use leasehold::{Scheme, StoreUrl};

use crate::baseline::Baseline;
use crate::failure::Plan;
use crate::kit::StoreKit;

#[cfg(feature = "nats")]
pub mod baseline;
pub mod failing;
pub mod server;

/// NATS's entry in [`super::KITS`].
pub struct Kit;

#[async_trait::async_trait]
impl StoreKit for Kit {
    fn schemes(&self) -> &'static [Scheme] {
        &[Scheme::Nats]
    }

    fn plan(&self, failover: bool) -> Option<Plan> {
        Some(failing::plan(failover))
    }

    fn plan_outline(&self, failover: bool) -> &'static str {
        if failover { " (three JetStream nodes)" } else { "" }
    }

    /// The chaos key's release marker in the grants' bucket (a compare-and-set purge that
    /// leaves a newer grant alone); the heartbeat buckets expire their keys themselves.
    /// NATS holds no semaphores, so there are no slots to forget.
    async fn forget(&self, url: &StoreUrl, key: &str, _permits: Option<u32>) -> Result<(), String> {
        #[cfg(feature = "nats")]
        return leasehold::backends::nats::tools::forget(url, key).await.map_err(|e| e.to_string());
        #[cfg(not(feature = "nats"))]
        {
            let _ = (url, key);
            Ok(())
        }
    }

    /// Raw async-nats sending the store's requests, and the bare lock without heartbeat.
    async fn baselines(&self, url: &StoreUrl) -> Result<Vec<Baseline>, String> {
        #[cfg(feature = "nats")]
        return baseline::baselines(url).await;
        #[cfg(not(feature = "nats"))]
        {
            let _ = url;
            Ok(Vec::new())
        }
    }
}
