//! `file://DIR`: `flock(2)` session locks on a local directory.
//!
//! One lock file per key (`DIR/<encoded key>.lock`; removed once the key was not locked within
//! the horizon, `prune.rs`). The lock is held by an
//! open file description of this process, so it ends exactly when the holder releases it or
//! the process dies, and never by time: there is no TTL and nothing to renew. Lock files
//! hold `fence\nowner\nkey`, then `\0` and who holds it ([`crate::HolderInfo`], one
//! line; keys hold no NUL); the fence is read, incremented, written and fsynced while the
//! lock is held, so it increases across grants, releases and crashes of the holder, and,
//! being at least the clock in µs, across the removal of the file past the horizon
//! (`?horizon=`, a day by default; [`FileStore::with_horizon`](crate::backends::file::FileStore::with_horizon)): after an acquire, at most
//! once per quarter of the horizon, a background thread removes the lock files idle longer.
//!
//! A directory the store cannot use (permission denied, a read-only file system, a file in
//! its place) is [`crate::Error::Config`].
//!
//! Local file systems only (flock over NFS is emulated or absent).
//!
//! Waiting uses inotify, one instance per store: attempts open the lock file read-only (no
//! event), a holder also keeps a read-write descriptor that it closes right after unlocking,
//! and that `IN_CLOSE_WRITE` wakes the waiters. A dying holder's descriptors are closed by the
//! kernel in no set order (and the close event precedes the lock's removal), so a waiter
//! whose attempt after an event fails retries after 2 ms, backing off to 1 s. A waiter that
//! gives up holds nothing, so it can never make a free key look busy.

mod config;
mod procfs;
mod prune;
use config::FileUrl;
mod shared;
mod waiting;
use waiting::Hub;

use procfs::{dev_parts, flocked_inodes};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::store::{AcquireRequest, Attempt, Grant};
use crate::{Error, FenceRepeat, FenceToken, Guarantees, Key, LockKind, OwnerToken, Result, Store};
use crate::{Holder, HolderInfo};

/// Longest lock file name stem before the key is shortened and hashed.
const MAX_STEM: usize = 200;

/// The `flock` session-lock store.
#[derive(Debug, Clone)]
pub struct FileStore {
    dir: PathBuf,
    held: Arc<Mutex<HashMap<Key, Held>>>,
    /// This process's readers (`shared.rs`), by key and owner.
    readers: Arc<Mutex<shared::Readers>>,
    hub: Arc<Mutex<Option<Arc<Hub>>>>,
    /// When to remove lock files idle past the horizon next.
    prune: Arc<prune::Schedule>,
}

/// A held lock. Field order matters: dropping unlocks first, then closes the writer, whose
/// `IN_CLOSE_WRITE` tells waiters the key is free.
#[derive(Debug)]
struct Held {
    owner: OwnerToken,
    _lock: Flock<File>,
    _writer: File,
}

fn io_err(what: String) -> impl FnOnce(std::io::Error) -> Error {
    move |e| Error::local_io(what, e)
}

/// FNV-1a, 64 bit, from a given offset basis: two different bases give 128 bits of name.
fn fnv(bytes: &[u8], basis: u64) -> u64 {
    bytes.iter().fold(basis, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3))
}

/// File name for a key: safe bytes kept, others `%XX`; long names cut and suffixed with a
/// hash of the whole key (two long keys sharing a file only over-exclude, never under-exclude).
fn file_name(key: &Key) -> String {
    let mut s = String::new();
    for (i, b) in key.as_str().bytes().enumerate() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    if s.len() > MAX_STEM {
        let k = key.as_str().as_bytes();
        s.truncate(MAX_STEM - 34);
        s.push_str(&format!(
            "~{:016x}{:016x}",
            fnv(k, 0xcbf2_9ce4_8422_2325),
            fnv(k, 0x6c62_272e_07bb_0142)
        ));
    }
    s.push_str(".lock");
    s
}

