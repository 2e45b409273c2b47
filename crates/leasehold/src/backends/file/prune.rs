//! Forgetting lock files past the horizon (`crate::horizon`, `docs/design.md` §4.6): a lock
//! file (and its readers' companion, `NAME.lock.fence`) whose key nobody locked within the
//! horizon is removed, so `DIR` holds about the keys locked within the horizon.
//!
//! Removing a lock file is the classic race: a waiter that opened the old file and blocks on
//! it would get its lock on an unlinked file while a newcomer locks a new file of the same
//! name. The protocol that makes it safe, on both sides:
//!
//! - every locker, after `flock` succeeds, compares `fstat` of its descriptor with `stat` of
//!   the path and starts over when they differ (`lock_as` in `mod.rs`; a grant also checks
//!   that its writer is the locked file);
//! - the pruner unlinks a file only while it holds the file's exclusive lock, itself checked
//!   the same way, so nobody holds it then, and whoever locks the old inode afterwards sees
//!   the path gone or replaced and retries on the new file.
//!
//! The fence is clock-backed (`max(counter + 1, the wall clock in µs)`, written in the file
//! under the lock), so a removed file's counter cannot make a fence go back: the file goes
//! only once its fence (the last grant's clock, or above) and its last write are older than
//! the horizon, and the next grant's fence, from the clock, is larger while
//! [`crate::horizon::HORIZON_ASSUMPTION`] holds.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use super::{parse, same_file};
use crate::{Error, Result};

/// When a store prunes next: after an acquire, once the period has passed since the last.
#[derive(Debug)]
pub(super) struct Schedule {
    next: Mutex<Instant>,
    pub horizon: Duration,
}

impl Schedule {
    pub(super) fn new(horizon: Duration) -> Schedule {
        Schedule {
            next: Mutex::new(Instant::now() + crate::horizon::prune_period(horizon)),
            horizon,
        }
    }

    /// Whether a round is due now (and, if so, the next one is a period away).
    pub(super) fn due(&self) -> bool {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if now < *next {
            return false;
        }
        *next = now + crate::horizon::prune_period(self.horizon);
        true
    }
}

/// Removes `path` if its key is idle past `horizon`: locked here exclusively without waiting
/// (a held key is skipped), still the file at `path` (else skipped), and both its fence and
/// its last write older than the horizon. Returns whether it was removed.
pub(super) fn prune_file(path: &Path, horizon: Duration) -> Result<bool> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::local_io(format!("cannot open {}", path.display()), e)),
    };
    let lock = match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
        Ok(l) => l,
        Err((_, Errno::EWOULDBLOCK | Errno::EINTR)) => return Ok(false),
        Err((_, e)) => return Err(Error::backend("file", format!("flock {}", path.display()), e)),
    };
    // Still the file at `path`? (Another pruner may have removed it, and a locker made anew.)
    let meta =
        lock.metadata().map_err(|e| Error::local_io(format!("stat {}", path.display()), e))?;
    if !std::fs::metadata(path).is_ok_and(|now| same_file(&now, &meta)) {
        return Ok(false);
    }
    let mut text = String::new();
    let mut f: &File = &lock;
    if f.read_to_string(&mut text).is_err() {
        return Ok(false);
    }
    // A file we cannot read is kept: its counter is not ours to guess.
    let Some((fence, _)) = parse(&text) else { return Ok(false) };
    let written_us = u64::try_from(meta.mtime()).unwrap_or(0).saturating_mul(1_000_000)
        + u64::try_from(meta.mtime_nsec()).unwrap_or(0) / 1_000;
    let h = u64::try_from(horizon.as_micros()).unwrap_or(u64::MAX);
    let now = crate::token::wall_clock_us();
    if fence.max(written_us).saturating_add(h) >= now {
        return Ok(false);
    }
    // Holding the lock: no reader is bumping through the companion (readers hold the lock
    // file shared meanwhile), so it goes first, then the lock file, then the lock.
    let mut aux = path.as_os_str().to_owned();
    aux.push(".fence");
    let _ = std::fs::remove_file(&aux);
    std::fs::remove_file(path)
        .map_err(|e| Error::local_io(format!("cannot remove lock file {}", path.display()), e))?;
    drop(lock);
    Ok(true)
}

