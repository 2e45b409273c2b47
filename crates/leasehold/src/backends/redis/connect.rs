//! How a Redis store connects, and what its errors mean: one bounded first connection, where
//! a refused password, database index, ACL or certificate is told apart from an outage, and
//! a URL scheme that does not match the port (`redis://` at a TLS port, `rediss://` at a plain
//! one) is named instead of surfacing as a reset or a timeout.

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, ErrorKind, RedisError, ServerErrorKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::backends::peer::Speaks;
use crate::{Error, Result};

/// How long a `rediss://` handshake may take before leasehold asks, on a second connection,
/// whether the port speaks plain Redis: far longer than a TLS handshake takes on any LAN,
/// short enough that the mistake is named at once rather than after the connect limit.
const MISMATCH_AFTER: Duration = Duration::from_millis(300);
/// The bound on that second connection's question.
const PROBE_LIMIT: Duration = Duration::from_millis(500);

/// Maps a driver error: a refusal of this client's configuration is [`Error::Config`]; a
/// refused connection is [`Error::Unavailable`]; a connection that broke or timed out
/// mid-request leaves the outcome unknown; the server refusing service for now (loading,
/// busy script, a replica, a cluster without a primary) is [`Error::Unavailable`].
pub(crate) fn redis_err(backend: &'static str, what: &str, e: RedisError) -> Error {
    if let Some(why) = refusal(&e) {
        return Error::config(format!("{what}: {why}"), Some(e.into()));
    }
    let msg = format!("{what}: {e}");
    if e.is_connection_refusal() || refuses_service(&e) {
        Error::unavailable(msg, Some(e.into()))
    } else if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
        // The request may have been applied; we cannot tell.
        Error::UnknownOutcome(msg)
    } else {
        Error::backend(backend, msg, e)
    }
}

/// The server answered, but will not serve now: nothing was changed.
fn refuses_service(e: &RedisError) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Server(
            ServerErrorKind::BusyLoading
                | ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::MasterDown
                | ServerErrorKind::ReadOnly
        )
    ) || matches!(e.code(), Some("BUSY" | "MISCONF"))
}

/// What an ACL user needs (README.md's "Redis" section, checked by the testkit's
/// `redis_acl` test): the requests a locker sends and the commands its scripts call (on a
/// cluster `SPUBLISH`/`SSUBSCRIBE` instead of `PUBLISH`/`SUBSCRIBE`, and `CLUSTER`).
pub(crate) const ACL_COMMANDS: &str = "EVALSHA, SCRIPT|LOAD, GET, SET, DEL, INCR, PTTL, \
    PEXPIRE, TIME, HGET, HGETALL, HSET, HDEL, SCAN, PUBLISH and SUBSCRIBE";

/// Why the server refused this client's configuration, if it did: a password or user, a
/// database index, an ACL permission, or (`rediss://`) the TLS handshake.
fn refusal(e: &RedisError) -> Option<String> {
    let text = e.to_string();
    if e.kind() == ErrorKind::AuthenticationFailed || e.code() == Some("WRONGPASS") {
        return Some(format!(
            "the server refused the user or password ({text}); check the URL's \
             redis://USER:PASS@… part"
        ));
    }
    if e.code() == Some("NOAUTH") {
        return Some(
            "the server requires a password (NOAUTH); give it in the URL: \
             redis://:PASS@HOST:PORT (or USER:PASS@ with ACL users)"
                .into(),
        );
    }
    // A command a script calls is checked too, and refused as a plain error.
    let in_script = text.contains("The user executing the script can't");
    if e.kind() == ErrorKind::Server(ServerErrorKind::NoPerm)
        || e.code() == Some("NOPERM")
        || in_script
    {
        return Some(format!(
            "the server's ACL refuses this user ({text}); it needs {ACL_COMMANDS} on the \
             store's keys and channels (PREFIX*)"
        ));
    }
    if text.contains("DB index is out of range") || text.contains("refused to switch database") {
        return Some(format!(
            "the database index in the URL does not exist on the server ({text})"
        ));
    }
    tls_refusal(e)
}

