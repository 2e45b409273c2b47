//! The named topologies `leasehold chaos --topology` fails (beside the store-derived
//! [`super::plan`]): which private servers a trial starts and how they fail, per scenario.

use super::{Plan, pg_sync, redlock_set, zk_ensemble};

/// The topology names [`topology`] knows.
pub const TOPOLOGIES: &str = "zk-ensemble, pg-sync, redlock5, redlock5-majority";

/// The store scheme a topology's URL has (`zk`, `postgres`, `redlock`), `None` for an
/// unknown name.
pub fn topology_scheme(name: &str) -> Option<&'static str> {
    match name {
        "zk-ensemble" => Some("zk"),
        "pg-sync" => Some("postgres"),
        "redlock5" | "redlock5-majority" => Some("redlock"),
        _ => None,
    }
}

/// The plan of `scenario` (`store-kill` or `failover`) on topology `name`; an error naming
/// what runs where.
pub fn topology(name: &str, scenario: &str) -> Result<Plan, String> {
    match (name, scenario) {
        ("zk-ensemble", "failover" | "store-kill") => Ok(zk_ensemble::plan()),
        ("pg-sync", "failover") => Ok(pg_sync::plan()),
        ("redlock5", "store-kill") => Ok(redlock_set::plan(false)),
        ("redlock5-majority", "store-kill") => Ok(redlock_set::plan(true)),
        _ if topology_scheme(name).is_none() => {
            Err(format!("unknown topology {name:?}; available: {TOPOLOGIES}"))
        }
        _ => Err(format!(
            "topology {name} runs: {}; not {scenario}",
            match name {
                "zk-ensemble" => "failover, store-kill (the leader killed), partition",
                "pg-sync" => "failover (the primary killed, the synchronous standby promoted)",
                "redlock5" =>
                    "store-kill (a minority killed, restarted empty), partition (a \
                               minority cut off)",
                _ => "store-kill (a majority restarted empty, one after another)",
            }
        )),
    }
}
