//! A `run` nested in a `run` of the same key borrows the parent's grant; and `exec`, which
//! replaces this process with the command (under that grant, or, failing open, under none).

use std::ffi::OsString;

use leasehold::fence::{ENV_FENCE, ENV_KEY, ENV_OWNER};
use leasehold::{Error, Locker, OwnerToken};

use super::supervise::ENV_RUN_PID;
use super::{ENV_STORE_ID, metrics};
use crate::exit::{Exit, code};

/// What a nested `run` found in its environment.
pub(super) enum Parent {
    /// Not nested in a run of this key on this store (or not in its process group).
    None,
    /// The store confirms the parent's grant: its fence.
    Confirmed(u64),
    /// Nested, but the store cannot confirm whose grant it is (a session lock held by
    /// another process): acquiring would wait on the parent.
    Unconfirmable(Error),
}

/// The grant of a `run` of the same key on the same store that this process runs under, if
/// the environment names one and the store confirms it is the current grant: its fence.
pub(super) async fn parents_grant(locker: &Locker, key: &str, store_id: &str) -> Parent {
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
    // A reader's grant (`run --shared`) never covers a writer nested in it.
    let current = holders.iter().any(|h| {
        h.owner == owner
            && h.fence.is_none_or(|f| f.get() == fence)
            && h.mode == leasehold::Mode::Exclusive
    });
    if !current {
        eprintln!(
            "leasehold: the enclosing run's grant on {key:?} is no longer current; acquiring anew"
        );
        return Parent::None;
    }
    Parent::Confirmed(fence)
}

/// Replaces this process with the command: under the parent's grant (`Some(fence)`, the
/// environment already carries it), or without any lease (`None`: the LEASEHOLD_* grant
/// variables are removed), without the variables `withheld` (the store's URL and password).
/// Returns only if the command cannot be executed.
pub(super) fn exec(command: &[OsString], under: Option<u64>, withheld: &[OsString]) -> Exit {
    use std::os::unix::process::CommandExt;
    let (prog, args) = command.split_first().expect("clap requires a command");
    let mut cmd = std::process::Command::new(prog);
    cmd.args(args);
    super::note_withheld(withheld);
    for v in withheld {
        cmd.env_remove(v);
    }
    if under.is_none() {
        for v in [ENV_KEY, ENV_FENCE, ENV_OWNER, ENV_STORE_ID] {
            cmd.env_remove(v);
        }
    }
    metrics::flush_before_exec(match under {
        Some(_) => metrics::Outcome::Nested,
        None => metrics::Outcome::Unlocked,
    });
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
