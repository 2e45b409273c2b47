//! `run --wait` behind a holder on etcd and ZooKeeper, its process frozen (SIGSTOP) past its
//! session and resumed, as an operator would (issue 35): it used to exit 69 "store
//! unavailable" though the store was up and nothing was granted. Now it waits on with a new
//! session: 0 once the holder is done, 75 when its wait runs out first; never 69.

mod common;

use common::*;
use std::process::{Child, Stdio};
use std::time::Duration;

use leasehold_testkit::stores::etcd::server::EtcdCluster;
use leasehold_testkit::stores::zookeeper::server::ZkServer;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The session the test URLs ask for: short, so freezing past it takes seconds.
const SESSION: Duration = Duration::from_secs(2);

#[test]
fn a_run_waiter_frozen_past_its_etcd_session_waits_on() {
    let cluster = EtcdCluster::single();
    frozen_waiter(&cluster.url("?ttl=2s"));
}

#[test]
fn a_run_waiter_frozen_past_its_zookeeper_session_waits_on() {
    let server = ZkServer::start();
    frozen_waiter(&server.url("?session=2s"));
}

/// `leasehold run ARGS…` on `store` (through $LEASEHOLD_STORE), output piped.
fn spawn(e: &Env, store: &str, args: &[&str]) -> Child {
    e.cmd()
        .env("LEASEHOLD_STORE", store)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A holder runs until `stop-N` appears; a `run --wait WAIT` waiter behind it is frozen for
/// twice the session and more, then resumed.
fn holder_and_frozen_waiter(e: &Env, store: &str, n: u32, wait: &str) -> (Child, Child) {
    let hold = format!("touch held-{n}; while [ ! -e stop-{n} ]; do sleep 0.02; done");
    let holder = spawn(e, store, &["run", "frozen", "--", "sh", "-c", &hold]);
    wait_for(&e.path(&format!("held-{n}")));
    let ran = format!("ran-{n}");
    let waiter = spawn(e, store, &["run", "--wait", wait, "frozen", "--", "touch", &ran]);
    // In the queue behind the holder, then frozen well past its session.
    std::thread::sleep(Duration::from_millis(1500));
    let pid = Pid::from_raw(waiter.id() as i32);
    kill(pid, Signal::SIGSTOP).unwrap();
    std::thread::sleep(SESSION * 2 + Duration::from_secs(2));
    kill(pid, Signal::SIGCONT).unwrap();
    (holder, waiter)
}

fn frozen_waiter(store: &str) {
    let e = Env::new();
    // The holder finishes within the waiter's wait: the waiter runs its command.
    let (holder, waiter) = holder_and_frozen_waiter(&e, store, 1, "60s");
    std::thread::sleep(SESSION + Duration::from_secs(1));
    std::fs::write(e.path("stop-1"), "").unwrap();
    let h = wait_child(holder, Duration::from_secs(30));
    assert_eq!(code(&h), 0, "holder: {}", stderr(&h));
    let w = wait_child(waiter, Duration::from_secs(60));
    assert_eq!(code(&w), 0, "{store}: the resumed waiter: {}", stderr(&w));
    assert!(e.path("ran-1").exists(), "the waiter's command did not run");

    // The holder outlasts the waiter's wait: 75, its command never runs.
    let (holder, waiter) = holder_and_frozen_waiter(&e, store, 2, "10s");
    let w = wait_child(waiter, Duration::from_secs(60));
    assert_eq!(code(&w), 75, "{store}: the resumed waiter: {}", stderr(&w));
    assert!(!e.path("ran-2").exists(), "the waiter ran while the key was held");
    std::fs::write(e.path("stop-2"), "").unwrap();
    let h = wait_child(holder, Duration::from_secs(30));
    assert_eq!(code(&h), 0, "holder: {}", stderr(&h));
}
