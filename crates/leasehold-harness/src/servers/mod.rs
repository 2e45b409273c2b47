//! Private store servers for tests: started on free loopback ports in temp dirs, killed on
//! drop, and only ever signalled by the test that started them. The machine's shared
//! services are never touched. Each server lives in its store's folder under
//! [`crate::stores`]; this module gathers them under one name for the tests and tools.

pub use crate::failure::{FailingStore, Plan};
pub use crate::spawn::{blocking, free_port};
pub use crate::stores::etcd::server::EtcdCluster;
pub use crate::stores::mysql::server::MyServer;
pub use crate::stores::nats::server::{NatsCluster, NatsServer};
pub use crate::stores::plan;
pub use crate::stores::postgres::server::PgServer;
pub use crate::stores::postgres::sync_pair::{PgSyncPair, SYNC_NAME};
pub use crate::stores::redis::cluster::{ClusterNode, RedisCluster, cluster_port};
pub use crate::stores::redis::redlock_set::RedlockSet;
pub use crate::stores::redis::sentinel::{SERVICE, SentinelSet};
pub use crate::stores::redis::server::{GRANT_LOST, RedisServer};
pub use crate::stores::zookeeper::ensemble::ZkEnsemble;
pub use crate::stores::zookeeper::server::ZkServer;
