//! inotify registered with tokio, shared by the stores that wake waiters through files (the
//! `flock` store's lock files, the SQLite store's doorbell directory).

use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::Duration;

use nix::sys::inotify::{InitFlags, Inotify, InotifyEvent};
use tokio::io::unix::AsyncFd;

/// An inotify instance whose descriptor tokio watches for readability.
#[derive(Debug)]
pub(crate) struct InotifyFd(Inotify);

impl InotifyFd {
    /// The instance, to add and remove watches.
    pub fn inotify(&self) -> &Inotify {
        &self.0
    }
}

impl AsRawFd for InotifyFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// A non-blocking, close-on-exec inotify instance registered with the current runtime.
pub(crate) fn open() -> std::io::Result<AsyncFd<InotifyFd>> {
    let ino = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
    // SAFETY: `InotifyFd` owns the inotify descriptor for its whole life and always returns
    // that same fd.
    unsafe { AsyncFd::register(InotifyFd(ino)) }.map_err(|e| e.into_parts().1)
}

/// The next batch of events, or `None` after a second without any (so a dispatch loop can
/// notice that its store is gone) or after a read error (warned about as `what`, then a
/// 100 ms pause).
pub(crate) async fn next_events(ino: &AsyncFd<InotifyFd>, what: &str) -> Option<Vec<InotifyEvent>> {
    let Ok(Ok(mut guard)) = tokio::time::timeout(Duration::from_secs(1), ino.readable()).await
    else {
        return None;
    };
    match guard.try_io(|fd| fd.get_ref().0.read_events().map_err(std::io::Error::from)) {
        Ok(Ok(events)) => Some(events),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "reading {what}'s inotify events failed");
            tokio::time::sleep(Duration::from_millis(100)).await;
            None
        }
        Err(_would_block) => None,
    }
}
