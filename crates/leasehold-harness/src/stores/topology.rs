//! The named topologies `leasehold chaos --topology` fails (beside the store-derived
//! [`super::plan`]): which private servers a trial starts, how they fail per scenario, and
//! how the tool reads the outcome. One entry per topology in [`ALL`]; each entry's servers
//! live in their store's folder.

use std::future::Future;
use std::pin::Pin;

use leasehold::Scheme;

use super::nats::failing as nats;
use super::postgres::sync_pair;
use super::redis::redlock_set::RedlockSet;
use super::redis::server::GRANT_LOST;
use super::redis::{cluster, redlock_set, sentinel};
use super::zookeeper::ensemble::{self, ZkEnsemble};
use crate::failure::{FailingStore, Plan};

/// The private servers of one `partition` trial, reached through fault proxies by the holder.
pub struct Partitioned {
    /// The servers, stopped on drop.
    pub servers: Box<dyn Send>,
    /// Their ports on 127.0.0.1, in member order.
    pub ports: Vec<u16>,
    /// Their URL for the successor, which connects directly.
    pub url: String,
}

/// How `partition` runs on a topology: the holder reaches each member through its own
/// fault proxy, and the proxies of [`Partition::cut`] swallow its traffic.
pub struct Partition {
    /// Starts the servers (blocking), the URL carrying `options` (`?…` or empty).
    pub start: fn(options: &str) -> Partitioned,
    /// The members cut off from the holder.
    pub cut: &'static [usize],
    /// The cut, in words, for the history.
    pub what: &'static str,
    /// The setup, for the report (`{session}` is replaced by the session timeout).
    pub setup: &'static str,
}

/// A check run once after the trials, whose line joins the report's setup (an error when the
/// deployment contradicts what the tool says of it).
pub type Check = fn() -> Pin<Box<dyn Future<Output = Result<String, String>> + Send>>;

/// One topology `chaos --topology` knows.
pub struct Topology {
    /// Its name on the command line.
    pub name: &'static str,
    /// What it starts, in a few words, for `--help`.
    pub about: &'static str,
    /// The scheme of its URL.
    pub scheme: Scheme,
    /// The host part of its URL before its private servers exist (it only has to parse:
    /// each trial's servers give the real one).
    pub placeholder: &'static str,
    /// The options of its URL when the `--store` URL is not of its scheme.
    pub default_options: &'static str,
    /// The scenarios it runs, in words, for the error naming them.
    pub runs: &'static str,
    store_kill: Option<fn() -> Plan>,
    failover: Option<fn() -> Plan>,
    /// How `partition` runs on it, if it does.
    pub partition: Option<Partition>,
    /// Whether it keeps one holder through its failures: then a holder whose `lost()` came
    /// after the successor's grant fails the run (asynchronous replication lost on purpose,
    /// or a Redlock majority restarted empty, admit a second holder).
    pub one_holder: bool,
    /// Whether its failover loses the holder's grant on purpose: then the words its failover
    /// event says when the promoted node lacks the grant
    /// ([`super::redis::server::GRANT_LOST`]), whose trials the report counts.
    pub loses_grant: Option<&'static str>,
    /// Whether its store issues no fence: the trials get fences from an external source.
    pub external_fences: bool,
    /// Run once after the trials.
    pub check: Option<Check>,
}

impl Topology {
    /// The plan of `scenario` (`store-kill` or `failover`); an error naming what runs here.
    pub fn plan(&self, scenario: &str) -> Result<Plan, String> {
        let plan = match scenario {
            "store-kill" => self.store_kill,
            "failover" => self.failover,
            _ => None,
        };
        plan.map(|p| p())
            .ok_or_else(|| format!("topology {} runs: {}; not {scenario}", self.name, self.runs))
    }
}

