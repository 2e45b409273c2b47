//! What answers at a store's address when the store's own handshake fails or stalls
//! (`docs/design.md` §3, "Fail open only on an outage").
//!
//! A URL aimed at the wrong service (`redis://` at PostgreSQL's port, `postgres://` at
//! Redis's, anything at an HTTP port) surfaces in the driver as a broken pipe, a parse error
//! or a handshake that never finishes: an outage, to anyone reading only the error. It is
//! not one: the server is up and answering, in another protocol, and no retry will change
//! that. So when a store's first handshake with a server fails other than by a refused
//! connection, or has not finished after [`MISMATCH_AFTER`], a second connection asks what
//! answers there, within [`PROBE_LIMIT`]:
//!
//! 1. it sends PostgreSQL's 8-byte `SSLRequest`, which a PostgreSQL server (or PgBouncer)
//!    answers with one byte, `N` or `S`, and a TLS server with an alert; a MySQL server's
//!    greeting comes first anyway (it speaks first);
//! 2. if nothing came, it sends `PING` and an empty line on a second connection, which Redis
//!    answers with `+PONG` (or an error such as `-NOAUTH`) and an HTTP server with a status
//!    line (`HTTP/1.1 400`).
//!
//! A server positively recognized as speaking another protocol than the store's is
//! [`Error::Config`], naming both. Anything else (no answer, an unknown answer, a refused
//! connection) leaves the store's own error as it was, so an outage stays an outage.
//!
//! The probe's connections are closed as soon as it has its answer. A real server of the
//! expected kind that is merely slow sees an aborted handshake per slow or failed connect:
//! PostgreSQL logs nothing for it without TLS (it answers the `SSLRequest` with `N` and
//! sees the connection close) and, with TLS on, one "could not accept SSL connection" line;
//! MySQL counts it in `Aborted_connects` and, for a host that is not loopback, toward
//! `max_connect_errors` until the next successful connection.

use std::future::Future;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::{Error, Result};

/// How long a store's handshake may take before the probe runs beside it: far longer than a
/// handshake takes on any LAN, short enough that a wrong port is named at once instead of
/// after the connect limit (a MySQL client waits for a greeting that Redis, PostgreSQL and
/// HTTP servers never send).
pub(crate) const MISMATCH_AFTER: Duration = Duration::from_millis(300);
/// The bound on the probe, its connection included.
pub(crate) const PROBE_LIMIT: Duration = Duration::from_millis(600);
/// How long each step of the probe waits for an answer before the next step.
const STEP: Duration = Duration::from_millis(150);

/// PostgreSQL's `SSLRequest`: length 8, code 80877103.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

/// A protocol recognized at an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Speaks {
    /// RESP (Redis, Valkey, KeyDB, a Redis proxy).
    Redis,
    /// PostgreSQL's wire protocol (PostgreSQL, PgBouncer).
    Postgres,
    /// MySQL's (MySQL, MariaDB, a MySQL proxy): the server's greeting.
    Mysql,
    /// HTTP/1 (a web server, a metrics endpoint; also etcd's own client port).
    Http,
    /// etcd (gRPC over HTTP/2, and `GET /version` answering `etcdserver`).
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    Etcd,
    /// ZooKeeper's binary protocol (never recognized by the probe, which only tells the
    /// others apart: a ZooKeeper answers none of its questions).
    #[cfg_attr(not(feature = "zookeeper"), allow(dead_code))]
    Zookeeper,
    /// NATS's client protocol: the server's `INFO {…}` greeting.
    #[cfg_attr(not(feature = "nats"), allow(dead_code))]
    Nats,
    /// TLS records (a TLS port).
    Tls,
    /// SSH's banner.
    Ssh,
}

impl Speaks {
    /// The name with its article, for a message.
    fn a(self) -> String {
        let an = matches!(self, Speaks::Http | Speaks::Etcd | Speaks::Ssh);
        format!("{} {}", if an { "an" } else { "a" }, self.name())
    }

