//! Who holds a key: what a locker records beside each grant ([`HolderInfo`]) and what a
//! store reports of its current grants ([`Holder`], `Locker::holders`, `leasehold status`).

use std::time::Duration;

use crate::{FenceToken, Key, OwnerToken};

/// Who holds a grant, as the holder described itself when it acquired: host, pid, when, and
/// what it runs. For operators (`leasehold status`, like `lsof` for a `flock`); it is what
/// the holder wrote, unchecked, so nothing may rely on it for safety.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct HolderInfo {
    /// The holder's host name.
    pub host: String,
    /// The holder's process id on that host.
    pub pid: u32,
    /// When it acquired, in milliseconds since 1970 by the holder's own clock.
    pub since_ms: u64,
    /// What it runs: the command line for `leasehold run`, else the program's name. At most
    /// [`HolderInfo::MAX_COMMAND`] bytes.
    pub command: String,
}

impl HolderInfo {
    /// The longest command kept, in bytes (longer ones are cut at a character boundary).
    pub const MAX_COMMAND: usize = 256;

    /// This process: its host name, pid and program name, acquiring now.
    pub fn this_process() -> Self {
        let host = nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_else(|| "?".into());
        HolderInfo { host, pid: std::process::id(), since_ms: 0, command: String::new() }
            .with_command(command_of())
            .stamped()
    }

    /// The same holder, running `command` (cut to [`HolderInfo::MAX_COMMAND`] bytes; tabs and
    /// line breaks become spaces, so it stays one line in any listing).
    pub fn with_command(mut self, command: impl Into<String>) -> Self {
        let mut c: String =
            command.into().chars().map(|ch| if ch.is_control() { ' ' } else { ch }).collect();
        if c.len() > Self::MAX_COMMAND {
            let mut end = Self::MAX_COMMAND;
            while !c.is_char_boundary(end) {
                end -= 1;
            }
            c.truncate(end);
        }
        self.command = c;
        self
    }

    /// The same holder, acquiring now (`since_ms` set from this host's clock).
    pub fn stamped(mut self) -> Self {
        self.since_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self
    }

    /// One line a store can keep beside the grant: `pid TAB since_ms TAB host TAB command`.
    pub fn encode(&self) -> String {
        let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
        format!("{}\t{}\t{}\t{}", self.pid, self.since_ms, clean(&self.host), clean(&self.command))
    }

    /// Reads [`HolderInfo::encode`]'s line back; `None` for anything else.
    pub fn decode(line: &str) -> Option<Self> {
        let mut parts = line.splitn(4, '\t');
        let pid = parts.next()?.parse().ok()?;
        let since_ms = parts.next()?.parse().ok()?;
        let host = parts.next()?.to_owned();
        let command = parts.next().unwrap_or("").to_owned();
        Some(HolderInfo { host, pid, since_ms, command })
    }
}

fn command_of() -> String {
    std::env::args_os().next().map(|a| a.to_string_lossy().into_owned()).unwrap_or_default()
}

/// A lease as seen in the store, for `status`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Holder {
    /// The key.
    pub key: Key,
    /// Who holds it.
    pub owner: OwnerToken,
    /// The fence of the current grant; `None` when the store does not know it (Redlock with
    /// an external fence source).
    pub fence: Option<FenceToken>,
    /// Time left by the store's clock; `None` for session locks.
    #[serde(serialize_with = "ser_ms")]
    pub expires_in: Option<Duration>,
    /// Who holds it, where the store keeps that (see [`HolderInfo`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub info: Option<HolderInfo>,
}

impl Holder {
    /// Builds a holder row.
    pub fn new(
        key: Key,
        owner: OwnerToken,
        fence: Option<FenceToken>,
        expires_in: Option<Duration>,
    ) -> Self {
        Holder { key, owner, fence, expires_in, info: None }
    }

    /// The same row, with who holds it.
    pub fn with_info(mut self, info: Option<HolderInfo>) -> Self {
        self.info = info;
        self
    }
}

fn ser_ms<S: serde::Serializer>(
    d: &Option<Duration>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&(d.as_millis() as u64)),
        None => s.serialize_none(),
    }
}
