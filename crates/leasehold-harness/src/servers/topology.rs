//! The named topologies `leasehold chaos --topology` fails (beside the store-derived
//! [`super::plan`]): which private servers a trial starts and how they fail, per scenario.

use super::{Plan, pg_sync, redis_cluster, redlock_set, sentinel, zk_ensemble};

/// The topology names [`topology`] knows.
pub const TOPOLOGIES: &str =
    "zk-ensemble, pg-sync, redlock5, redlock5-majority, redis-cluster, redis-sentinel";

/// The store scheme a topology's URL has (`zk`, `postgres`, `redlock`), `None` for an
/// unknown name.
pub fn topology_scheme(name: &str) -> Option<&'static str> {
    match name {
        "zk-ensemble" => Some("zk"),
        "pg-sync" => Some("postgres"),
        "redlock5" | "redlock5-majority" => Some("redlock"),
        "redis-cluster" => Some("redis-cluster"),
        "redis-sentinel" => Some("redis-sentinel"),
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
        ("redis-cluster", "failover") => Ok(redis_cluster::plan()),
        ("redis-sentinel", "failover") => Ok(sentinel::plan()),
        _ if topology_scheme(name).is_none() => {
            Err(format!("unknown topology {name:?}; available: {TOPOLOGIES}"))
        }
        _ => Err(format!(
            "topology {name} runs: {}; not {scenario}",
            match name {
                "zk-ensemble" => "failover, store-kill (the leader killed), partition",
                "pg-sync" => "failover (the primary killed, the synchronous standby promoted)",
                "redis-cluster" =>
                    "failover (the replica cut off before the holder's grant, the master of \
                     the key's slot killed, the replica promoted)",
                "redis-sentinel" =>
                    "failover (the replica cut off before the holder's grant, the primary \
                     killed, the replica promoted)",
                "redlock5" =>
                    "store-kill (a minority killed, restarted empty), partition (a \
                               minority cut off)",
                _ => "store-kill (a majority restarted empty, one after another)",
            }
        )),
    }
}
