//! A `sqlite://PATH` URL parsed once into the store's configuration (it takes no options),
//! and what `doctor` says of such a deployment.

use std::path::PathBuf;

use crate::Result;
use crate::probe::findings::Probe;

/// A parsed `sqlite://PATH`.
#[derive(Debug, Clone)]
pub(crate) struct SqliteUrl {
    /// The database file.
    pub path: PathBuf,
}

impl SqliteUrl {
    /// Parses `sqlite://PATH`: any option is refused (the store takes none).
    pub(crate) fn parse(url: &str) -> Result<SqliteUrl> {
        let (base, _) = crate::url::options::<crate::url::NoOption>(url)?;
        Ok(SqliteUrl { path: base["sqlite://".len()..].into() })
    }

    /// What `doctor` reports of the deployment: one file on one machine.
    pub(crate) fn describe(&self, p: &mut Probe) {
        p.set("path", self.path.display().to_string());
        p.verdict(
            "one machine only: processes on other hosts do not see these leases, even on a \
             shared file system",
        );
        p.verdict(
            "leases survive process and machine restarts in the file; a reboot frees them \
             (boot id); fences survive power loss (synchronous=FULL)",
        );
        p.change(
            "for exclusion across machines, use a networked store (postgres://, etcd://, redis://)",
        );
    }
}
