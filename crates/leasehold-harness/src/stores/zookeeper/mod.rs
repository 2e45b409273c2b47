//! ZooKeeper in the tools: a private standalone server to kill, and an ensemble to fail over
//! (a topology).

use leasehold::Scheme;

use crate::failure::Plan;
use crate::kit::StoreKit;

pub mod ensemble;
pub mod server;

/// ZooKeeper's entry in [`super::KITS`].
pub struct Kit;

impl StoreKit for Kit {
    fn schemes(&self) -> &'static [Scheme] {
        &[Scheme::Zk]
    }

    /// Its waiters in other processes are woken by the store: measure one connection each.
    fn handoff_per_connection(&self) -> bool {
        true
    }

    fn plan(&self, failover: bool) -> Option<Plan> {
        server::plan(failover)
    }
}
