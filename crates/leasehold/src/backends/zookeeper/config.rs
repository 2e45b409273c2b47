//! `zk://H1:P1[,H2:P2…][/CHROOT][?session=DUR&curator=mutex|rwlock]`: the URL's hosts,
//! chroot, session timeout, and which Curator recipe shares the lock paths.

use std::time::Duration;

use crate::{Error, Result};

crate::url::option_keys! {
    /// The options a `zk://` URL takes.
    enum OptionKey {
        Session = "session",
        Curator = "curator",
    }
}

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
    let rest = rest.split_once('?').map_or(rest, |(r, _)| r);
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
    for crate::url::Opt { key, value: v, .. } in crate::url::options::<OptionKey>(url)?.1 {
        match key {
            OptionKey::Session => {
                cfg.session = crate::url::duration_option(
                    "session",
                    v,
                    Duration::from_millis(100),
                    Duration::from_secs(3600),
                )?
            }
            OptionKey::Curator => {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_and_options() {
        let c = parse_url("zk://h1:1,h2:2/app/locks?session=2s").unwrap();
        assert_eq!((c.hosts.as_str(), c.chroot.as_str()), ("h1:1,h2:2", "/app/locks"));
        assert_eq!(c.session, Duration::from_secs(2));
        let c = parse_url("zk://h:1/").unwrap();
        assert_eq!((c.chroot.as_str(), c.session), ("", Duration::from_secs(10)));
        assert_eq!(c.curator, Curator::Mutex);
        assert_eq!(parse_url("zk://h:1?curator=rwlock").unwrap().curator, Curator::RwLock);
        assert_eq!(parse_url("zk://h:1?curator=mutex").unwrap().curator, Curator::Mutex);
        let cases = [
            ("zk://h:1?sesion=2s", "\"sesion\""),
            ("zk://h:1?session=2", "session=\"2\""),
            ("zk://h:1?session=50ms", "session=\"50ms\""),
            ("zk://h:1?session=2h", "session=\"2h\""),
            ("zk://h/app", "HOST:PORT"),
            ("zk://h:1/a/../b", "chroot"),
            ("zk://h:1?curator=semaphore", "curator=\"semaphore\""),
            ("zk://h:1?curator=", "curator=\"\""),
            ("zk://h:1?sesion=2s", "valid options: session, curator"),
        ];
        crate::url::assert_refused(parse_url, &cases);
    }
}
