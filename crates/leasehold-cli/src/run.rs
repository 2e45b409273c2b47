//! `leasehold run`: the command under a lease; SIGTERM, then SIGKILL after the grace, when the
//! lease is lost or cannot be confirmed before its local deadline.

use super::*;

/// Which store a `run` holds its key on, exported to the command so that a nested `run` can
/// tell its parent's store: the URL with any password redacted.
const ENV_STORE_ID: &str = "LEASEHOLD_STORE_ID";
/// The pid of the `run` that holds the grant. Its command leads a process group of its own;
/// a nested `run` borrows the grant only from inside that group (which the parent's SIGTERM
/// and SIGKILL on loss reach), i.e. when its group's leader is a child of this pid.
const ENV_RUN_PID: &str = "LEASEHOLD_RUN_PID";

/// What a nested `run` found in its environment.
enum Parent {
    /// Not nested in a run of this key on this store (or not in its process group).
    None,
    /// The store confirms the parent's grant: its fence.
    Confirmed(u64),
    /// Nested, but the store cannot confirm whose grant it is (a session lock held by
    /// another process): acquiring would wait on the parent.
    Unconfirmable(Error),
}

pub(crate) async fn run(
    store: StoreOpt,
    GrantOpt { ttl, wait }: GrantOpt,
    grace: Duration,
    if_unavailable: IfUnavailable,
    key: String,
    command: Vec<OsString>,
) -> Result<Exit, Exit> {
    use tokio::signal::unix::{SignalKind, signal};

    let url = store_url(store)?;
    let store_id = leasehold::redact(&url);
    // Pull the local deadline `grace` earlier (at most to ttl/2) so SIGTERM + grace ends
    // before the store's expiry.
    let base = (ttl / 10).min(Duration::from_secs(2));
    let margin = (base + grace).min(ttl / 2);
    let fail_open = |e: &Error| e.is_unavailable() && if_unavailable == IfUnavailable::Run;
    let warn_open = |e: &Error| {
        eprintln!(
            "leasehold: warning: store unavailable ({e}); running the command WITHOUT a lease \
             on {key:?} (--if-unavailable run)"
        )
    };
    let locker = match Locker::connect(&url).await {
        Ok(l) => l,
        Err(e) if fail_open(&e) => {
            warn_open(&e);
            return Err(exec(&command, None));
        }
        Err(e) => return Err(e.into()),
    };
    match parents_grant(&locker, &key, &store_id).await {
        Parent::None => {}
        // Nested in a run of the same key: the parent's grant covers this command.
        Parent::Confirmed(fence) => return Err(exec(&command, Some(fence))),
        Parent::Unconfirmable(e) => {
            return Err(Exit::fail(
                code::BUSY,
                format!(
                    "nested in a run of {key:?}, but the store cannot confirm that grant ({e}); \
                     not waiting on the parent"
                ),
            ));
        }
    }
    let acquired = locker.acquire(&key, ttl).wait(wait).auto_renew(true).margin(margin).await;
    let lease = match acquired {
        Ok(lease) => lease,
        Err(e) if fail_open(&e) => {
            warn_open(&e);
            // The acquire's owner-checked cleanup is in flight; exec ends it, and the
            // store's expiry is the backstop.
            let _ = tokio::time::timeout(Duration::from_millis(200), locker.close()).await;
            return Err(exec(&command, None));
        }
        Err(e) => return Err(e.into()),
    };

    let sig = |k| {
        signal(k)
            .map_err(|e| Exit::fail(code::SOFTWARE, format!("cannot install signal handler: {e}")))
    };
    let (mut int, mut term, mut hup) =
        (sig(SignalKind::interrupt())?, sig(SignalKind::terminate())?, sig(SignalKind::hangup())?);

    let (prog, args) = command.split_first().expect("clap requires a command");
    let spawned = tokio::process::Command::new(prog)
        .args(args)
        .env(ENV_KEY, lease.key().as_str())
        .env(ENV_FENCE, lease.fence().to_string())
        .env(ENV_OWNER, lease.owner().to_string())
        .env(ENV_STORE_ID, &store_id)
        .env(ENV_RUN_PID, std::process::id().to_string())
        // Its own process group, so loss terminates everything it started.
        .process_group(0)
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let _ = lease.release().await;
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                code::NOT_FOUND
            } else {
                code::CANNOT_EXECUTE
            };
            return Err(Exit::fail(code, format!("cannot run {}: {e}", prog.to_string_lossy())));
        }
    };
    let pgid = Pid::from_raw(child.id().map(|p| p as i32).unwrap_or(0));
    let send = |s: Signal| {
        if pgid.as_raw() > 0 {
            let _ = killpg(pgid, s);
        }
    };

    let lost = lease.lost();
    tokio::pin!(lost);
    let mut lost_reason = None;
    let mut kill_at: Option<Instant> = None;
    let status = loop {
        tokio::select! {
            st = child.wait() => break st,
            reason = &mut lost, if lost_reason.is_none() => {
                eprintln!("leasehold: lease on {key:?} lost ({reason}); sending SIGTERM to the command");
                send(Signal::SIGTERM);
                lost_reason = Some(reason);
                kill_at = Some(Instant::now() + grace);
            }
            _ = tokio::time::sleep_until(kill_at.unwrap_or_else(Instant::now).into()), if kill_at.is_some() => {
                eprintln!("leasehold: the command outlived --grace {}; sending SIGKILL", dur::human(grace));
                send(Signal::SIGKILL);
                kill_at = None;
            }
            _ = int.recv() => send(Signal::SIGINT),
            _ = term.recv() => send(Signal::SIGTERM),
            _ = hup.recv() => send(Signal::SIGHUP),
        }
    };
    let status =
        status.map_err(|e| Exit::fail(code::SOFTWARE, format!("waiting for the command: {e}")))?;
    if lost_reason.is_some() {
        // Nothing it started may go on writing without the lease.
        send(Signal::SIGKILL);
    }
    let released = lease.release().await;
    // A release sent in the background (the lease was lost) gets a short while; the store's
    // expiry is the backstop, and exit does not wait again.
    let _ = tokio::time::timeout(Duration::from_secs(1), locker.close()).await;
    if let Some(reason) = lost_reason {
        return Err(Exit::fail(
            code::LOST,
            format!("lease on {key:?} lost ({reason}); the command was terminated"),
        ));
    }
    match released {
        Ok(leasehold::Released::Clean) => {}
        Ok(leasehold::Released::MayHaveOverlapped) => {
            return Err(Exit::fail(
                code::LOST,
                format!(
                    "the lease on {key:?} was no longer ours when the command ended: it may have overlapped with another holder"
                ),
            ));
        }
        Err(e) => {
            eprintln!("leasehold: warning: release of {key:?} failed ({e}); its TTL will free it")
        }
    }
    use std::os::unix::process::ExitStatusExt;
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c.clamp(0, 255) as u8,
        (None, Some(sig)) => (128 + sig).clamp(0, 255) as u8,
        _ => code::SOFTWARE,
    };
    Ok(Exit::ok(code))
}

