//! What `/proc/locks` says about the lock files: who holds a `flock` of another process.

use super::io_err;
use crate::Result;

/// `(major, minor)` of a Linux `dev_t`, as `/proc/locks` prints them.
pub(super) fn dev_parts(dev: u64) -> (u64, u64) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major, minor)
}

/// `(major, minor, inode)` of every file with an exclusive `flock` on it (`write`), or a
/// shared one (not `write`), from `/proc/locks` (read-only: probing with our own lock could
/// make a concurrent acquirer see "busy"). Best effort: the file is not a consistent
/// snapshot while locks come and go.
pub(super) fn flocked_inodes(write: bool) -> Result<Vec<(u64, u64, u64)>> {
    let text = std::fs::read_to_string("/proc/locks")
        .map_err(io_err("cannot read /proc/locks".to_string()))?;
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || f[1] != "FLOCK" || f[3] != if write { "WRITE" } else { "READ" } {
            continue; // also skips "->" lines of blocked waiters
        }
        let mut id = f[5].split(':');
        if let (Some(ma), Some(mi), Some(ino)) = (id.next(), id.next(), id.next())
            && let (Ok(ma), Ok(mi), Ok(ino)) =
                (u64::from_str_radix(ma, 16), u64::from_str_radix(mi, 16), ino.parse())
        {
            out.push((ma, mi, ino));
        }
    }
    Ok(out)
}