/// Every topology, in the order `--help` lists them.
pub static ALL: &[Topology] = &[
    Topology {
        name: "zk-ensemble",
        about: "three ZooKeeper nodes",
        scheme: Scheme::Zk,
        placeholder: "127.0.0.1:1",
        default_options: "?session=1s",
        runs: "failover, store-kill (the leader killed), partition",
        store_kill: Some(ensemble::plan),
        failover: Some(ensemble::plan),
        partition: Some(Partition {
            start: |options| {
                let e = ZkEnsemble::start();
                let ports = (0..3).map(|i| e.port(i)).collect();
                let url = e.url(options);
                Partitioned { servers: Box::new(e), ports, url }
            },
            cut: &[0, 1, 2],
            what: "partition from every member",
            setup: "a private three-node ZooKeeper ensemble, fresh for each trial; the holder \
                    reached each member through its own TCP fault proxy, and all three \
                    swallowed its traffic after its first write (session timeout {session}); \
                    the successor connected directly",
        }),
        one_holder: true,
        loses_grant: None,
        external_fences: false,
        check: None,
    },
    Topology {
        name: "pg-sync",
        about: "PostgreSQL with a synchronous standby",
        scheme: Scheme::Postgres,
        placeholder: "127.0.0.1:1",
        default_options: "",
        runs: "failover (the primary killed, the synchronous standby promoted)",
        store_kill: None,
        failover: Some(sync_pair::plan),
        partition: None,
        one_holder: true,
        loses_grant: None,
        external_fences: false,
        check: Some(|| Box::pin(sync_pair::doctor_agrees())),
    },
    Topology {
        name: "redlock5",
        about: "five Redis instances, redlock://",
        scheme: Scheme::Redlock,
        placeholder: "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3",
        default_options: "",
        runs: "store-kill (a minority killed, restarted empty), partition (a minority cut off)",
        store_kill: Some(|| redlock_set::plan(false)),
        failover: None,
        partition: Some(Partition {
            start: |options| {
                let r = RedlockSet::start(5);
                let ports = r.servers().iter().map(|s| s.port()).collect();
                let url = r.url(options);
                Partitioned { servers: Box::new(r), ports, url }
            },
            cut: &[0, 1],
            what: "partition from instances 1, 2",
            setup: "five private Redis instances (redlock://), fresh for each trial; the holder \
                    reached each through its own TCP fault proxy, and the proxies of instances \
                    1 and 2 (a minority) swallowed its traffic after its first write; the \
                    successor connected directly",
        }),
        one_holder: true,
        loses_grant: None,
        external_fences: true,
        check: None,
    },
    Topology {
        name: "redlock5-majority",
        about: "the same five, one holder not promised",
        scheme: Scheme::Redlock,
        placeholder: "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3",
        default_options: "",
        runs: "store-kill (a majority restarted empty, one after another)",
        store_kill: Some(|| redlock_set::plan(true)),
        failover: None,
        partition: None,
        one_holder: false,
        loses_grant: None,
        external_fences: true,
        check: None,
    },
    Topology {
        name: "redis-cluster",
        about: "three masters and three replicas, losing the holder's grant on purpose; use --ttl 5s",
        scheme: Scheme::RedisCluster,
        placeholder: "127.0.0.1:1",
        default_options: "",
        runs: "failover (the replica cut off before the holder's grant, the master of the \
               key's slot killed, the replica promoted)",
        store_kill: None,
        failover: Some(cluster::plan),
        partition: None,
        one_holder: false,
        loses_grant: Some(GRANT_LOST),
        external_fences: false,
        check: None,
    },
    Topology {
        name: "redis-sentinel",
        about: "a primary, a replica and three sentinels, losing the holder's grant on purpose; use --ttl 10s",
        scheme: Scheme::RedisSentinel,
        placeholder: "127.0.0.1:1/leasehold",
        default_options: "",
        runs: "failover (the replica cut off before the holder's grant, the primary killed, \
               the replica promoted)",
        store_kill: None,
        failover: Some(sentinel::plan),
        partition: None,
        one_holder: false,
        loses_grant: Some(GRANT_LOST),
        external_fences: false,
        check: None,
    },
    Topology {
        name: "nats-cluster",
        about: "three JetStream nodes",
        scheme: Scheme::Nats,
        placeholder: "127.0.0.1:1",
        default_options: "?replicas=3",
        runs: "failover, store-kill (the grants' stream leader killed; store-kill restarts it), \
               partition",
        store_kill: Some(nats::cluster_plan),
        failover: Some(nats::cluster_plan),
        partition: Some(Partition {
            start: |options| {
                let c = nats::Cluster::start();
                let ports = (0..c.nodes().len()).map(|i| c.nodes().port(i)).collect();
                let url = c.url(options);
                Partitioned { servers: Box::new(c), ports, url }
            },
            cut: &[0, 1, 2],
            what: "partition from every node",
            setup: "a private three-node JetStream cluster (file storage, replicas=3, no client \
                    URLs advertised), fresh for each trial; the holder reached each node through \
                    its own TCP fault proxy, and all three swallowed its traffic after its first \
                    write; the successor connected directly",
        }),
        one_holder: true,
        loses_grant: None,
        external_fences: false,
        check: None,
    },
];

/// Every topology with what it starts and runs, as `chaos --help` lists them.
pub fn described() -> String {
    let each = ALL.iter().map(|t| format!("{} ({}): {}", t.name, t.about, t.runs));
    each.collect::<Vec<_>>().join("; ")
}

/// The topology names, as `chaos -h` and errors list them.
pub fn names() -> String {
    ALL.iter().map(|t| t.name).collect::<Vec<_>>().join(", ")
}

/// The topology `name`; an error listing the names.
pub fn find(name: &str) -> Result<&'static Topology, String> {
    ALL.iter()
        .find(|t| t.name == name)
        .ok_or_else(|| format!("unknown topology {name:?}; available: {}", names()))
}
