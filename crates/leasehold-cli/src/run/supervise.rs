//! The supervisor between `run` and its command, so the command never outlives the lease's
//! holder: `run` starts `leasehold supervise` (a hidden re-exec of this binary) with one end
//! of a socket pair; the supervisor starts the command in a process group of its own and
//! kills that group, and every process descended from it, as soon as the socket closes,
//! that is when `run` dies for any reason (`kill -9`, the OOM killer, a crash).
//!
//! On Linux the supervisor is a child subreaper (`PR_SET_CHILD_SUBREAPER`): whatever the
//! command starts stays below it even when it daemonises or leaves the group (`setsid`), and
//! is found through `/proc` and killed. The command itself has `PR_SET_PDEATHSIG` = SIGKILL,
//! so a killed supervisor takes the command with it, and `run` (a subreaper too) kills
//! what is left. The supervisor also enforces the local deadline `run` sends it after each
//! confirmed renewal: SIGTERM at the deadline, SIGKILL `--grace` later, even if `run` is
//! stalled (SIGSTOP, swapping) and cannot. Other Unix systems get the socket, the process
//! group and the deadline, not the subreaper or the death signal.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, killpg, sigprocmask};
#[cfg(target_os = "linux")]
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getpgrp, getpid, setpgid, tcgetpgrp, tcsetpgrp};

/// The supervisor's end of the socket pair, as a file descriptor number.
pub(crate) const ENV_FD: &str = "LEASEHOLD_SUPERVISOR_FD";
/// The pid whose child leads the command's process group (a nested `run` checks it).
pub(crate) const ENV_RUN_PID: &str = "LEASEHOLD_RUN_PID";

/// What the supervisor releases, owner-checked, when `run` dies while the command runs: the
/// store (its URL with the password: it comes over the socket, never argv or an environment)
/// and each grant's key and owner token. No `Debug`: nothing may print it.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct ReleaseOrder {
    pub url: String,
    pub timeout_ms: u64,
    pub grants: Vec<(String, String)>,
}

/// Monotonic nanoseconds (CLOCK_MONOTONIC, the clock of `Instant` on Linux), comparable
/// between processes of one host.
pub(crate) fn mono_ns() -> i64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map_or(0, |t| t.tv_sec() * 1_000_000_000 + t.tv_nsec())
}

/// `leasehold supervise`: returns its exit code (nobody reads it; `run` reads the socket).
pub(crate) fn main(grace: Duration, command: Vec<OsString>) -> u8 {
    match supervise(grace, command) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("leasehold: supervisor: {e}");
            70
        }
    }
}

struct Sup {
    sock: UnixStream,
    /// The command's process group (its leader's pid).
    pgid: Pid,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    me: Pid,
    /// The terminal was handed to the command's group (and must be handed back).
    tty: bool,
    /// The command's exit status, once reaped.
    leader: Option<std::process::ExitStatus>,
    /// What to release if `run` dies first.
    release: Option<ReleaseOrder>,
    /// What `run` sent after `go`, read with it and not yet acted on.
    pending: Vec<u8>,
}

/// Reads `run`'s `go ENV_JSON` line: the variables to add to the command's environment;
/// `None` when the socket closed first. Bytes read past the line are left in `rest`.
fn read_go(
    sock: &mut UnixStream,
    rest: &mut Vec<u8>,
) -> Result<Option<Vec<(String, String)>>, String> {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = rest.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = rest.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let json = line.strip_prefix("go ").ok_or("expected `go` from `run`")?;
            return serde_json::from_str(json.trim_end()).map(Some).map_err(|e| e.to_string());
        }
        match sock.read(&mut chunk) {
            Ok(0) => return Ok(None),
            Ok(n) => rest.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Ok(None),
        }
    }
}

