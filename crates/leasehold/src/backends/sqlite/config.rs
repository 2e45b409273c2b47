//! A `sqlite://PATH[?horizon=DUR&sync=full]` URL parsed once into the store's configuration, and what
//! `doctor` says of such a deployment.

use std::path::PathBuf;
use std::time::Duration;

use crate::Result;
use crate::probe::findings::Probe;

/// A parsed `sqlite://PATH`.
#[derive(Debug, Clone)]
pub(crate) struct SqliteUrl {
    /// The database file.
    pub path: PathBuf,
    /// How long an idle key's fence counter is kept (`horizon=`, [`crate::horizon`]).
    pub horizon: Duration,
    /// `sync=full`: every commit fsynced (`synchronous=FULL`), for a machine whose clock may
    /// read earlier after a reboot; `sync=normal` (the default) does not (`docs/design.md`
    /// §4.2).
    pub full_sync: bool,
}

crate::url::option_keys! {
    /// The options a `sqlite://` URL takes.
    enum OptionKey {
        Horizon = "horizon",
        Sync = "sync",
    }
}

impl SqliteUrl {
    /// Parses `sqlite://PATH[?horizon=DUR&sync=normal|full]`: any other option or value is
    /// refused.
    pub(crate) fn parse(url: &str) -> Result<SqliteUrl> {
        let (base, opts) = crate::url::options::<OptionKey>(url)?;
        let mut horizon = crate::horizon::DEFAULT_HORIZON;
        let mut full_sync = false;
        for o in opts {
            match o.key {
                OptionKey::Horizon => horizon = crate::horizon::horizon_option(o.value)?,
                OptionKey::Sync => {
                    full_sync = match o.value {
                        "full" => true,
                        "normal" => false,
                        v => {
                            return Err(crate::Error::invalid(format!(
                                "sync={v:?}: expected normal or full"
                            )));
                        }
                    }
                }
            }
        }
        Ok(SqliteUrl { path: base["sqlite://".len()..].into(), horizon, full_sync })
    }

    /// What `doctor` reports of the deployment: one file on one machine.
    pub(crate) fn describe(&self, p: &mut Probe) {
        p.set("path", self.path.display().to_string());
        p.set("horizon", format!("{:?}", self.horizon));
        p.verdict(
            "one machine only: processes on other hosts do not see these leases, even on a \
             shared file system",
        );
        p.set("sync", if self.full_sync { "full" } else { "normal" });
        if self.full_sync {
            p.verdict(
                "leases survive process restarts in the file; a reboot frees them (boot id); \
                 every commit of a process that opened the file with sync=full is fsynced, so \
                 its fences survive power loss (the file records it: every process that opens it \
                 afterwards fsyncs too)",
            );
        } else {
            p.verdict(
                "leases survive process restarts in the file; a reboot frees them (boot id); a \
                 power loss can lose the last commits (synchronous=NORMAL, unless the file \
                 records that a process opened it with sync=full), and the next \
                 fences come from this machine's clock: they stay above every fence handed out \
                 while the clock after a reboot reads later than before it (not so without a \
                 battery-backed clock until NTP sets it: sync=full there; docs/design.md 4.2)",
            );
        }
        p.change(
            "for exclusion across machines, use a networked store (postgres://, etcd://, redis://)",
        );
    }
}
