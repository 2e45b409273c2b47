//! ZooKeeper in the tools: a private standalone server to kill, an ensemble to fail over
//! (a topology), and how long a frozen holder's session lives.

use std::time::Duration;

use leasehold::{Scheme, StoreUrl};

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

    fn plan(&self, failover: bool) -> Option<Plan> {
        server::plan(failover)
    }

    /// The URL's `session=`, else the default of 10 s.
    fn session_timeout(&self, url: &StoreUrl) -> Duration {
        url.session_timeout().unwrap_or(Duration::from_secs(10))
    }
}