fn supervise(grace: Duration, command: Vec<OsString>) -> Result<(), String> {
    let fd: i32 = std::env::var(ENV_FD)
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or("not started by `leasehold run`")?;
    // SAFETY: `run` passed this descriptor for this process to own.
    let sock = unsafe { UnixStream::from_raw_fd(fd) };
    set_cloexec(fd);
    #[cfg(target_os = "linux")]
    nix::sys::prctl::set_child_subreaper(true).map_err(|e| format!("subreaper: {e}"))?;
    // Signals arrive through a descriptor; SIGTTOU stays blocked so that handing the
    // terminal back from the background group is allowed.
    let mut mask = SigSet::empty();
    for s in [Signal::SIGCHLD, Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP, Signal::SIGQUIT] {
        mask.add(s);
    }
    let mut blocked = mask;
    blocked.add(Signal::SIGTTOU);
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&blocked), None).map_err(|e| e.to_string())?;
    // Linux: SIGCHLD wakes the poll through a signalfd. Elsewhere the blocked signals stay
    // pending and the loop looks every 20 ms.
    #[cfg(target_os = "linux")]
    let sfd = Some(
        SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .map_err(|e| format!("signalfd: {e}"))?,
    );
    #[cfg(not(target_os = "linux"))]
    let sfd: Option<Never> = None;

    // `run` may start this process before it has its grant (so that a handoff does not wait
    // for this binary to start): the command starts on `go`, with the grant's environment.
    // The socket closed first: `run` got no grant, and nothing is started.
    let mut sock = sock;
    let mut pending = Vec::new();
    let Some(env) = read_go(&mut sock, &mut pending)? else { return Ok(()) };
    let stdin = std::io::stdin();
    let tty = nix::unistd::isatty(stdin.as_fd()).unwrap_or(false)
        && tcgetpgrp(stdin.as_fd()).is_ok_and(|g| g == getpgrp());
    let me = getpid();
    let (prog, args) = command.split_first().ok_or("no command")?;
    let mut cmd = std::process::Command::new(prog);
    cmd.args(args).env_remove(ENV_FD).env(ENV_RUN_PID, me.to_string()).envs(env);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            setpgid(Pid::from_raw(0), Pid::from_raw(0))?;
            if tty {
                // The group is still in the background: without ignoring SIGTTOU, taking the
                // terminal would stop it.
                nix::sys::signal::signal(Signal::SIGTTOU, nix::sys::signal::SigHandler::SigIgn)?;
                let _ = tcsetpgrp(BorrowedFd::borrow_raw(0), getpid());
                nix::sys::signal::signal(Signal::SIGTTOU, nix::sys::signal::SigHandler::SigDfl)?;
            }
            sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
            #[cfg(target_os = "linux")]
            {
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
                // The supervisor died before the death signal was armed.
                if nix::unistd::getppid() != me {
                    return Err(std::io::Error::from_raw_os_error(nix::libc::ESRCH));
                }
            }
            Ok(())
        });
    }
    let mut sock_w = sock.try_clone().map_err(|e| e.to_string())?;
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let kind = if e.kind() == std::io::ErrorKind::NotFound { "notfound" } else { "other" };
            let _ = writeln!(sock_w, "spawn-failed {kind} {e}");
            return Ok(());
        }
    };
    let pgid = Pid::from_raw(child.id() as i32);
    // Both sides set the group and the terminal, whichever runs first (as shells do).
    let _ = setpgid(pgid, pgid);
    if tty {
        let _ = tcsetpgrp(stdin.as_fd(), pgid);
    }
    let _ = writeln!(sock_w, "started {pgid}");
    let mut sup = Sup { sock, pgid, me, tty, leader: None, release: None, pending };
    let status = sup.watch(sfd.as_ref(), grace);
    sup.restore_tty();
    if status.is_none()
        && let Some(order) = sup.release.take()
    {
        // `run` died (kill -9, the OOM killer) and everything the command started is gone:
        // free the key now, as flock would, instead of leaving it to its TTL.
        if sup.leftovers() == 0 {
            release(&order);
        } else {
            eprintln!(
                "leasehold: supervisor: `run` died and processes of its command survived \
                 SIGKILL; the lease is left to its TTL"
            );
        }
    }
    if let Some(st) = status {
        let line = match (st.code(), st.signal()) {
            (Some(c), _) => format!("exited {c}"),
            (None, Some(s)) => format!("killed {s}"),
            _ => "exited 70".into(),
        };
        let _ = writeln!(sock_w, "{line}");
    }
    Ok(())
}

