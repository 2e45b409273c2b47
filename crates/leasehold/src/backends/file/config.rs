//! A `file://DIR` URL parsed once into the store's configuration (it takes no options), and
//! what `doctor` says of such a deployment.

use std::path::PathBuf;

use crate::Result;
use crate::probe::findings::Probe;

/// A parsed `file://DIR`.
#[derive(Debug, Clone)]
pub(crate) struct FileUrl {
    /// The directory of lock files.
    pub dir: PathBuf,
}

impl FileUrl {
    /// Parses `file://DIR`: any option is refused (the store takes none).
    pub(crate) fn parse(url: &str) -> Result<FileUrl> {
        let (base, _) = crate::url::options::<crate::url::NoOption>(url)?;
        Ok(FileUrl { dir: base["file://".len()..].into() })
    }

    /// What `doctor` reports of the deployment: one directory on one host.
    pub(crate) fn describe(&self, p: &mut Probe) {
        p.set("dir", self.dir.display().to_string());
        p.verdict(
            "one host, local file system only: flock on NFS or other network file systems \
             does not exclude other hosts",
        );
        p.verdict("the holder's death releases its lock at once; fences survive in the lock files");
    }
}