/// Creates the lock file if it is missing (the only time anyone but a holder writes it).
fn ensure_file(path: &Path) -> Result<()> {
    if !path.exists() {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io_err(format!("cannot create lock file {}", path.display())))?;
    }
    Ok(())
}

fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    a.ino() == b.ino() && a.dev() == b.dev()
}

/// Tries to lock `path` exclusively through a read-only descriptor (closing it makes no
/// `IN_CLOSE_WRITE`); `None` if busy. Retries if the file was replaced meanwhile.
fn lock_file(path: &Path) -> Result<Option<Flock<File>>> {
    lock_as(path, FlockArg::LockExclusiveNonblock, "flock")
}

/// `lock_file` with the lock kind `arg` (`what` names it in errors): readers take it shared.
fn lock_as(path: &Path, arg: FlockArg, what: &str) -> Result<Option<Flock<File>>> {
    loop {
        ensure_file(path)?;
        let f = match File::open(path) {
            Ok(f) => f,
            // Removed past the horizon between the two: make it again.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_err(format!("cannot open lock file {}", path.display()))(e)),
        };
        let lock = match Flock::lock(f, arg) {
            Ok(l) => l,
            Err((_, Errno::EWOULDBLOCK)) => return Ok(None),
            Err((_, Errno::EINTR)) => continue,
            Err((_, e)) => {
                return Err(Error::backend("file", format!("{what} {}", path.display()), e));
            }
        };
        let held = lock.metadata().map_err(io_err(format!("stat {}", path.display())))?;
        match std::fs::metadata(path) {
            Ok(now) if same_file(&now, &held) => return Ok(Some(lock)),
            _ => continue,
        }
    }
}

/// What a lock file says: its last fence, and the last grant's owner, key and holder info.
type Content = (u64, Option<(OwnerToken, String, Option<HolderInfo>)>);

/// Parses `fence\nowner\nkey[\0info]`. An empty file is a fresh counter.
fn parse(content: &str) -> Option<Content> {
    if content.is_empty() {
        return Some((0, None));
    }
    let (content, info) = match content.split_once('\0') {
        Some((c, i)) => (c, HolderInfo::decode(i)),
        None => (content, None),
    };
    let mut parts = content.splitn(3, '\n');
    let fence = parts.next()?.parse().ok()?;
    let rest = match (parts.next(), parts.next()) {
        (Some(o), Some(k)) => o.parse().ok().map(|o| (o, k.to_owned(), info)),
        _ => None,
    };
    Some((fence, rest))
}

/// Bumps the fence stored in a locked file and records the new owner.
fn bump_fence(
    writer: &File,
    path: &Path,
    key: &Key,
    owner: &OwnerToken,
    info: Option<&HolderInfo>,
) -> Result<FenceToken> {
    let mut content = String::new();
    let mut reader = writer;
    reader
        .read_to_string(&mut content)
        .map_err(io_err(format!("cannot read lock file {}", path.display())))?;
    let Some((last, _)) = parse(&content) else {
        // Never restart a counter we cannot read: that could repeat a fence.
        return Err(Error::Backend {
            backend: "file",
            message: format!(
                "lock file {} is corrupt; refusing to guess its fence",
                path.display()
            ),
            source: None,
        });
    };
    // The clock floor: a deleted or restored lock file still issues larger fences.
    let next = crate::token::next_fence(last, crate::token::wall_clock_us());
    let mut body = format!("{next}\n{owner}\n{}", key.as_str());
    if let Some(info) = info {
        body.push('\0');
        body.push_str(&info.encode().replace('\0', " "));
    }
    let w = || -> std::io::Result<()> {
        writer.write_all_at(body.as_bytes(), 0)?;
        writer.set_len(body.len() as u64)?;
        writer.sync_data()
    };
    w().map_err(io_err(format!("cannot write lock file {}", path.display())))?;
    Ok(FenceToken::new(next))
}

