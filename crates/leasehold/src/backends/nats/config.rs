//! The `nats://` URL, parsed once into [`Config`].

use std::time::Duration;

use crate::{Error, Result};

/// The bucket the grants live in when the URL names none.
const DEFAULT_BUCKET: &str = "leasehold";

crate::url::option_keys! {
    /// The options a `nats://` URL takes.
    enum OptionKey {
        Replicas = "replicas",
        Storage = "storage",
        Horizon = "horizon",
    }
}

/// Where JetStream keeps a bucket's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Storage {
    /// On disk: survives a server restart.
    File,
    /// In memory: a restarted server has forgotten every grant (and the fence chain).
    Memory,
}

/// A parsed `nats://` URL.
#[derive(Debug, Clone)]
pub(super) struct Config {
    /// `nats://HOST:PORT` for each server (the client picks and fails over among them).
    pub(super) servers: Vec<String>,
    pub(super) user: Option<(String, String)>,
    /// The grants' bucket; the heartbeat buckets are named after it (`BUCKET-ttl-700ms`).
    pub(super) bucket: String,
    /// Replicas of the buckets leasehold creates (1 to 5); an existing bucket keeps its own.
    pub(super) replicas: usize,
    pub(super) storage: Storage,
    /// How long a key's last record (its release marker, or a dead holder's grant) is kept in
    /// the grants' bucket before the pruning task purges it (`horizon=`, [`crate::horizon`]).
    pub(super) horizon: Duration,
}

/// Parses `nats://[USER:PASS@]H:P[,H:P…][/BUCKET][?replicas=N&storage=file|memory&horizon=DUR]`.
pub(super) fn parse_url(url: &str) -> Result<Config> {
    let rest = url
        .strip_prefix("nats://")
        .ok_or_else(|| Error::invalid(format!("{url:?} is not a nats:// URL")))?;
    let rest = rest.split_once('?').map_or(rest, |(r, _)| r);
    let (auth_hosts, bucket) = match rest.split_once('/') {
        Some((h, b)) => (h, b.trim_end_matches('/').to_owned()),
        None => (rest, DEFAULT_BUCKET.to_owned()),
    };
    let bucket = if bucket.is_empty() { DEFAULT_BUCKET.to_owned() } else { bucket };
    if !bucket.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return Err(Error::invalid(format!(
            "NATS bucket {bucket:?}: a bucket name takes letters, digits, '-' and '_' only"
        )));
    }
    let (user, hosts) = match auth_hosts.rsplit_once('@') {
        Some((u, h)) => {
            let (name, pass) = u.split_once(':').unwrap_or((u, ""));
            (Some((name.to_owned(), pass.to_owned())), h)
        }
        None => (None, auth_hosts),
    };
    let servers: Vec<String> = hosts
        .split(',')
        .filter(|h| !h.is_empty())
        .map(|h| match h.rsplit_once(':') {
            Some((_, p)) if p.parse::<u16>().is_ok() => Ok(format!("nats://{h}")),
            _ => Err(Error::invalid(format!("NATS server {h:?} has no port (HOST:PORT)"))),
        })
        .collect::<Result<_>>()?;
    if servers.is_empty() {
        return Err(Error::invalid(format!(
            "{:?} names no NATS server (nats://HOST:PORT)",
            crate::url::redact(url)
        )));
    }
    let mut cfg = Config {
        servers,
        user,
        bucket,
        replicas: 1,
        storage: Storage::File,
        horizon: crate::horizon::DEFAULT_HORIZON,
    };
    for crate::url::Opt { key, value, text } in crate::url::options::<OptionKey>(url)?.1 {
        match key {
            OptionKey::Replicas => {
                cfg.replicas = match value.parse::<usize>() {
                    Ok(n @ 1..=5) => n,
                    _ => {
                        return Err(Error::invalid(format!(
                            "{text:?}: replicas is a whole number from 1 to 5 (JetStream's limit)"
                        )));
                    }
                }
            }
            OptionKey::Storage => {
                cfg.storage = match value {
                    "file" => Storage::File,
                    "memory" => Storage::Memory,
                    _ => {
                        return Err(Error::invalid(format!(
                            "{text:?}: storage is \"file\" or \"memory\""
                        )));
                    }
                }
            }
            OptionKey::Horizon => cfg.horizon = crate::horizon::horizon_option(value)?,
        }
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_and_options() {
        let c = parse_url("nats://u:pw@h1:1,h2:2/locks?replicas=3&storage=memory").unwrap();
        assert_eq!(c.servers, ["nats://h1:1", "nats://h2:2"]);
        assert_eq!(c.user, Some(("u".into(), "pw".into())));
        assert_eq!((c.bucket.as_str(), c.replicas, c.storage), ("locks", 3, Storage::Memory));
        let c = parse_url("nats://h:1").unwrap();
        assert_eq!((c.bucket.as_str(), c.replicas, c.storage), (DEFAULT_BUCKET, 1, Storage::File));
        assert_eq!(parse_url("nats://h:1/").unwrap().bucket, DEFAULT_BUCKET);
        assert_eq!(c.horizon, crate::horizon::DEFAULT_HORIZON, "a day unless given");
        let h = |u: &str| parse_url(u).unwrap().horizon;
        assert_eq!(h("nats://h:1?horizon=90s"), Duration::from_secs(90));
        assert_eq!(h("nats://h:1/b?replicas=3&horizon=1s"), crate::horizon::MIN_HORIZON);
        let cases = [
            ("nats://h:1?replica=3", "\"replica\""),
            ("nats://h:1?replica=3", "valid options: replicas, storage, horizon"),
            ("nats://h:1?replicas=0", "replicas=0"),
            ("nats://h:1?replicas=6", "replicas=6"),
            ("nats://h:1?replicas=x", "replicas=x"),
            ("nats://h:1?storage=disk", "storage=disk"),
            ("nats://h?storage=file", "no port"),
            ("nats://h:1?horizon=10ms", "horizon=\"10ms\""),
            ("nats://h:1?horizon=400d", "horizon=\"400d\""),
            ("nats://h:1?horizon=soon", "horizon=\"soon\""),
            ("nats:///b", "names no NATS server"),
            ("nats://h:1/a.b", "bucket \"a.b\""),
        ];
        crate::url::assert_refused(parse_url, &cases);
    }
}