impl Sup {
    /// Until the command and everything it started are gone: its exit status, or `None` when
    /// `run` is gone (everything was killed).
    fn watch(
        &mut self,
        sfd: Option<&SignalFd>,
        grace: Duration,
    ) -> Option<std::process::ExitStatus> {
        let grace_ns = grace.as_nanos() as i64;
        let mut buf = std::mem::take(&mut self.pending);
        let (mut term_at, mut kill_at): (Option<i64>, Option<i64>) = (None, None);
        let mut termed = false;
        let mut leftover_kill_at: Option<i64> = None;
        // SIGKILL `grace` after the first SIGTERM `run` was sent (systemd's stop): a later
        // SIGTERM or deadline does not postpone it.
        let mut stop_kill_at: Option<i64> = None;
        loop {
            let now = mono_ns();
            let next = [term_at.filter(|_| !termed), kill_at, leftover_kill_at, stop_kill_at]
                .into_iter()
                .flatten()
                .min();
            let mut wait_ms = next.map_or(-1, |t| ((t - now).max(0) / 1_000_000 + 1) as i32);
            if self.leader.is_some() || sfd.is_none() {
                // Grandchildren that are not ours die without telling us: look again soon.
                wait_ms = if wait_ms < 0 { 20 } else { wait_ms.min(20) };
            }
            if buf.contains(&b'\n') {
                // Lines that came with `go` are acted on at once.
                wait_ms = 0;
            }
            let timeout = PollTimeout::try_from(wait_ms).unwrap_or(PollTimeout::NONE);
            let mut fds = vec![PollFd::new(self.sock.as_fd(), PollFlags::POLLIN)];
            if let Some(sfd) = sfd {
                fds.push(PollFd::new(sfd.as_fd(), PollFlags::POLLIN));
            }
            match poll(&mut fds, timeout) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
            let sock_ready = fds[0].any().unwrap_or(false);
            if let Some(sfd) = sfd {
                while let Ok(Some(_)) = sfd.read_signal() {}
            }
            self.reap();

            if sock_ready {
                let mut chunk = [0u8; 512];
                match self.sock.read(&mut chunk) {
                    Ok(0) | Err(_) => {
                        // `run` is gone: nothing may go on without its lease.
                        self.kill_all();
                        return None;
                    }
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            // The lines read now, or with `go`.
            {
                while let Some(end) = buf.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=end).collect();
                    let line = String::from_utf8_lossy(&line);
                    if let Some(json) = line.strip_prefix("release ") {
                        self.release = serde_json::from_str(json.trim_end()).ok();
                        continue;
                    }
                    let mut words = line.split_whitespace();
                    match (words.next(), words.next().and_then(|w| w.parse::<i64>().ok())) {
                        (Some("deadline"), Some(t)) if !termed => {
                            term_at = Some(t);
                            kill_at = Some(t + grace_ns);
                        }
                        (Some("signal"), Some(n)) => {
                            if let Ok(sig) = Signal::try_from(n as i32) {
                                let _ = killpg(self.pgid, sig);
                            }
                        }
                        (Some("stop"), _) => {
                            let _ = killpg(self.pgid, Signal::SIGTERM);
                            stop_kill_at.get_or_insert(mono_ns() + grace_ns);
                        }
                        (Some("term"), _) if !termed => {
                            termed = true;
                            self.signal_all(Signal::SIGTERM);
                            let at = mono_ns() + grace_ns;
                            kill_at = Some(kill_at.map_or(at, |k| k.min(at)));
                        }
                        (Some("kill"), _) => {
                            self.kill_all();
                            kill_at = None;
                        }
                        _ => {}
                    }
                }
            }

            let now = mono_ns();
            if !termed && term_at.is_some_and(|t| now >= t) {
                termed = true;
                self.signal_all(Signal::SIGTERM);
                self.tell("deadline-term");
            }
            if stop_kill_at.is_some_and(|t| now >= t) {
                stop_kill_at = None;
                self.tell("stop-kill");
                self.kill_all();
            }
            if kill_at.is_some_and(|t| now >= t) {
                kill_at = None;
                self.tell("deadline-kill");
                self.kill_all();
            }
            if let Some(status) = self.leader {
                let left = self.leftovers();
                if left == 0 {
                    return Some(status);
                }
                match leftover_kill_at {
                    None => {
                        self.tell(&format!("leftover {left}"));
                        self.signal_all(Signal::SIGTERM);
                        leftover_kill_at = Some(now + grace_ns);
                    }
                    Some(t) if now >= t => {
                        self.kill_all();
                        leftover_kill_at = None;
                        if self.leftovers() == 0 {
                            return Some(status);
                        }
                    }
                    Some(_) => {}
                }
            }
        }
    }

