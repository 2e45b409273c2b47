//! NATS JetStream KV in the tools: private servers (one, or a routed JetStream cluster) for
//! the store's tests and for chaos's `store-kill` (one server, killed and restarted on its
//! store) and `failover` (three nodes, the grants' stream leader killed), and the
//! `nats-cluster` topology. Its locks are leases (no session outlives a frozen holder) and it
//! holds no fenced resource, so chaos writes to an SQLite file of its own.

use leasehold::Scheme;

use crate::failure::Plan;
use crate::kit::StoreKit;

pub mod failing;
pub mod server;

/// NATS's entry in [`super::KITS`].
pub struct Kit;

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
}
