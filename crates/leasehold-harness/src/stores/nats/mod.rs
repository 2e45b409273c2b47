//! NATS JetStream KV in the tools: private servers (one, or a routed JetStream cluster) for
//! the store's tests. Its locks are leases (no session outlives a frozen holder) and it holds
//! no fenced resource, so chaos writes to an SQLite file of its own; no `store-kill` or
//! `failover` plan yet (the cluster's failover is tested in the testkit's `nats` test).

use leasehold::Scheme;

use crate::kit::StoreKit;

pub mod server;

/// NATS's entry in [`super::KITS`].
pub struct Kit;

impl StoreKit for Kit {
    fn schemes(&self) -> &'static [Scheme] {
        &[Scheme::Nats]
    }
}
