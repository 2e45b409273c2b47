//! Readers on `file://` (`docs/design.md` §9): `flock(LOCK_SH)` on the key's lock file, as
//! `flock -s`, so a writer (`LOCK_EX`, the mutex's grant) excludes readers and readers share.
//!
//! A reader's fence comes from the lock file's counter, the mutex's, by the same rule:
//! readers bump it holding `LOCK_SH` on the lock file and `LOCK_EX` on a companion file
//! (`NAME.lock.fence`, held only for the bump), so two readers never issue one fence and no
//! writer can hold the key meanwhile. What `flock` cannot do, this store does not either:
//! no writer preference (a stream of readers can keep a writer out, as with `flock -s`), no
//! semaphores, and `status` sees another process's readers only as the last grant recorded
//! in the lock file.

use std::fs::{File, OpenOptions};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use super::{FileStore, Held, bump_fence, ensure_file, io_err, same_file};
use crate::Holder;
use crate::Primitives;
use crate::store::{AcquireRequest, Attempt, Grant};
use crate::{Error, FenceToken, Key, OwnerToken, Result};

/// This process's readers: the lock and fence of each, by key and owner.
pub(super) type Readers = std::collections::HashMap<(Key, OwnerToken), (Held, FenceToken)>;

/// What this store holds beyond the mutex.
pub(super) const PRIMITIVES: Primitives = Primitives {
    permits: false,
    shared: true,
    writer_preference: false,
    shared_fence: true,
    note: "readers as flock -s, each with its own fence; no writer preference (readers can \
           keep a writer waiting, as with flock), no semaphores",
};

/// How long a reader waits for another reader's fence bump (a few syscalls) before giving up.
const BUMP_LIMIT: Duration = Duration::from_secs(1);

/// `flock(LOCK_SH | LOCK_NB)` on `path`, through a read-only descriptor; `None` if a writer
/// holds it. Retries if the file was replaced meanwhile.
fn lock_shared(path: &std::path::Path) -> Result<Option<Flock<File>>> {
    super::lock_as(path, FlockArg::LockSharedNonblock, "flock -s")
}

/// `LOCK_EX` on the companion file, retried for up to [`BUMP_LIMIT`].
fn lock_bump(path: &std::path::Path) -> Result<Flock<File>> {
    let started = Instant::now();
    ensure_file(path)?;
    loop {
        let f = File::open(path)
            .map_err(io_err(format!("cannot open lock file {}", path.display())))?;
        match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
            Ok(l) => return Ok(l),
            Err((_, Errno::EWOULDBLOCK | Errno::EINTR)) if started.elapsed() < BUMP_LIMIT => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err((_, e)) => {
                return Err(Error::unavailable(
                    format!("another reader held {} for over {BUMP_LIMIT:?}: {e}", path.display()),
                    None,
                ));
            }
        }
    }
}

impl FileStore {
    /// A reader's attempt: `LOCK_SH`, then the fence bumped under the companion lock.
    pub(super) async fn try_shared(
        &self,
        req: &AcquireRequest<'_>,
        sent: Instant,
    ) -> Result<Attempt> {
        let (path, key, owner) = (self.path(req.key), req.key.clone(), *req.owner);
        let info = req.info.cloned();
        let got = tokio::task::spawn_blocking(move || {
            let Some(lock) = lock_shared(&path)? else { return Ok(None) };
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
            let mut aux = path.clone().into_os_string();
            aux.push(".fence");
            let bump = lock_bump(std::path::Path::new(&aux))?;
            let fence = bump_fence(&writer, &path, &key, &owner, info.as_ref());
            drop(bump);
            Ok(Some((fence?, lock, writer)))
        })
        .await
        .map_err(|e| Error::backend("file", "worker thread failed", e))??;
        let Some((fence, lock, writer)) = got else {
            return Ok(Attempt::Busy { holder_expires_in: None });
        };
        let held = Held { owner: *req.owner, _lock: lock, _writer: writer };
        self.readers_map().insert((req.key.clone(), *req.owner), (held, fence));
        Ok(Attempt::Granted(Grant::new(fence, sent)))
    }

    fn readers_map(&self) -> std::sync::MutexGuard<'_, Readers> {
        self.readers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `owner` holds a reader's grant of `key` here.
    pub(super) fn reads(&self, key: &Key, owner: &OwnerToken) -> bool {
        self.readers_map().contains_key(&(key.clone(), *owner))
    }

    /// Drops `owner`'s reader lock of `key`; whether it held one.
    pub(super) fn release_reader(&self, key: &Key, owner: &OwnerToken) -> bool {
        self.readers_map().remove(&(key.clone(), *owner)).is_some()
    }

    /// This process's readers (of `key`, or all), for `status`; fences as the lock file says.
    pub(super) fn reader_holders(&self, key: Option<&Key>) -> Vec<Holder> {
        self.readers_map()
            .iter()
            .filter(|((k, _), _)| key.is_none_or(|want| want == k))
            .map(|((k, o), (_, f))| {
                Holder::new(k.clone(), *o, Some(*f), None).with_mode(crate::Mode::Shared)
            })
            .collect()
    }
}
