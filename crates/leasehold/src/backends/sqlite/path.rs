//! Checking a database path the way the OS sees it, without opening the file.

use std::path::Path;

/// Whether this process may read and write the database at `path`, or create it: the OS's
/// answer, without opening the file (see `open_blocking`).
pub(super) fn usable(path: &Path) -> std::io::Result<()> {
    use nix::unistd::{AccessFlags, access};
    let denied = |e: nix::errno::Errno| std::io::Error::from_raw_os_error(e as i32);
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(std::io::Error::from(std::io::ErrorKind::IsADirectory)),
        Ok(_) => access(path, AccessFlags::R_OK | AccessFlags::W_OK).map_err(denied),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            access(dir, AccessFlags::W_OK | AccessFlags::X_OK).map_err(denied)
        }
        Err(e) => Err(e),
    }
}
