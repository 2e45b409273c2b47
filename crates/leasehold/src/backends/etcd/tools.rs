//! What leasehold's own tools need of the etcd store (feature `tools`, not a stable API): the
//! store's gRPC client, with which `leasehold bench` sends the very transactions the store
//! sends (and etcd's Lock RPC), and the chaos harness writes its unfenced control effects.

use super::EtcdStore;
pub use super::client::{Client, Error};

/// The hand-written etcd v3 gRPC messages the client sends (not a stable API).
pub mod rpc {
    pub use crate::backends::etcd::rpc::*;
}

/// The store an `etcd://` URL names, opened on its parsed configuration within
/// [`crate::DEFAULT_CONNECT_TIMEOUT`], as [`EtcdStore::connect`] opens it.
pub async fn connect(url: &crate::StoreUrl) -> crate::Result<EtcdStore> {
    let cfg: &super::config::Config = url.config_of("etcd://")?;
    EtcdStore::open(cfg, crate::limits::Limits::default()).await
}

/// A clone of the store's client (it shares the store's connection).
pub fn client(store: &EtcdStore) -> Client {
    store.client()
}