impl FileStore {
    /// Uses `dir` (created if missing) for lock files.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_owned();
        if dir.as_os_str().is_empty() {
            return Err(Error::invalid("file:// URL has an empty directory"));
        }
        let meta = std::fs::metadata(&dir);
        if meta.as_ref().is_ok_and(|m| !m.is_dir()) {
            return Err(Error::config(
                format!("lock directory {} is not a directory", dir.display()),
                None,
            ));
        }
        if meta.is_err() {
            std::fs::create_dir_all(&dir)
                .map_err(io_err(format!("cannot create lock directory {}", dir.display())))?;
        }
        // Writable? A lock file must be creatable there (checked now, not at the first
        // acquire): a read-only file system or a directory without write permission is a
        // wrong path, not an outage.
        use nix::unistd::{AccessFlags, access};
        access(&dir, AccessFlags::W_OK | AccessFlags::X_OK).map_err(|e| {
            Error::local_io(
                format!("cannot create files in lock directory {}", dir.display()),
                std::io::Error::from_raw_os_error(e as i32),
            )
        })?;
        Ok(FileStore {
            dir,
            held: Arc::default(),
            readers: Arc::default(),
            hub: Arc::default(),
            prune: Arc::new(prune::Schedule::new(crate::horizon::DEFAULT_HORIZON)),
        })
    }

    /// This store with lock files kept for `horizon` once their key is idle (the default is
    /// [`crate::horizon::DEFAULT_HORIZON`]; see the module docs), from
    /// [`crate::horizon::MIN_HORIZON`] to [`crate::horizon::MAX_HORIZON`], else
    /// [`Error::InvalidInput`].
    pub fn with_horizon(mut self, horizon: Duration) -> Result<Self> {
        use crate::horizon::{MAX_HORIZON, MIN_HORIZON};
        if !(MIN_HORIZON..=MAX_HORIZON).contains(&horizon) {
            return Err(Error::invalid(format!(
                "horizon {horizon:?} is out of range ({MIN_HORIZON:?} to {MAX_HORIZON:?})"
            )));
        }
        self.prune = Arc::new(prune::Schedule::new(horizon));
        Ok(self)
    }

    /// Removes the lock files of keys idle past the horizon (none held here or elsewhere,
    /// none locked within the horizon), now; returns how many. The store also does this in
    /// the background after an acquire, at most once per quarter of the horizon. Safe
    /// against every locker of `DIR` that checks, as this crate does, that the file it locked
    /// is still the one at its path (see the module docs).
    pub async fn prune(&self) -> Result<u64> {
        let (dir, h) = (self.dir.clone(), self.prune.horizon);
        tokio::task::spawn_blocking(move || prune::prune_dir(&dir, h))
            .await
            .map_err(|e| Error::backend("file", "worker thread failed", e))?
    }

    /// Starts a background [`FileStore::prune`] if one is due.
    fn prune_if_due(&self) {
        if self.prune.due() {
            let (dir, h) = (self.dir.clone(), self.prune.horizon);
            tokio::task::spawn_blocking(move || {
                if let Err(e) = prune::prune_dir(&dir, h) {
                    tracing::debug!("file store pruning failed: {e}");
                }
            });
        }
    }

    fn path(&self, key: &Key) -> PathBuf {
        self.dir.join(file_name(key))
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Turns a locked file into a grant: bump the fence through a writer, remember both.
    async fn grant(
        &self,
        req: &AcquireRequest<'_>,
        lock: Flock<File>,
        sent: Instant,
    ) -> Result<Attempt> {
        let (path, key, owner) = (self.path(req.key), req.key.clone(), *req.owner);
        let info = req.info.cloned();
        let (fence, lock, writer) = tokio::task::spawn_blocking(move || {
            let writer = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .map_err(io_err(format!("cannot open lock file {}", path.display())))?;
            let (w, l) = (writer.metadata(), lock.metadata());
            if !matches!((&w, &l), (Ok(w), Ok(l)) if same_file(w, l)) {
                return Err(Error::unavailable(
                    format!("lock file {} was replaced", path.display()),
                    None,
                ));
            }
            bump_fence(&writer, &path, &key, &owner, info.as_ref()).map(|f| (f, lock, writer))
        })
        .await
        .map_err(|e| Error::backend("file", "worker thread failed", e))??;
        self.held()
            .insert(req.key.clone(), Held { owner: *req.owner, _lock: lock, _writer: writer });
        Ok(Attempt::Granted(Grant::new(fence, sent)))
    }
}