    fn tell(&mut self, line: &str) {
        let _ = writeln!(self.sock, "{line}");
    }

    /// Reaps every exited child (orphans adopted as subreaper too); the leader's status.
    fn reap(&mut self) {
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == self.pgid => {
                    self.leader = Some(std::process::ExitStatus::from_raw((code & 0xff) << 8));
                }
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid == self.pgid => {
                    self.leader = Some(std::process::ExitStatus::from_raw(sig as i32));
                }
                Ok(WaitStatus::StillAlive) | Err(_) => return,
                Ok(_) => {}
            }
        }
    }

    /// Processes still running that the command started: its group, and on Linux every
    /// live descendant of the supervisor.
    fn leftovers(&self) -> usize {
        #[cfg(target_os = "linux")]
        {
            // A subreaper with no child has no descendant (an orphan below it is reparented
            // to it): the common answer without scanning every process in /proc, which
            // took milliseconds of each handoff on a busy host.
            if !tree::has_children() {
                return 0;
            }
            tree::descendants(self.me.as_raw()).len()
        }
        #[cfg(not(target_os = "linux"))]
        {
            usize::from(killpg(self.pgid, None).is_ok())
        }
    }

    fn signal_all(&self, sig: Signal) {
        let _ = killpg(self.pgid, sig);
        #[cfg(target_os = "linux")]
        for pid in tree::descendants(self.me.as_raw()) {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), sig);
        }
    }

    /// SIGKILL to the group and every descendant, until none is left (bounded: a process
    /// that forks as fast as it is killed is given up on after 2 s).
    fn kill_all(&mut self) {
        let _ = killpg(self.pgid, Signal::SIGKILL);
        #[cfg(target_os = "linux")]
        {
            let me = self.me.as_raw();
            tree::kill_below(me, Duration::from_secs(2), &mut || self.reap());
        }
        self.reap();
    }

    fn restore_tty(&self) {
        if !self.tty {
            return;
        }
        let stdin = std::io::stdin();
        if tcgetpgrp(stdin.as_fd()).is_ok_and(|g| g == self.pgid) {
            let _ = tcsetpgrp(stdin.as_fd(), getpgrp());
        }
    }
}