    fn name(self) -> &'static str {
        match self {
            Speaks::Redis => "Redis",
            Speaks::Postgres => "PostgreSQL",
            Speaks::Mysql => "MySQL/MariaDB",
            Speaks::Http => "HTTP",
            Speaks::Etcd => "etcd",
            Speaks::Zookeeper => "ZooKeeper",
            Speaks::Nats => "NATS",
            Speaks::Tls => "TLS",
            Speaks::Ssh => "SSH",
        }
    }
}

/// What the first bytes a server sent say it speaks, if they say.
fn classify(b: &[u8]) -> Option<Speaks> {
    // A MySQL packet: 3-byte length, sequence 0, protocol version 10 (or an error packet).
    if b.len() >= 5 && b[3] == 0 && matches!(b[4], 0x0a | 0xff) {
        return Some(Speaks::Mysql);
    }
    // A NATS server greets every client with `INFO {json}` before it reads a byte.
    if b.starts_with(b"INFO {") {
        return Some(Speaks::Nats);
    }
    if b == b"N" || b == b"S" {
        return Some(Speaks::Postgres);
    }
    if b.starts_with(b"HTTP/") {
        return Some(Speaks::Http);
    }
    if b.starts_with(b"SSH-") {
        return Some(Speaks::Ssh);
    }
    if b.len() >= 2 && matches!(b[0], 0x15 | 0x16) && b[1] == 0x03 {
        return Some(Speaks::Tls);
    }
    if b.len() >= 4 && matches!(b[0], b'+' | b'-') && b[1..4].iter().all(u8::is_ascii_uppercase) {
        return Some(Speaks::Redis);
    }
    None
}

