//! Waiting on `file://` (see the module docs of `backends/file`): one inotify instance per
//! store, shared by its waiters; a waiter wakes on a holder's release (`IN_CLOSE_WRITE`) or
//! the lock file's removal past the horizon, and backs off 2 ms to 1 s otherwise.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, WatchDescriptor};
use tokio::io::unix::AsyncFd;
use tokio::sync::watch;

use super::{FileStore, ensure_file};
use crate::backends::inotify::{self, InotifyFd};
use crate::store::Watch;
use crate::{Error, Key, Result};

impl FileStore {
    fn hub(&self) -> Result<Arc<Hub>> {
        let mut g = self.hub.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = g.as_ref() {
            return Ok(h.clone());
        }
        let h = Hub::start()?;
        *g = Some(h.clone());
        Ok(h)
    }

    /// Subscribes to changes of `key` (a release, an expiry), for [`crate::store::acquire_watching`].
    pub(crate) async fn watch(&self, key: &Key) -> Result<Box<dyn Watch>> {
        let hub = self.hub()?;
        let path = self.path(key);
        let w = tokio::task::spawn_blocking(move || hub.subscribe(&path))
            .await
            .map_err(|e| Error::backend("file", "worker thread failed", e))??;
        Ok(Box::new(w))
    }
}

/// One inotify instance per store, shared by its waiters.
#[derive(Debug)]
pub(super) struct Hub {
    ino: AsyncFd<InotifyFd>,
    paths: Mutex<Watched>,
}

/// Watched lock file → (inotify watch, generation counter, number of waiters).
type Watched = HashMap<PathBuf, (WatchDescriptor, watch::Sender<u64>, usize)>;

impl Hub {
    fn start() -> Result<Arc<Hub>> {
        let ino = inotify::open().map_err(|e| Error::backend("file", "inotify_init", e))?;
        let hub = Arc::new(Hub { ino, paths: Mutex::default() });
        tokio::spawn(dispatch(Arc::downgrade(&hub)));
        Ok(hub)
    }

    fn paths(&self) -> std::sync::MutexGuard<'_, Watched> {
        self.paths.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn subscribe(self: &Arc<Self>, path: &Path) -> Result<FileWatch> {
        ensure_file(path)?;
        let mut p = self.paths();
        let rx = match p.get_mut(path) {
            Some(e) => {
                e.2 += 1;
                e.1.subscribe()
            }
            None => {
                // The file may be removed past the horizon between the two: a few tries.
                let mut tries = 0;
                let wd = loop {
                    match self.ino.get_ref().inotify().add_watch(path, WATCHED) {
                        Err(Errno::ENOENT) if tries < 100 => {
                            tries += 1;
                            ensure_file(path)?;
                        }
                        r => {
                            break r.map_err(|e| {
                                let what = format!("inotify watch on {}", path.display());
                                Error::backend("file", what, e)
                            })?;
                        }
                    }
                };
                let tx = watch::Sender::new(0);
                let rx = tx.subscribe();
                p.insert(path.to_owned(), (wd, tx, 1));
                rx
            }
        };
        Ok(FileWatch { rx, hub: self.clone(), path: path.to_owned(), backoff: BACKOFF_MAX })
    }

    /// Moves the watch of `path` to the file now there, if it was replaced (removed past the
    /// horizon and made anew): events of the old file no longer matter.
    fn refresh(&self, path: &Path) {
        let mut p = self.paths();
        if let Some(e) = p.get_mut(path)
            && let Ok(wd) = self.ino.get_ref().inotify().add_watch(path, WATCHED)
            && wd != e.0
        {
            let _ = self.ino.get_ref().inotify().rm_watch(e.0);
            e.0 = wd;
        }
    }

    fn unsubscribe(&self, path: &Path) {
        let mut p = self.paths();
        if let Some(e) = p.get_mut(path) {
            e.2 -= 1;
            if e.2 == 0 {
                let _ = self.ino.get_ref().inotify().rm_watch(e.0);
                p.remove(path);
            }
        }
    }
}

/// Reads inotify events and bumps the counters of the files they name. Ends within a second
/// of the store being dropped.
async fn dispatch(hub: Weak<Hub>) {
    loop {
        let Some(h) = hub.upgrade() else { return };
        let Some(events) = inotify::next_events(&h.ino, "the file store").await else {
            continue;
        };
        let p = h.paths();
        for ev in events {
            let overflow = ev.mask.contains(AddWatchFlags::IN_Q_OVERFLOW);
            for (wd, tx, _) in p.values() {
                if overflow || *wd == ev.wd {
                    tx.send_modify(|n| *n += 1);
                }
            }
        }
    }
}

/// What wakes a waiter: a holder's writer closed (its release), or the file removed (its
/// link count changes: `IN_ATTRIB`), after which the waiter's attempt makes it anew.
const WATCHED: AddWatchFlags = AddWatchFlags::IN_CLOSE_WRITE
    .union(AddWatchFlags::IN_ATTRIB)
    .union(AddWatchFlags::IN_DELETE_SELF);

const BACKOFF_MIN: Duration = Duration::from_millis(2);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

struct FileWatch {
    rx: watch::Receiver<u64>,
    hub: Arc<Hub>,
    path: PathBuf,
    backoff: Duration,
}

impl Drop for FileWatch {
    fn drop(&mut self) {
        self.hub.unsubscribe(&self.path);
    }
}

#[async_trait]
impl Watch for FileWatch {
    async fn changed(&mut self, until: Instant) {
        self.hub.refresh(&self.path);
        let wake = until.min(Instant::now() + self.backoff);
        tokio::select! {
            r = self.rx.changed() => {
                // After an event, retry soon if the attempt still fails (the kernel sends the
                // close event before it removes a dying holder's lock).
                self.backoff = BACKOFF_MIN;
                if r.is_err() {
                    tokio::time::sleep_until(wake.into()).await;
                }
            }
            _ = tokio::time::sleep_until(wake.into()) => {
                self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}
