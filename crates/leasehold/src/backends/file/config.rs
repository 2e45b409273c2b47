//! A `file://DIR[?horizon=DUR]` URL parsed once into the store's configuration, and what
//! `doctor` says of such a deployment.

use std::path::PathBuf;
use std::time::Duration;

use crate::Result;
use crate::probe::findings::Probe;

/// A parsed `file://DIR`.
#[derive(Debug, Clone)]
pub(crate) struct FileUrl {
    /// The directory of lock files.
    pub dir: PathBuf,
    /// How long an idle key's lock file is kept (`horizon=`, [`crate::horizon`]).
    pub horizon: Duration,
}

crate::url::option_keys! {
    /// The options a `file://` URL takes.
    enum OptionKey {
        Horizon = "horizon",
    }
}

impl FileUrl {
    /// Parses `file://DIR[?horizon=DUR]`: any other option is refused.
    pub(crate) fn parse(url: &str) -> Result<FileUrl> {
        let (base, opts) = crate::url::options::<OptionKey>(url)?;
        let mut horizon = crate::horizon::DEFAULT_HORIZON;
        for o in opts {
            match o.key {
                OptionKey::Horizon => horizon = crate::horizon::horizon_option(o.value)?,
            }
        }
        Ok(FileUrl { dir: base["file://".len()..].into(), horizon })
    }

    /// What `doctor` reports of the deployment: one directory on one host.
    pub(crate) fn describe(&self, p: &mut Probe) {
        p.set("dir", self.dir.display().to_string());
        p.set("horizon", format!("{:?}", self.horizon));
        p.verdict(
            "one host, local file system only: flock on NFS or other network file systems \
             does not exclude other hosts",
        );
        p.verdict("the holder's death releases its lock at once; fences survive in the lock files");
    }
}