/// One round over `dir`: every `*.lock` file idle past `horizon` is removed. Returns how many.
pub(super) fn prune_dir(dir: &Path, horizon: Duration) -> Result<u64> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| Error::local_io(format!("cannot list {}", dir.display()), e))?;
    let mut n = 0;
    for e in entries.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "lock") && prune_file(&p, horizon)? {
            n += 1;
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use std::fs::OpenOptions;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};

    use super::super::{bump_fence, lock_file};
    use super::*;
    use crate::{Key, OwnerToken};

    /// The classic race, with real threads on one file: lockers (each its own open file
    /// description, as separate processes have) take the lock, bump the fence and let go,
    /// while a pruner removes the file whenever it can lock it (horizon 0). Never two
    /// holders at once, the file really goes and comes back, and every fence is larger than
    /// the one before it.
    #[test]
    fn removing_lock_files_under_contention_keeps_exclusion_and_fences() {
        let dir = tempfile::tempdir().unwrap();
        let path = Arc::new(dir.path().join("k.lock"));
        let key = Key::new("k").unwrap();
        let (inside, grants, removed) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
        );
        let (last, stop) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
        let mut threads = Vec::new();
        for _ in 0..3 {
            let (path, key, inside, grants, last, stop) = (
                path.clone(),
                key.clone(),
                inside.clone(),
                grants.clone(),
                last.clone(),
                stop.clone(),
            );
            threads.push(std::thread::spawn(move || {
                let owner = OwnerToken::generate().unwrap();
                while !stop.load(SeqCst) {
                    let Some(lock) = lock_file(&path).unwrap() else { continue };
                    // As a grant does: its writer must be the locked file.
                    let writer = OpenOptions::new().read(true).write(true).open(&*path).unwrap();
                    assert!(same_file(&writer.metadata().unwrap(), &lock.metadata().unwrap()));
                    assert_eq!(inside.fetch_add(1, SeqCst), 0, "two holders at once");
                    let f = bump_fence(&writer, &path, &key, &owner, None).unwrap().get();
                    let before = last.fetch_max(f, SeqCst);
                    assert!(f > before, "fence {f} after {before}");
                    grants.fetch_add(1, SeqCst);
                    inside.fetch_sub(1, SeqCst);
                    drop(writer);
                    drop(lock);
                }
            }));
        }
        let pruner = {
            let (path, removed, stop) = (path.clone(), removed.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(SeqCst) {
                    if prune_file(&path, Duration::ZERO).unwrap() {
                        removed.fetch_add(1, SeqCst);
                    }
                }
            })
        };
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until && (removed.load(SeqCst) < 200 || grants.load(SeqCst) < 200) {
            std::thread::sleep(Duration::from_millis(10));
        }
        stop.store(true, SeqCst);
        for t in threads {
            t.join().unwrap();
        }
        pruner.join().unwrap();
        let (g, r) = (grants.load(SeqCst), removed.load(SeqCst));
        assert!(g >= 50 && r >= 50, "{g} grants, {r} removals: the race was exercised");
    }

    /// A file locked by anyone, or written within the horizon, stays.
    #[test]
    fn held_or_recent_files_stay() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.lock");
        let lock = lock_file(&path).unwrap().unwrap();
        assert!(!prune_file(&path, Duration::ZERO).unwrap(), "held");
        drop(lock);
        assert!(!prune_file(&path, Duration::from_secs(60)).unwrap(), "written just now");
        assert!(path.exists());
        assert!(prune_file(&path, Duration::ZERO).unwrap());
        assert!(!path.exists());
        assert!(!prune_file(&path, Duration::ZERO).unwrap(), "gone already");
    }
}
