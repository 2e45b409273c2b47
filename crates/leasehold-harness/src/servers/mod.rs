//! Private store servers for tests: started on free loopback ports in temp dirs, killed on
//! drop, and only ever signalled by the test that started them. The machine's shared
//! services are never touched.

mod etcd;
mod failure;
mod mysql;
mod nats;
mod pg_sync;
mod postgres;
mod redis;
mod redis_cluster;
mod redlock_set;
mod sentinel;
mod topology;
mod zk_ensemble;
mod zookeeper;

pub use etcd::EtcdCluster;
pub use failure::{FailingStore, Plan, plan};
pub use mysql::MyServer;
pub use nats::{NatsCluster, NatsServer};
pub use pg_sync::{PgSyncPair, SYNC_NAME};
pub use postgres::PgServer;
pub use redis::{GRANT_LOST, RedisServer};
pub use redis_cluster::{ClusterNode, RedisCluster, cluster_port};
pub use redlock_set::RedlockSet;
pub use sentinel::{SERVICE, SentinelSet};
pub use topology::{TOPOLOGIES, topology, topology_scheme};
pub use zk_ensemble::ZkEnsemble;
pub use zookeeper::ZkServer;

use failure::query;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A free TCP port on 127.0.0.1 (bound and released; the caller retries if it is taken).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0").local_addr().unwrap().port()
}

/// Calls `start` with free ports until it reports a start (a port can be taken between
/// choosing and binding); panics naming `what` after `tries`.
fn on_free_port(tries: usize, what: &str, mut start: impl FnMut(u16) -> bool) {
    if !(0..tries).any(|_| start(free_port())) {
        panic!("could not start {what} on a free port");
    }
}

fn need(bin: &str) -> String {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(bin))
        .find(|p| p.is_file());
    match found {
        Some(p) => p.to_string_lossy().into_owned(),
        None => panic!("{bin} is not installed: run `bash scripts/test`, which installs it"),
    }
}

/// Waits until `up()` says a just-spawned server answers, or its process exits (`false`, the
/// child slot emptied: a taken port, say), or `limit` passes.
fn until_up(child: &mut Option<Child>, limit: Duration, mut up: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(Some(_)))) {
            *child = None;
            return false;
        }
        if up() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Starts a killed server again on its port and data, retrying while the dead process's
/// leftovers (shared memory, a lingering socket) keep the new one from starting.
fn respawn(limit: Duration, what: &str, mut spawn: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !spawn() {
        assert!(Instant::now() < deadline, "{what} did not come back");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `kill -9` of a server process this test started (resumed first if it was stopped).
fn kill9_child(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGCONT);
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Runs a client command (bounded by `timeout`); its stdout, trimmed, or "" on failure.
fn client_output(cmd: &mut Command) -> String {
    match cmd.stdin(Stdio::null()).output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        _ => String::new(),
    }
}

/// A server binary: on `PATH`, or in `/usr/sbin` (not on every user's `PATH`).
fn sbin(bin: &str) -> String {
    let p = std::path::Path::new("/usr/sbin").join(bin);
    if p.is_file() { p.to_string_lossy().into_owned() } else { need(bin) }
}

/// The user this process runs as (mariadbd needs `--user` when started by root).
fn whoami() -> String {
    nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map_or_else(|| "root".to_owned(), |u| u.name)
}
