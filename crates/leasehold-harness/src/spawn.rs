//! Starting and stopping the private server processes the stores' modules run: free loopback
//! ports, the binaries found on the machine, waiting until a server answers, `kill -9` and a
//! restart on the same port and data.

use std::net::TcpListener;
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
pub(crate) fn on_free_port(tries: usize, what: &str, mut start: impl FnMut(u16) -> bool) {
    if !(0..tries).any(|_| start(free_port())) {
        panic!("could not start {what} on a free port");
    }
}

pub(crate) fn need(bin: &str) -> String {
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
pub(crate) fn until_up(
    child: &mut Option<Child>,
    limit: Duration,
    mut up: impl FnMut() -> bool,
) -> bool {
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
pub(crate) fn respawn(limit: Duration, what: &str, mut spawn: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !spawn() {
        assert!(Instant::now() < deadline, "{what} did not come back");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `kill -9` of a server process this test started (resumed first if it was stopped).
pub(crate) fn kill9_child(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGCONT);
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Runs a client command (bounded by `timeout`); its stdout, trimmed, or "" on failure.
pub(crate) fn client_output(cmd: &mut Command) -> String {
    match cmd.stdin(Stdio::null()).output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        _ => String::new(),
    }
}

/// A server binary: on `PATH`, or in `/usr/sbin` (not on every user's `PATH`).
pub(crate) fn sbin(bin: &str) -> String {
    let p = std::path::Path::new("/usr/sbin").join(bin);
    if p.is_file() { p.to_string_lossy().into_owned() } else { need(bin) }
}

/// The user this process runs as (mariadbd needs `--user` when started by root).
pub(crate) fn whoami() -> String {
    nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map_or_else(|| "root".to_owned(), |u| u.name)
}

/// Runs `f` (starting or stopping servers: it blocks) on tokio's blocking pool; a panic in it
/// (a server that would not start) comes back as its message.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f).await.map_err(|e| match e.try_into_panic() {
        Ok(p) => p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "a private server failed".into()),
        Err(e) => e.to_string(),
    })
}
