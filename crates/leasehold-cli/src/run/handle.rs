//! `run`'s side of the supervisor ([`super::supervise`]): start it, tell it the local
//! deadline and the signals to pass on, hear what the command did.

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use super::supervise::{ENV_FD, inherit_fd, mono_ns};

/// What the supervisor reports.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// The command started; its process group.
    Started(i32),
    /// The command could not be started (`true`: not found).
    SpawnFailed(bool, String),
    /// The command exited, leaving this many processes; they get SIGTERM, then SIGKILL.
    Leftover(usize),
    /// The supervisor reached the local deadline itself and sent SIGTERM.
    DeadlineTerm,
    /// … and SIGKILL, --grace after it.
    DeadlineKill,
    /// The command outlived --grace after the SIGTERM `run` was sent; SIGKILL.
    StopKill,
    /// The command (and all it started) ended: its exit code, or 128 + its signal.
    Ended(u8),
    /// The supervisor is gone without a word.
    Gone,
}

pub(crate) struct Supervisor {
    pub child: tokio::process::Child,
    tx: OwnedWriteHalf,
    rx: tokio::io::Lines<BufReader<OwnedReadHalf>>,
}

impl Supervisor {
    /// Starts `leasehold supervise -- COMMAND` with the variables `withheld` removed from its
    /// environment (and so from the command's). It starts the command on [`Supervisor::go`],
    /// and exits without starting it if this is dropped first, so `run` may start it before
    /// it has a grant: a handoff then does not wait for this binary to start.
    pub fn spawn(
        command: &[OsString],
        withheld: &[OsString],
        grace: Duration,
    ) -> std::io::Result<Self> {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
        let fd = theirs.as_raw_fd();
        // /proc/self/exe still works when the binary was replaced on disk meanwhile.
        let exe = if cfg!(target_os = "linux") {
            std::path::PathBuf::from("/proc/self/exe")
        } else {
            std::env::current_exe()?
        };
        let mut cmd = tokio::process::Command::new(exe);
        cmd.arg0("leasehold")
            .arg("supervise")
            .arg(format!("--grace-ms={}", grace.as_millis()))
            .arg("--")
            .args(command)
            .env(ENV_FD, fd.to_string());
        for k in withheld {
            cmd.env_remove(k);
        }
        // SAFETY: fcntl only, between fork and exec.
        unsafe {
            cmd.pre_exec(move || inherit_fd(fd));
        }
        let child = cmd.spawn()?;
        drop(theirs);
        ours.set_nonblocking(true)?;
        let (rx, tx) = tokio::net::UnixStream::from_std(ours)?.into_split();
        Ok(Supervisor { child, tx, rx: BufReader::new(rx).lines() })
    }

    /// Starts the command with `env` added to its environment (the grant's variables).
    pub async fn go(&mut self, env: &[(&str, String)]) {
        if let Ok(json) = serde_json::to_string(env) {
            self.send(format!("go {json}")).await;
        }
    }

    async fn send(&mut self, line: String) {
        let _ = self.tx.write_all(format!("{line}\n").as_bytes()).await;
    }

    /// SIGTERM at `deadline`, SIGKILL --grace after it, unless a later deadline comes first.
    pub async fn deadline(&mut self, deadline: Instant) {
        let now = Instant::now();
        let at = if deadline >= now {
            mono_ns() + (deadline - now).as_nanos() as i64
        } else {
            mono_ns() - (now - deadline).as_nanos() as i64
        };
        self.send(format!("deadline {at}")).await;
    }

    /// Gives the supervisor what it needs to release the grants, owner-checked, should `run`
    /// die while the command runs (over the socket: never argv, never an environment).
    pub async fn release_on_exit(&mut self, order: &super::supervise::ReleaseOrder) {
        if let Ok(json) = serde_json::to_string(order) {
            self.send(format!("release {json}")).await;
        }
    }

    /// Passes signal `n` to the command's process group.
    pub async fn signal(&mut self, n: i32) {
        self.send(format!("signal {n}")).await;
    }

    /// SIGTERM to the command's process group, and SIGKILL to everything it started
    /// --grace after the first one (as systemd stops a unit).
    pub async fn stop(&mut self) {
        self.send("stop".into()).await;
    }

    /// SIGTERM now, SIGKILL after --grace.
    pub async fn term(&mut self) {
        self.send("term".into()).await;
    }

    /// SIGKILL to the command and everything it started, now.
    pub async fn kill(&mut self) {
        self.send("kill".into()).await;
    }

    /// The next report (cancel-safe).
    pub async fn next(&mut self) -> Event {
        let Ok(Some(line)) = self.rx.next_line().await else { return Event::Gone };
        let (word, rest) = line.split_once(' ').unwrap_or((&line, ""));
        let num = || rest.trim().parse::<i64>().ok();
        match (word, num()) {
            ("started", Some(pid)) => Event::Started(pid as i32),
            ("spawn-failed", _) => {
                let (kind, msg) = rest.split_once(' ').unwrap_or((rest, ""));
                Event::SpawnFailed(kind == "notfound", msg.to_owned())
            }
            ("leftover", Some(n)) => Event::Leftover(n as usize),
            ("deadline-term", _) => Event::DeadlineTerm,
            ("deadline-kill", _) => Event::DeadlineKill,
            ("stop-kill", _) => Event::StopKill,
            ("exited", Some(c)) => Event::Ended(c.clamp(0, 255) as u8),
            ("killed", Some(s)) => Event::Ended((128 + s).clamp(0, 255) as u8),
            _ => Event::Gone,
        }
    }
}
