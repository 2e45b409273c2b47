//! What leasehold's `chaos` and `bench` tools run, shared with its tests: private store servers
//! started on free loopback ports in temporary directories (killed on drop; never a server
//! this process did not start), a TCP fault proxy, a recorder and checker for histories of
//! critical sections, the fenced resource the stalled-holder scenarios write to, a store
//! wrapper that counts requests, and a
//! metrics recorder that renders the Prometheus text format. What it knows about each store
//! (its servers, how they fail, its resource, its raw-client baselines for the bench,
//! [`baseline`]) is in that store's folder under [`stores`].
//!
//! The servers it starts listen only on loopback addresses; the resource and the baselines
//! connect to the store URL they are given, and nowhere else. The servers need the stores'
//! binaries on the machine (`redis-server`, `etcd`, PostgreSQL's `initdb`/`postgres`,
//! `mariadbd`, ZooKeeper's jar); a missing one is a panic naming it.
#![deny(missing_docs)]

pub mod baseline;
pub mod counting;
pub mod failure;
pub mod family;
pub mod history;
mod kit;
pub mod metrics;
pub mod proxy;
pub mod resource;
mod row;
pub mod scale;
pub mod spawn;
pub mod stores;
