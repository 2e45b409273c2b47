//! The cross-process doorbell: a directory `<database>-bells/` beside the database file
//! holding one small file per key bucket (a hash of the key, 1024 buckets). A release opens
//! its key's bucket file for writing and closes it; the `IN_CLOSE_WRITE` inotify event wakes
//! every waiter of that bucket, in any process. Only waiters create bucket files, so a
//! release of a key nobody ever waited on costs one failed `open`.
//!
//! A ring only says "look again": a waiter then reads the key's state from the database and
//! decides there. Two keys sharing a bucket cost a spurious look, never a missed release.
//! Where inotify is unavailable (not Linux, or out of inotify instances) `subscribe` answers
//! `None` and waiters poll.

use std::path::{Path, PathBuf};

use crate::Key;

const BUCKETS: u64 = 1024;

fn bucket(key: &Key) -> String {
    // FNV-1a: stable across processes and builds, which std's hasher is not.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.as_str().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:03x}.bell", h % BUCKETS)
}

/// The doorbell directory of the database at `db`.
fn dir_of(db: &Path) -> PathBuf {
    let mut name = db.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push("-bells");
    db.with_file_name(name)
}

/// Rings `key`'s bucket, if any waiter ever made it. Blocking (one `open` and `close`);
/// failures are ignored: waiters also wake at the holder's expiry and at their slow poll.
pub(super) fn ring(db: &Path, key: &Key) {
    if cfg!(target_os = "linux") {
        let _ = std::fs::OpenOptions::new().write(true).open(dir_of(db).join(bucket(key)));
    }
}

#[cfg(target_os = "linux")]
pub(super) use linux::Doorbell;

#[cfg(target_os = "linux")]
mod linux {
    use crate::backends::inotify::{self, InotifyFd};
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex, Weak};

    use nix::fcntl::{OFlag, open};
    use nix::sys::inotify::AddWatchFlags;
    use nix::sys::stat::Mode;
    use tokio::io::unix::AsyncFd;
    use tokio::sync::watch;

    use super::{bucket, dir_of};
    use crate::Key;

    /// One store's view of its database's doorbell directory: one inotify instance, started
    /// by the first waiter, ended within a second of the store being dropped.
    #[derive(Debug)]
    pub(in crate::backends::sqlite) struct Doorbell {
        dir: PathBuf,
        hub: Mutex<Option<Arc<Hub>>>,
    }

    #[derive(Debug)]
    struct Hub {
        ino: AsyncFd<InotifyFd>,
        buckets: Mutex<HashMap<String, watch::Sender<u64>>>,
    }

    impl Hub {
        fn buckets(&self) -> std::sync::MutexGuard<'_, HashMap<String, watch::Sender<u64>>> {
            self.buckets.lock().unwrap_or_else(|p| p.into_inner())
        }
    }

    impl Doorbell {
        pub fn new(db: &Path) -> Doorbell {
            Doorbell { dir: dir_of(db), hub: Mutex::new(None) }
        }

        fn hub(&self) -> Option<Arc<Hub>> {
            let mut g = self.hub.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(h) = g.as_ref() {
                return Some(h.clone());
            }
            std::fs::create_dir_all(&self.dir).ok()?;
            let ino = inotify::open().ok()?;
            ino.get_ref().inotify().add_watch(&self.dir, AddWatchFlags::IN_CLOSE_WRITE).ok()?;
            let hub = Arc::new(Hub { ino, buckets: Mutex::default() });
            tokio::spawn(dispatch(Arc::downgrade(&hub)));
            *g = Some(hub.clone());
            Some(hub)
        }

        /// A receiver that sees every later ring of `key`'s bucket; `None` when there is no
        /// doorbell here. Blocking (creates the directory and the bucket file); must run
        /// inside the tokio runtime.
        pub fn subscribe(&self, key: &Key) -> Option<watch::Receiver<u64>> {
            let hub = self.hub()?;
            let name = bucket(key);
            // Read-only with O_CREAT: making the file rings nobody (IN_CLOSE_NOWRITE).
            let flags = OFlag::O_RDONLY | OFlag::O_CREAT | OFlag::O_CLOEXEC;
            let fd = open(&self.dir.join(&name), flags, Mode::from_bits_truncate(0o666)).ok()?;
            drop(fd);
            let rx = hub.buckets().entry(name).or_insert_with(|| watch::Sender::new(0)).subscribe();
            Some(rx)
        }
    }

    /// Reads inotify events and bumps the counters of the buckets they name (all of them on
    /// an overflow). Ends within a second of the store being dropped.
    async fn dispatch(hub: Weak<Hub>) {
        loop {
            let Some(h) = hub.upgrade() else { return };
            let Some(events) = inotify::next_events(&h.ino, "the sqlite doorbell").await else {
                continue;
            };
            let mut b = h.buckets();
            b.retain(|_, tx| tx.receiver_count() > 0);
            for ev in events {
                if ev.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    b.values().for_each(|tx| tx.send_modify(|n| *n += 1));
                } else if let Some(tx) =
                    ev.name.as_ref().and_then(|n| n.to_str()).and_then(|n| b.get(n))
                {
                    tx.send_modify(|n| *n += 1);
                }
            }
        }
    }
}

/// No doorbell off Linux: waiters poll.
#[cfg(not(target_os = "linux"))]
#[derive(Debug)]
pub(super) struct Doorbell;

#[cfg(not(target_os = "linux"))]
impl Doorbell {
    pub fn new(_db: &Path) -> Doorbell {
        Doorbell
    }

    pub fn subscribe(&self, _key: &Key) -> Option<watch::Receiver<u64>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_stable_and_bounded() {
        let k = |s: &str| Key::new(s).unwrap();
        assert_eq!(bucket(&k("job")), bucket(&k("job")));
        assert_ne!(bucket(&k("job")), bucket(&k("job2")));
        assert!(bucket(&k(&"x".repeat(512))).len() <= 8);
        assert_eq!(dir_of(Path::new("/a/b/locks.db")), Path::new("/a/b/locks.db-bells"));
    }
}
