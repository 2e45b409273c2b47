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
//! What each store's protocol answers (a greeting, or its answer to one of those questions)
//! and its name are on that store's line in `registry.rs`'s `stores!` (a `crate::wire::Wire`,
//! compiled into every build, so a store compiled out is still named); this file holds the
//! questions and the services that are no leasehold store (HTTP, SSH, TLS).
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

use crate::wire::Wire;
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

/// The stores' protocols (`Speaks::Redis`, …), each from its line in `registry.rs`'s list.
pub(crate) use crate::wire::Speaks;

/// HTTP/1 (a web server, a metrics endpoint; also the client port of a store that serves it
/// beside its own protocol, told by [`Wire::version_says`]): a status line, to the probe's
/// PING.
const HTTP: Wire = Wire::an("HTTP").shown_by(|b| b.starts_with(b"HTTP/"));

/// The services the probe can name that are no leasehold store, tried after the stores'
/// protocols ([`Speaks::STORES`]), in this order.
const OTHERS: [Wire; 3] = [
    HTTP,
    // The banner an SSH server sends first.
    Wire::an("SSH").shown_by(|b| b.starts_with(b"SSH-")),
    // A TLS record (an alert, to the probe's SSLRequest): type 21 or 22, version 3.x.
    Wire::a("TLS").shown_by(|b| b.len() >= 2 && matches!(b[0], 0x15 | 0x16) && b[1] == 0x03),
];

/// What the first bytes a server sent say it speaks, if they say: the stores' protocols
/// first (told apart by their first bytes, whatever their order), then the other services.
fn classify(b: &[u8]) -> Option<Wire> {
    Speaks::STORES.iter().copied().chain(OTHERS).find(|w| w.answers(b))
}

/// The host and port of an address as URLs write it (`[SCHEME://][AUTH@]HOST:PORT[/…]`,
/// IPv6 in brackets), for [`guarded`].
// Used by the stores that hand `guarded` an address as written; the SQL stores hand it
// their driver's parsed host and port, so a build of only those has no caller.
#[allow(dead_code)]
pub(crate) fn host_port(addr: &str) -> Option<(String, u16)> {
    let rest = addr.split_once("://").map_or(addr, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let rest = rest.split(['/', '?']).next()?;
    let (h, p) = rest.rsplit_once(':')?;
    Some((h.trim_start_matches('[').trim_end_matches(']').to_owned(), p.parse().ok()?))
}

/// What answers at `host:port`, if it can be told within [`PROBE_LIMIT`].
pub(crate) async fn identify(host: &str, port: u16) -> Option<Wire> {
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
async fn ask(host: &str, port: u16, hello: &[u8], wait: Duration) -> Option<Wire> {
    let mut s = TcpStream::connect((host, port)).await.ok()?;
    s.write_all(hello).await.ok()?;
    let mut buf = [0u8; 256];
    match tokio::time::timeout(wait, s.read(&mut buf)).await {
        Ok(Ok(n)) if n > 0 => classify(&buf[..n]),
        _ => None,
    }
}

/// Whether `host:port` answers `GET /version` with a body containing `says` (etcd's
/// `"etcdserver"`).
async fn version_says(host: &str, port: u16, says: &[u8]) -> bool {
    if says.is_empty() {
        return false;
    }
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
            if body.windows(says.len()).any(|w| w == says) {
                return Some(true);
            }
        }
        Some(false)
    };
    tokio::time::timeout(PROBE_LIMIT, ask).await.ok().flatten().unwrap_or(false)
}

/// The configuration error for `store` at `addr`, if what answers there is positively not
/// `expected`.
pub(crate) async fn mismatch(store: &str, expected: Wire, host: &str, port: u16) -> Option<Error> {
    let found = identify(host, port).await?;
    if found.name == expected.name {
        return None;
    }
    // A store that serves HTTP/1 on its port too (etcd) is told by its `GET /version`.
    if let Some(says) = expected.version_says
        && found.name == HTTP.name
        && version_says(host, port, says).await
    {
        return None;
    }
    let addr =
        if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    Some(Error::config(
        format!(
            "{store} URL points at {addr}, where {} server answers, not {}: check the URL's \
             host and port",
            found.a_name(),
            expected.name
        ),
        None,
    ))
}

/// `connect` (a store's handshake with `host:port`), with a wrong service at that address
/// named as [`Error::Config`]: checked beside the handshake once it has taken
/// [`MISMATCH_AFTER`], and after it when it fails (other than as a configuration error).
pub(crate) async fn guarded<T>(
    store: &str,
    expected: Wire,
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

    /// The name of what `first` shows, if anything.
    fn named(first: &[u8]) -> Option<&'static str> {
        classify(first).map(|w| w.name)
    }

    #[test]
    fn first_bytes_are_told_apart() {
        let greeting = b"\x5b\x00\x00\x00\x0a10.11.6-MariaDB";
        assert_eq!(named(greeting), Some("MySQL/MariaDB"));
        // A greeting 78 bytes long starts with `N`: still MySQL.
        assert_eq!(named(b"N\x00\x00\x00\x0a8.0.36"), Some("MySQL/MariaDB"));
        assert_eq!(named(b"N"), Some("PostgreSQL"));
        assert_eq!(named(b"-ERR unknown command '\x00'\r\n"), Some("Redis"));
        assert_eq!(named(b"+PONG\r\n"), Some("Redis"));
        assert_eq!(named(b"HTTP/1.1 400 Bad Request\r\n"), Some("HTTP"));
        assert_eq!(named(b"\x15\x03\x03\x00\x02\x02\x32"), Some("TLS"));
        assert_eq!(named(b"SSH-2.0-OpenSSH_9.6\r\n"), Some("SSH"));
        let info = b"INFO {\"server_id\":\"NABC\",\"version\":\"2.9.20\"} \r\n";
        assert_eq!(named(info), Some("NATS"));
        assert_eq!(named(b"\x00\x00\x00\x00"), None);
        assert_eq!(named(b"-"), None);
        assert_eq!(named(b"-1\r\n"), None);
        let a = |w: Option<Wire>| w.map(|w| w.a_name());
        assert_eq!(a(classify(b"HTTP/1.1 200 OK")), Some("an HTTP".into()));
        assert_eq!(a(classify(b"+PONG\r\n")), Some("a Redis".into()));
        assert_eq!(Speaks::Etcd.a_name(), "an etcd");
    }

    /// Every store protocol the probe can tell comes from the list of stores, in every build:
    /// the names a wrong port can be given, whichever stores are compiled in.
    #[test]
    fn the_stores_protocols_come_from_the_list_of_stores() {
        let told = Speaks::STORES.iter().filter(|w| w.shows.is_some());
        let names: Vec<_> = told.map(|w| w.name).collect();
        assert_eq!(names, ["Redis", "PostgreSQL", "MySQL/MariaDB", "NATS"]);
        let all: Vec<_> = Speaks::STORES.iter().map(|w| w.name).collect();
        assert!(all.contains(&"ZooKeeper") && all.contains(&"etcd"), "{all:?}");
        assert_eq!(Speaks::Etcd.version_says, Some(&b"etcdserver\""[..]));
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
