//! NATS JetStream KV in the tools: private servers (one, or a routed JetStream cluster) for
//! the store's tests. Its locks are leases (no session outlives a frozen holder) and it holds
//! no fenced resource, so chaos writes to an SQLite file of its own; no `store-kill` or
//! `failover` plan yet (the cluster's failover is tested in the testkit's `nats` test).

use leasehold::{Scheme, StoreUrl};

use crate::baseline::Baseline;
use crate::kit::StoreKit;

#[cfg(feature = "nats")]
pub mod baseline;
pub mod server;

/// NATS's entry in [`super::KITS`].
pub struct Kit;

#[async_trait::async_trait]
impl StoreKit for Kit {
    fn schemes(&self) -> &'static [Scheme] {
        &[Scheme::Nats]
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