/// Releases `order`'s grants, owner-checked (a grant no longer ours is left alone), each
/// bounded by its timeout; the supervisor has no runtime until now.
fn release(order: &ReleaseOrder) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return;
    };
    let timeout = Duration::from_millis(order.timeout_ms.max(1));
    rt.block_on(async {
        let Ok(url) = leasehold::StoreUrl::parse(&order.url) else { return };
        let opened = tokio::time::timeout(timeout * 2, leasehold::Locker::open(&url, timeout));
        let locker = match opened.await {
            Ok(Ok(l)) => l.with_op_timeout(timeout).with_holder_info(None),
            Ok(Err(e)) => {
                eprintln!("leasehold: supervisor: `run` died; cannot release its lease ({e})");
                return;
            }
            Err(_) => return,
        };
        for (key, owner) in &order.grants {
            let Ok(owner) = owner.parse::<leasehold::OwnerToken>() else { continue };
            match locker.release_by_owner(key, &owner).await {
                Ok(true) => {
                    eprintln!("leasehold: `run` died; its command was killed and {key:?} released")
                }
                Ok(false) => {}
                Err(e) => eprintln!(
                    "leasehold: supervisor: `run` died; release of {key:?} failed ({e}); its TTL \
                     frees it"
                ),
            }
        }
        let _ = tokio::time::timeout(timeout, locker.close()).await;
    });
    rt.shutdown_timeout(Duration::from_millis(200));
}

/// Stands in for the signalfd where there is none (never constructed).
#[cfg(not(target_os = "linux"))]
enum Never {}
#[cfg(not(target_os = "linux"))]
type SignalFd = Never;
#[cfg(not(target_os = "linux"))]
impl Never {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match *self {}
    }
    fn read_signal(&self) -> nix::Result<Option<()>> {
        match *self {}
    }
}

fn set_cloexec(fd: i32) {
    // SAFETY: fcntl on a descriptor this process owns.
    unsafe {
        nix::libc::fcntl(fd, nix::libc::F_SETFD, nix::libc::FD_CLOEXEC);
    }
}

/// Clears close-on-exec on `fd` in a forked child (async-signal-safe), so the next program
/// inherits it.
pub(crate) fn inherit_fd(fd: i32) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor of this process.
    if unsafe { nix::libc::fcntl(fd, nix::libc::F_SETFD, 0) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Processes below a pid, from `/proc` (Linux).
#[cfg(target_os = "linux")]
pub(crate) mod tree {
    use std::collections::HashMap;
    use std::time::{Duration, Instant};

    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    /// Whether this process has a child, live or not yet reaped (`waitid` without reaping:
    /// `ECHILD` means none).
    pub fn has_children() -> bool {
        // SAFETY: waitid writes only into `info`, which outlives the call.
        let mut info: nix::libc::siginfo_t = unsafe { std::mem::zeroed() };
        let flags = nix::libc::WEXITED | nix::libc::WNOHANG | nix::libc::WNOWAIT;
        let r = unsafe { nix::libc::waitid(nix::libc::P_ALL, 0, &mut info, flags) };
        !(r < 0 && nix::errno::Errno::last() == nix::errno::Errno::ECHILD)
    }

    /// Every live (not zombie) process descended from `root`.
    pub fn descendants(root: i32) -> Vec<i32> {
        let mut children: HashMap<i32, Vec<(i32, bool)>> = HashMap::new();
        let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
        for entry in dir.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
            let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
            let mut f = rest.split_whitespace();
            let zombie = matches!(f.next(), Some("Z" | "X"));
            if let Some(ppid) = f.next().and_then(|p| p.parse::<i32>().ok()) {
                children.entry(ppid).or_default().push((pid, zombie));
            }
        }
        let (mut out, mut todo) = (Vec::new(), vec![root]);
        while let Some(p) = todo.pop() {
            for &(c, zombie) in children.get(&p).into_iter().flatten() {
                todo.push(c);
                if !zombie {
                    out.push(c);
                }
            }
        }
        out
    }

    /// SIGKILLs everything below `root` until nothing is left or `limit` passes, calling
    /// `reap` between rounds (the dead that are this process's children).
    pub fn kill_below(root: i32, limit: Duration, reap: &mut dyn FnMut()) {
        let end = Instant::now() + limit;
        loop {
            let live = descendants(root);
            if live.is_empty() || Instant::now() > end {
                return;
            }
            for pid in live {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            reap();
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
