//! `zk://H1:P1[,H2:P2…][/CHROOT][?session=DUR&curator=mutex|rwlock]`: the URL's hosts,
//! chroot, session timeout, and which Curator recipe shares the lock paths.

use super::*;

#[derive(Debug, Clone)]
pub(super) struct Config {
    pub(super) hosts: String,
    pub(super) chroot: String,
    pub(super) session: Duration,
    pub(super) curator: Curator,
}

/// The Curator recipe whose exclusive node name leasehold's exclusive grants (mutexes,
/// writers) take: `InterProcessMutex`'s `lock-` (default) or `InterProcessReadWriteLock`'s
/// `__WRIT__`. leasehold itself treats both as exclusive, so the choice only decides which
/// Java services see leasehold's exclusive grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Curator {
    /// `curator=mutex`: exclusive children are `…-lock-SEQ`.
    Mutex,
    /// `curator=rwlock`: exclusive children are `…-__WRIT__SEQ`.
    RwLock,
}

pub(super) fn parse_url(url: &str) -> Result<Config> {
    let rest = url
        .strip_prefix("zk://")
        .ok_or_else(|| Error::invalid(format!("{url:?} is not a zk:// URL")))?;
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (hosts, chroot) = match rest.split_once('/') {
        Some((h, c)) => (h, format!("/{}", c.trim_matches('/'))),
        None => (rest, String::new()),
    };
    let chroot = if chroot == "/" { String::new() } else { chroot };
    if hosts.is_empty() || hosts.split(',').any(|h| !h.contains(':')) {
        return Err(Error::invalid(format!(
            "{url:?}: give every ZooKeeper server as HOST:PORT (zk://H1:P1,H2:P2/CHROOT)"
        )));
    }
    if !chroot.is_empty() {
        valid_path(&chroot).map_err(|e| Error::invalid(format!("chroot {chroot:?}: {e}")))?;
    }
    let mut cfg = Config {
        hosts: hosts.to_owned(),
        chroot,
        session: Duration::from_secs(10),
        curator: Curator::Mutex,
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "session" => {
                cfg.session = crate::url::duration_option(
                    "session",
                    v,
                    Duration::from_millis(100),
                    Duration::from_secs(3600),
                )?
            }
            "curator" => {
                cfg.curator = match v {
                    "mutex" => Curator::Mutex,
                    "rwlock" => Curator::RwLock,
                    _ => {
                        return Err(Error::invalid(format!(
                            "curator={v:?}: give mutex (InterProcessMutex's lock- nodes, the \
                             default) or rwlock (InterProcessReadWriteLock's __WRIT__ nodes)"
                        )));
                    }
                }
            }
            _ => {
                return Err(Error::invalid(format!(
                    "unknown zk URL option {k:?} (known: session, curator)"
                )));
            }
        }
    }
    Ok(cfg)
}

/// ZooKeeper's path rules: no empty, `.` or `..` segment, no control or reserved characters.
pub(super) fn valid_path(path: &str) -> std::result::Result<(), String> {
    if !path.starts_with('/') || (path.len() > 1 && path.ends_with('/')) {
        return Err("must start with / and not end with /".into());
    }
    for seg in path[1..].split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return Err(format!("has an empty, \".\" or \"..\" segment ({seg:?})"));
        }
    }
    if let Some(c) = path.chars().find(|c| {
        matches!(*c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{e000}'..='\u{f8ff}' | '\u{fff0}'..='\u{ffff}')
    }) {
        return Err(format!("contains the character {c:?}, which ZooKeeper paths cannot hold"));
    }
    Ok(())
}