/// The host and port of an address as URLs write it (`[SCHEME://][AUTH@]HOST:PORT[/…]`,
/// IPv6 in brackets), for [`guarded`].
#[cfg_attr(
    not(any(feature = "redis", feature = "etcd", feature = "zookeeper", feature = "nats")),
    allow(dead_code)
)]
pub(crate) fn host_port(addr: &str) -> Option<(String, u16)> {
    let rest = addr.split_once("://").map_or(addr, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let rest = rest.split(['/', '?']).next()?;
    let (h, p) = rest.rsplit_once(':')?;
    Some((h.trim_start_matches('[').trim_end_matches(']').to_owned(), p.parse().ok()?))
}

/// What answers at `host:port`, if it can be told within [`PROBE_LIMIT`].
pub(crate) async fn identify(host: &str, port: u16) -> Option<Speaks> {
    tokio::time::timeout(PROBE_LIMIT, async {
        // PostgreSQL's question first, on a connection of its own: a Redis server that
        // has read its NUL bytes never finds the end of that line, and answers nothing more.
        if let Some(found) = ask(host, port, &SSL_REQUEST, STEP).await {
            return Some(found);
        }
        ask(host, port, b"PING\r\n\r\n", PROBE_LIMIT).await
    })
    .await
    .ok()
    .flatten()
}

/// What the first bytes `host:port` sends after `hello` (or before it: a greeting) say it
/// speaks, waiting at most `wait` for them.
async fn ask(host: &str, port: u16, hello: &[u8], wait: Duration) -> Option<Speaks> {
    let mut s = TcpStream::connect((host, port)).await.ok()?;
    s.write_all(hello).await.ok()?;
    let mut buf = [0u8; 256];
    match tokio::time::timeout(wait, s.read(&mut buf)).await {
        Ok(Ok(n)) if n > 0 => classify(&buf[..n]),
        _ => None,
    }
}

/// Whether `host:port` answers `GET /version` as etcd does (`{"etcdserver":…}`).
async fn answers_as_etcd(host: &str, port: u16) -> bool {
    let ask = async {
        let mut s = TcpStream::connect((host, port)).await.ok()?;
        let req = format!("GET /version HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.ok()?;
        let mut body = Vec::new();
        let mut buf = [0u8; 512];
        while body.len() < 4096 {
            let n = s.read(&mut buf).await.ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&buf[..n]);
            if body.windows(11).any(|w| w == b"etcdserver\"") {
                return Some(true);
            }
        }
        Some(false)
    };
    tokio::time::timeout(PROBE_LIMIT, ask).await.ok().flatten().unwrap_or(false)
}

/// The configuration error for `store` at `addr`, if what answers there is positively not
/// `expected`.
pub(crate) async fn mismatch(
    store: &str,
    expected: Speaks,
    host: &str,
    port: u16,
) -> Option<Error> {
    let found = identify(host, port).await?;
    if found == expected {
        return None;
    }
    if expected == Speaks::Etcd {
        // etcd serves HTTP/1 on its client port too.
        if found == Speaks::Http && answers_as_etcd(host, port).await {
            return None;
        }
    }
    let addr =
        if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    Some(Error::config(
        format!(
            "{store} URL points at {addr}, where {} server answers, not {}: check the URL's \
             host and port",
            found.a(),
            expected.name()
        ),
        None,
    ))
}

/// `connect` (a store's handshake with `host:port`), with a wrong service at that address
/// named as [`Error::Config`]: checked beside the handshake once it has taken
/// [`MISMATCH_AFTER`], and after it when it fails (other than as a configuration error).
pub(crate) async fn guarded<T>(
    store: &str,
    expected: Speaks,
    addr: Option<(&str, u16)>,
    connect: impl Future<Output = Result<T>>,
) -> Result<T> {
    let Some((host, port)) = addr else { return connect.await };
    tokio::pin!(connect);
    let probed = tokio::select! {
        r = &mut connect => match r {
            Ok(v) => return Ok(v),
            Err(e) if e.is_config() => return Err(e),
            Err(e) => return Err(mismatch(store, expected, host, port).await.unwrap_or(e)),
        },
        wrong = async {
            tokio::time::sleep(MISMATCH_AFTER).await;
            mismatch(store, expected, host, port).await
        } => wrong,
    };
    if let Some(wrong) = probed {
        return Err(wrong);
    }
    connect.await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_bytes_are_told_apart() {
        let greeting = b"\x5b\x00\x00\x00\x0a10.11.6-MariaDB";
        assert_eq!(classify(greeting), Some(Speaks::Mysql));
        // A greeting 78 bytes long starts with `N`: still MySQL.
        assert_eq!(classify(b"N\x00\x00\x00\x0a8.0.36"), Some(Speaks::Mysql));
        assert_eq!(classify(b"N"), Some(Speaks::Postgres));
        assert_eq!(classify(b"-ERR unknown command '\x00'\r\n"), Some(Speaks::Redis));
        assert_eq!(classify(b"+PONG\r\n"), Some(Speaks::Redis));
        assert_eq!(classify(b"HTTP/1.1 400 Bad Request\r\n"), Some(Speaks::Http));
        assert_eq!(classify(b"\x15\x03\x03\x00\x02\x02\x32"), Some(Speaks::Tls));
        assert_eq!(classify(b"SSH-2.0-OpenSSH_9.6\r\n"), Some(Speaks::Ssh));
        let info = b"INFO {\"server_id\":\"NABC\",\"version\":\"2.9.20\"} \r\n";
        assert_eq!(classify(info), Some(Speaks::Nats));
        assert_eq!(classify(b"\x00\x00\x00\x00"), None);
        assert_eq!(classify(b"-"), None);
        assert_eq!(classify(b"-1\r\n"), None);
        assert_eq!((Speaks::Http.a(), Speaks::Redis.a()), ("an HTTP".into(), "a Redis".into()));
    }

    #[test]
    fn addresses_as_urls_write_them() {
        let hp = |h: &str, p: u16| Some((h.to_owned(), p));
        assert_eq!(host_port("redis://u:p@db.example:6380"), hp("db.example", 6380));
        assert_eq!(host_port("http://[::1]:2379/"), hp("::1", 2379));
        assert_eq!(host_port("10.0.0.1:26379"), hp("10.0.0.1", 26379));
        assert_eq!(host_port("redis://h"), None);
    }
}