#[async_trait]
impl Store for FileStore {
    fn guarantees(&self) -> Guarantees {
        Guarantees {
            backend: "file",
            kind: LockKind::Session,
            exclusion: "one host, local file systems only (flock(2))",
            store_failure: "the holder's death releases the lock; lock files survive reboots; \
                            a deleted or restored lock file still issues larger fences (the \
                            clock floor)",
            expiry: "session: the holding process's open file, no TTL",
            fence: "max(counter + 1, the machine's clock in µs) in the lock file, written and \
                    fsynced under the lock; a lock file idle past the horizon (horizon=, a day \
                    by default) is removed under its lock, and the key's next fence starts \
                    from the clock, above it",
            fence_repeat: FenceRepeat::ClockBacked,
            failure_admits_second_holder: false,
            holders_know_fence: true,
            holders_know_info: true,
            waiting: "inotify close-write event on release; 2 ms-1 s backoff after a holder's death",
            primitives: shared::PRIMITIVES,
        }
    }

    async fn try_acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        self.prune_if_due();
        let sent = Instant::now();
        if req.mode == crate::Mode::Shared {
            return self.try_shared(req, sent).await;
        }
        let path = self.path(req.key);
        let lock = tokio::task::spawn_blocking(move || lock_file(&path))
            .await
            .map_err(|e| Error::backend("file", "worker thread failed", e))??;
        match lock {
            Some(lock) => self.grant(req, lock, sent).await,
            None => Ok(Attempt::Busy { holder_expires_in: None }),
        }
    }

    async fn acquire(&self, req: &AcquireRequest<'_>, until: Option<Instant>) -> Result<Attempt> {
        crate::store::acquire_watching(self, req, until, || self.watch(req.key)).await
    }

    async fn renew(&self, key: &Key, owner: &OwnerToken, _ttl: Duration) -> Result<bool> {
        Ok(self.held().get(key).is_some_and(|h| h.owner == *owner) || self.reads(key, owner))
    }

    async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool> {
        let mut held = self.held();
        if held.get(key).is_some_and(|h| h.owner == *owner) {
            held.remove(key); // closes the file: the kernel drops the lock
            Ok(true)
        } else {
            drop(held);
            Ok(self.release_reader(key, owner))
        }
    }

    /// Removes the lock file while holding its lock; a contender that opened it before sees
    /// the path changed after locking and starts over (see `lock_file`).
    async fn forget(&self, key: &Key) -> Result<()> {
        if self.held().contains_key(key) {
            return Ok(());
        }
        let path = self.path(key);
        tokio::task::spawn_blocking(move || {
            if !path.exists() {
                return Ok(());
            }
            if let Some(lock) = lock_file(&path)? {
                std::fs::remove_file(&path)
                    .map_err(io_err(format!("cannot remove lock file {}", path.display())))?;
                drop(lock);
            }
            Ok(())
        })
        .await
        .map_err(|e| Error::backend("file", "worker thread failed", e))?
    }

    async fn holders(&self, key: Option<&Key>) -> Result<Vec<Holder>> {
        let dir = self.dir.clone();
        let only = key.map(|k| self.path(k));
        // Locks of this process are known exactly; other processes' come from /proc/locks.
        let ours: Vec<PathBuf> = self.held().keys().map(|k| self.path(k)).collect();
        let mine = self.reader_holders(key);
        let mine_paths: Vec<PathBuf> = mine.iter().map(|h| self.path(&h.key)).collect();
        tokio::task::spawn_blocking(move || {
            // /proc/locks is produced in chunks and is no snapshot: under churn an entry can be
            // skipped. Two reads make a miss much less likely, not impossible.
            let mut locked = flocked_inodes(true)?;
            locked.extend(flocked_inodes(true)?);
            let read = flocked_inodes(false)?;
            let paths: Vec<PathBuf> = match only {
                Some(p) => vec![p],
                None => std::fs::read_dir(&dir)
                    .map_err(io_err(format!("cannot list {}", dir.display())))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "lock"))
                    .collect(),
            };
            let mut out = Vec::new();
            for p in paths {
                let Ok(meta) = std::fs::metadata(&p) else {
                    continue;
                };
                let (ma, mi) = dev_parts(meta.dev());
                let id = (ma, mi, meta.ino());
                let shared = read.contains(&id) && !ours.contains(&p) && !mine_paths.contains(&p);
                if !ours.contains(&p) && !locked.contains(&id) && !shared {
                    continue;
                }
                let Ok(text) = std::fs::read_to_string(&p) else {
                    continue;
                };
                if let Some((fence, Some((owner, k, info)))) = parse(&text)
                    && let Ok(k) = Key::new(k)
                {
                    let h = Holder::new(k, owner, Some(FenceToken::new(fence)), None);
                    let mode = if shared { crate::Mode::Shared } else { crate::Mode::Exclusive };
                    out.push(h.with_info(info).with_mode(mode));
                }
            }
            out.extend(mine);
            out.sort_by(|a, b| a.key.cmp(&b.key));
            Ok(out)
        })
        .await
        .map_err(|e| Error::backend("file", "worker thread failed", e))?
    }
}