/// A TLS handshake refused for a reason a retry cannot fix.
#[cfg(feature = "redis-tls")]
fn tls_refusal(e: &RedisError) -> Option<String> {
    type Shared = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(mut err) = cur {
        // redis-rs keeps its inner error in an `Arc`, which is what `source()` hands out.
        if let Some(shared) = err.downcast_ref::<Shared>() {
            err = shared.as_ref();
        }
        let tls = err.downcast_ref::<rustls::Error>().or_else(|| {
            err.downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        if let Some(tls) = tls {
            return match tls {
                rustls::Error::InvalidCertificate(why) => Some(format!(
                    "the server's TLS certificate was refused ({why:?}): give the CA that \
                     signed it with tls_ca=PATH (PEM), and a host name the certificate names"
                )),
                rustls::Error::PeerIncompatible(why) => Some(format!(
                    "no TLS version or cipher suite in common with the server ({why:?})"
                )),
                rustls::Error::NoCertificatesPresented | rustls::Error::AlertReceived(_) => {
                    Some(format!(
                        "the server refused the TLS handshake ({tls}); it may require a client \
                         certificate, which leasehold does not send"
                    ))
                }
                _ => None,
            };
        }
        cur = err.source();
    }
    None
}

#[cfg(not(feature = "redis-tls"))]
fn tls_refusal(_: &RedisError) -> Option<String> {
    None
}

/// The host and port a client connects to (`None` for a Unix socket).
fn host_port(client: &redis::Client) -> Option<(String, u16)> {
    match client.get_connection_info().addr() {
        ConnectionAddr::Tcp(h, p) | ConnectionAddr::TcpTls { host: h, port: p, .. } => {
            Some((h.clone(), *p))
        }
        _ => None,
    }
}

/// The first connection of a store: everything a connection does (TCP, TLS, AUTH, SELECT)
/// within `limit`, once, so that a refusal is reported as what it is instead of being
/// retried by the connection manager until the limit.
pub(super) async fn first_connection(
    client: &redis::Client,
    addr: &str,
    limit: Duration,
) -> Result<MultiplexedConnection> {
    let tls = matches!(client.get_connection_info().addr(), ConnectionAddr::TcpTls { .. });
    match host_port(client) {
        // Another service at a plain port (PostgreSQL, MySQL, HTTP) is named as such.
        Some((h, p)) if !tls => {
            let connect = handshake(client, addr, limit);
            crate::backends::peer::guarded("redis", Speaks::Redis, Some((&h, p)), connect).await
        }
        _ => handshake(client, addr, limit).await,
    }
}

/// [`first_connection`] but for the check of another service at the address.
async fn handshake(
    client: &redis::Client,
    addr: &str,
    limit: Duration,
) -> Result<MultiplexedConnection> {
    let start = Instant::now();
    let cfg = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(limit))
        .set_response_timeout(Some(limit));
    let tls = matches!(client.get_connection_info().addr(), ConnectionAddr::TcpTls { .. });
    let hp = host_port(client);
    let connect = client.get_multiplexed_async_connection_with_config(&cfg);
    tokio::pin!(connect);
    let answer = match (&hp, tls) {
        // A plain port never answers a TLS hello: ask it in plaintext if the handshake stalls.
        (Some((h, p)), true) => {
            tokio::select! {
                r = &mut connect => r,
                _ = tokio::time::sleep(MISMATCH_AFTER.min(limit)) => {
                    if speaks_plain_redis(h, *p).await {
                        return Err(plain_port(addr));
                    }
                    connect.await
                }
            }
        }
        _ => connect.await,
    };
    let e = match answer {
        Ok(c) => return Ok(c),
        Err(e) => e,
    };
    if let Some(why) = refusal(&e) {
        return Err(Error::config(format!("redis at {addr}: {why}"), Some(e.into())));
    }
    if let Some((h, p)) = &hp {
        let garbled = e.is_connection_dropped() || e.kind() == ErrorKind::Parse;
        if !tls && garbled && speaks_tls(h, *p).await {
            return Err(Error::config(
                format!(
                    "redis at {addr} speaks TLS (it ended the plaintext handshake: {e}); use a \
                     rediss:// URL, with tls_ca=PATH for a private CA"
                ),
                Some(e.into()),
            ));
        }
        if tls && (garbled || e.kind() == ErrorKind::Io) && speaks_plain_redis(h, *p).await {
            return Err(plain_port(addr));
        }
    }
    let msg = if e.is_timeout() || start.elapsed() >= limit {
        format!("redis at {addr} did not answer within {limit:?} ({e})")
    } else {
        format!("cannot connect to redis at {addr}: {e}")
    };
    Err(Error::unavailable(msg, Some(e.into())))
}

fn plain_port(addr: &str) -> Error {
    Error::config(
        format!(
            "redis at {addr} speaks plain Redis, not TLS (it answered a plaintext PING); use a \
             redis:// URL, or the server's TLS port"
        ),
        None,
    )
}

/// Whether `host:port` answers a plaintext `PING` as Redis does (`+PONG`, or an error such
/// as `-NOAUTH`), within a short bound.
async fn speaks_plain_redis(host: &str, port: u16) -> bool {
    first_bytes(host, port, b"PING\r\n")
        .await
        .is_some_and(|b| matches!(b.first(), Some(b'+' | b'-')))
}

/// Whether `host:port` answers a TLS ClientHello with a TLS record (a ServerHello or an
/// alert), within a short bound. A plain Redis reads the hello as an unfinished inline
/// command (it holds no line break) and stays silent.
async fn speaks_tls(host: &str, port: u16) -> bool {
    first_bytes(host, port, &CLIENT_HELLO)
        .await
        .is_some_and(|b| b.len() >= 2 && matches!(b[0], 0x15 | 0x16) && b[1] == 0x03)
}

/// The first bytes `host:port` sends back after `hello`, if any come within [`PROBE_LIMIT`].
async fn first_bytes(host: &str, port: u16, hello: &[u8]) -> Option<Vec<u8>> {
    tokio::time::timeout(PROBE_LIMIT, async {
        let mut s = tokio::net::TcpStream::connect((host, port)).await.ok()?;
        s.write_all(hello).await.ok()?;
        let mut buf = [0u8; 8];
        let n = s.read(&mut buf).await.ok()?;
        (n > 0).then(|| buf[..n].to_vec())
    })
    .await
    .ok()
    .flatten()
}

/// A minimal TLS 1.2 ClientHello: record header, handshake header, version, a zero random,
/// no session id, two ECDHE AES-GCM suites, null compression, no extensions.
const CLIENT_HELLO: [u8; 52] = [
    0x16, 0x03, 0x01, 0x00, 0x2f, // record: handshake, TLS 1.0 framing, 47 bytes
    0x01, 0x00, 0x00, 0x2b, // ClientHello, 43 bytes
    0x03, 0x03, // TLS 1.2
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // random
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,    //
    0x00, // session id
    0x00, 0x04, 0xc0, 0x2b, 0xc0, 0x2f, // cipher suites
    0x01, 0x00, // compression: null
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hello_is_well_formed_and_holds_no_line_break() {
        assert_eq!(usize::from(CLIENT_HELLO[4]), CLIENT_HELLO.len() - 5);
        assert_eq!(usize::from(CLIENT_HELLO[8]), CLIENT_HELLO.len() - 9);
        assert!(!CLIENT_HELLO.contains(&b'\n'));
    }

    #[test]
    fn refusals_are_config_and_refused_connections_are_outages() {
        let auth =
            RedisError::from((ErrorKind::AuthenticationFailed, "Password authentication failed"));
        assert!(redis_err("redis", "connect", auth).is_config());
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let refused = redis_err("redis", "connect", RedisError::from(io));
        assert!(refused.is_unavailable() && !refused.is_config(), "{refused:?}");
        let db = RedisError::from((
            ErrorKind::Server(ServerErrorKind::ResponseError),
            "Redis server refused to switch database",
            "DB index is out of range".to_owned(),
        ));
        assert!(redis_err("redis", "connect", db).is_config());
    }
}