/// The grant of a `run` of the same key on the same store that this process runs under, if
/// the environment names one and the store confirms it is the current grant: its fence.
async fn parents_grant(locker: &Locker, key: &str, store_id: &str) -> Parent {
    let env = |name| std::env::var(name).ok();
    if env(ENV_KEY).as_deref() != Some(key) || env(ENV_STORE_ID).as_deref() != Some(store_id) {
        return Parent::None;
    }
    // Only inside the parent's process group, which its SIGTERM/SIGKILL on loss reaches (not
    // from a setsid'd daemon, nor through a run of another key, which starts a group).
    let in_group =
        env(ENV_RUN_PID).is_some_and(|pid| group_leader_parent().as_deref() == Some(&pid));
    let (Some(owner), Some(fence)) = (
        env(ENV_OWNER).and_then(|o| o.parse::<OwnerToken>().ok()),
        env(ENV_FENCE).and_then(|f| f.parse::<u64>().ok()),
    ) else {
        return Parent::None;
    };
    if !in_group {
        return Parent::None;
    }
    let holders = match locker.holders(Some(key)).await {
        Ok(h) => h,
        Err(e) => return Parent::Unconfirmable(e),
    };
    let current =
        holders.iter().any(|h| h.owner == owner && h.fence.is_none_or(|f| f.get() == fence));
    if !current {
        eprintln!(
            "leasehold: the enclosing run's grant on {key:?} is no longer current; acquiring anew"
        );
        return Parent::None;
    }
    Parent::Confirmed(fence)
}

/// Where `--metrics-file` goes, and what records it.
static METRICS: std::sync::OnceLock<(
    std::path::PathBuf,
    leasehold_harness::metrics::TextRecorder,
)> = std::sync::OnceLock::new();

/// Installs the recorder behind `--metrics-file`, if one was asked for.
pub(crate) fn install_metrics(path: Option<std::path::PathBuf>) {
    let Some(path) = path else { return };
    let rec = leasehold_harness::metrics::TextRecorder::default();
    if metrics::set_global_recorder(rec.clone()).is_ok() {
        let _ = METRICS.set((path, rec));
    }
}

/// Writes the recorded metrics to the `--metrics-file` (atomically: a collector never reads
/// half a file). A failure is a warning: the command's outcome matters more.
pub(crate) fn flush_metrics() {
    let Some((path, rec)) = METRICS.get() else { return };
    let mut tmp = path.clone().into_os_string();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let written = std::fs::write(&tmp, rec.render()).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        eprintln!("leasehold: warning: cannot write --metrics-file {}: {e}", path.display());
    }
}

/// Replaces this process with the command: under the parent's grant (`Some(fence)`, the
/// environment already carries it), or without any lease (`None`: the LEASEHOLD_* grant
/// variables are removed). Returns only if the command cannot be executed.
fn exec(command: &[OsString], under: Option<u64>) -> Exit {
    use std::os::unix::process::CommandExt;
    let (prog, args) = command.split_first().expect("clap requires a command");
    let mut cmd = std::process::Command::new(prog);
    cmd.args(args);
    if under.is_none() {
        for v in [ENV_KEY, ENV_FENCE, ENV_OWNER, ENV_STORE_ID] {
            cmd.env_remove(v);
        }
    }
    flush_metrics();
    let e = cmd.exec();
    let code = if e.kind() == std::io::ErrorKind::NotFound {
        code::NOT_FOUND
    } else {
        code::CANNOT_EXECUTE
    };
    Exit::fail(code, format!("cannot run {}: {e}", prog.to_string_lossy()))
}

/// The parent pid of this process group's leader (Linux `/proc`; `None` elsewhere, or when
/// the leader has exited), as text.
fn group_leader_parent() -> Option<String> {
    let leader = nix::unistd::getpgrp().as_raw();
    let stat = std::fs::read_to_string(format!("/proc/{leader}/stat")).ok()?;
    // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1).map(str::to_owned)
}