/// `file://DIR[?horizon=DUR]`.
pub(crate) const STORE: super::Descriptor = super::Descriptor {
    form: "file://DIR[?horizon=DUR]",
    usage: "file://DIR[?horizon=DUR]",
    summary: "flock(2) session locks (Linux)",
    parse: |url| super::parsed(FileUrl::parse(url)),
};

impl super::StoreConfig for FileUrl {
    fn open(&self, _: super::Limits) -> super::Boxed<'_, Result<Arc<dyn Store>>> {
        let store = FileStore::open(&self.dir).and_then(|s| s.with_horizon(self.horizon));
        super::opened(std::future::ready(store))
    }

    fn probe<'a>(
        &'a self,
        p: &'a mut crate::probe::findings::Probe,
    ) -> super::Boxed<'a, std::result::Result<(), String>> {
        self.describe(p);
        Box::pin(std::future::ready(Ok(())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_safe_and_bounded() {
        let k = |s: &str| file_name(&Key::new(s).unwrap());
        assert_eq!(k("order:42"), "order%3A42.lock");
        assert_eq!(k("../etc/passwd"), "%2E.%2Fetc%2Fpasswd.lock");
        let long_a = k(&"a/".repeat(256));
        let long_b = k(&format!("{}b", "a/".repeat(255)));
        assert!(long_a.len() <= MAX_STEM + 5);
        assert_ne!(long_a, long_b);
    }

    #[test]
    fn parse_content() {
        assert_eq!(parse(""), Some((0, None)));
        let o = OwnerToken::generate().unwrap();
        let (f, rest) = parse(&format!("7\n{o}\na\nb")).unwrap();
        assert_eq!(f, 7);
        assert_eq!(rest, Some((o, "a\nb".to_string(), None)));
        let info = HolderInfo::this_process().with_command("job.sh --x");
        let (f, rest) = parse(&format!("8\n{o}\na\nb\0{}", info.encode())).unwrap();
        assert_eq!((f, rest), (8, Some((o, "a\nb".to_string(), Some(info)))));
        assert_eq!(parse("garbage"), None);
    }
}
