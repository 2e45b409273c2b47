//! MySQL and MariaDB, two lock forms:
//!
//! - `mysql://USER[:PASS]@HOST:PORT/DB[?mode=lease&table=T]` (the default): a **lease
//!   table** `(lock_key, owner, fence, expires_at)`. Grant is one `INSERT … ON DUPLICATE KEY
//!   UPDATE` whose fence comes back as `LAST_INSERT_ID`; renew and release are one owner-checked
//!   `UPDATE` each; expiry is decided by the server's `UTC_TIMESTAMP(6)` (no client clock, no
//!   session time zone); the fence is set by grants only, to `max(fence + 1, the server's
//!   clock in µs)`, and rows are never deleted, so a replica promoted after missing grants
//!   still issues larger fences ([`crate::FenceRepeat::ClockBacked`]). Waiters queue on a per-key `GET_LOCK`
//!   doorbell that each release passes to the next (`doorbell.rs`), in any process.
//! - `mysql://…?mode=session[&prefix=P&fence=table|none&heartbeat=5000ms]`: **`GET_LOCK`**
//!   on the name `P || KEY`, or `leasehold:` + `SHA1(P || KEY)` when that is longer than the
//!   server's 64 characters (computed by the server, so any client can take the same lock).
//!   Locks ride on connections owned by this store, never on a pooled one (a pool's
//!   `reset_connection` silently drops `GET_LOCK`s, or keeps them for the next borrower).
//!   Waiting is the server's blocking `GET_LOCK(name, timeout)`. The fence, unless
//!   `fence=none`, is a per-key counter row in `TABLE_fences`, set to `max(fence + 1,
//!   clock µs)` right after the grant while the lock is held. A failed unlock, heartbeat or request closes the
//!   connection: the server drops its locks and every lease on it fires `lost()`.
//!
//! Errors: access denied (1044, 1045, 1142, 1143, 1227, 1698), an unknown database (1049) or
//! an authentication plugin the client lacks is [`Error::Config`]; a server that cannot be
//! reached, has too many connections, is read-only or shutting down, or cancels a statement
//! that waited longer than the op timeout (1205, 1969, 3024) is [`Error::Unavailable`].
//!
//! Bounds: every connection this store opens answers within `connect_timeout=DUR` from the
//! URL, else the connect limit ([`crate::Locker::connect_within`], 5 s by default). Lock
//! waits in the server are bounded by the op timeout on every connection
//! (`lock_wait_timeout`, `innodb_lock_wait_timeout`: whole seconds, at least 1), and, on
//! MariaDB, the lease table's statements by `max_statement_time`, so a grant behind another
//! session's `LOCK TABLES` or row lock answers and leaves no statement waiting.

mod probe;

use std::sync::Arc;
use std::time::Duration;

use mysql_async::{Conn, Opts, OptsBuilder};

use super::Limits;
use crate::{Error, Result, Store};

const RENEW_CHUNK: usize = 1000;
const BACKOFF_MIN: Duration = Duration::from_millis(1);
const BACKOFF_MAX: Duration = Duration::from_millis(50);

/// The lock name of `?` as the server computes it (one parameter, used three times).
const LOCK_NAME: &str = "IF(CHAR_LENGTH(?) <= 64, ?, CONCAT('leasehold:', SHA1(?)))";

fn my_err(what: &str, e: mysql_async::Error) -> Error {
    let msg = format!("mysql {what}: {e}");
    match &e {
        mysql_async::Error::Server(s) if refuses_config(s.code) => {
            Error::config(msg, Some(e.into()))
        }
        mysql_async::Error::Server(s) if refuses_service(s.code) => {
            Error::unavailable(msg, Some(e.into()))
        }
        mysql_async::Error::Server(_) => Error::backend("mysql", msg, e),
        // The request may have been applied; we cannot tell.
        _ => Error::UnknownOutcome(msg),
    }
}

/// Server error codes that refuse this client's configuration: access denied (to the
/// server, a database, a table, a column, an operation), an unknown database.
fn refuses_config(code: u16) -> bool {
    matches!(code, 1044 | 1045 | 1049 | 1142 | 1143 | 1227 | 1698 | 1251 | 1275)
}

/// Server error codes after which nothing was applied and the server may serve later: a lock
/// wait or statement cancelled by its timeout, too many connections, a read-only or stopping
/// server.
fn refuses_service(code: u16) -> bool {
    matches!(code, 1205 | 1969 | 3024 | 1040 | 1203 | 1053 | 1290 | 1836)
}

/// A connection that could not be opened: [`Error::Config`] for a refusal of this client's
/// credentials, database or authentication method, else [`Error::Unavailable`].
fn connect_err(e: mysql_async::Error) -> Error {
    let msg = format!("cannot connect to mysql: {e}");
    match &e {
        mysql_async::Error::Server(s) if refuses_config(s.code) => {
            Error::config(msg, Some(e.into()))
        }
        mysql_async::Error::Driver(
            mysql_async::DriverError::UnknownAuthPlugin { .. }
            | mysql_async::DriverError::MysqlOldPasswordDisabled
            | mysql_async::DriverError::CleartextPluginDisabled
            | mysql_async::DriverError::NoClientSslFlagFromServer,
        ) => Error::config(msg, Some(e.into())),
        _ => Error::unavailable(msg, Some(e.into())),
    }
}

fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

#[derive(Debug, Clone)]
struct Options {
    session: bool,
    table: String,
    prefix: String,
    fence: bool,
    heartbeat: Duration,
    /// `connect_timeout`: the bound on opening one connection.
    connect_timeout: Option<Duration>,
    /// How long an idle key's rows are kept (`horizon=`, [`crate::horizon`]).
    horizon: Duration,
}

crate::url::option_keys! {
    /// The options a `mysql://` URL takes: leasehold's, then mysql_async's (passed on).
    enum OptionKey {
        Mode = "mode",
        Table = "table",
        Prefix = "prefix",
        Fence = "fence",
        Heartbeat = "heartbeat",
        ConnectTimeout = "connect_timeout",
        Horizon = "horizon",
        PoolMin = "pool_min",
        PoolMax = "pool_max",
        InactiveConnectionTtl = "inactive_connection_ttl",
        TtlCheckInterval = "ttl_check_interval",
        ConnTtl = "conn_ttl",
        AbsConnTtl = "abs_conn_ttl",
        AbsConnTtlJitter = "abs_conn_ttl_jitter",
        TcpKeepalive = "tcp_keepalive",
        MaxAllowedPacket = "max_allowed_packet",
        WaitTimeout = "wait_timeout",
        EnableCleartextPlugin = "enable_cleartext_plugin",
        ResetConnection = "reset_connection",
        TcpNodelay = "tcp_nodelay",
        StmtCacheSize = "stmt_cache_size",
        PreferSocket = "prefer_socket",
        SecureAuth = "secure_auth",
        ClientFoundRows = "client_found_rows",
        Socket = "socket",
        Compression = "compression",
        RequireSsl = "require_ssl",
        VerifyCa = "verify_ca",
        VerifyIdentity = "verify_identity",
        BuiltInRoots = "built_in_roots",
    }
}

/// The driver's options (leasehold's removed; TCP unless a socket is named) and leasehold's.
fn parse_url(url: &str) -> Result<(Opts, Options)> {
    use crate::url::choice;
    let (base, query) = crate::url::options::<OptionKey>(url)?;
    let mut keep = Vec::new();
    let mut o = Options {
        session: false,
        table: "leasehold_leases".into(),
        prefix: String::new(),
        fence: true,
        heartbeat: Duration::from_secs(5),
        connect_timeout: None,
        horizon: crate::horizon::DEFAULT_HORIZON,
    };
    let mut socket_given = false;
    let within = |name, v| {
        crate::url::duration_option(name, v, Duration::from_millis(1), Duration::from_secs(3600))
    };
    for opt in query {
        let crate::url::Opt { key, value: v, .. } = opt;
        match key {
            OptionKey::Mode => {
                o.session = choice("mode", v, &[("lease", false), ("session", true)])?
            }
            OptionKey::Table => o.table = crate::url::identifier("table", v, 64)?,
            OptionKey::Prefix => o.prefix = v.to_owned(),
            OptionKey::Fence => o.fence = choice("fence", v, &[("table", true), ("none", false)])?,
            OptionKey::Heartbeat => o.heartbeat = within("heartbeat", v)?,
            OptionKey::Horizon => o.horizon = crate::horizon::horizon_option(v)?,
            OptionKey::ConnectTimeout => {
                o.connect_timeout = Some(crate::url::connect_timeout_option(v)?)
            }
            _ => {
                socket_given |= key == OptionKey::PreferSocket;
                keep.push(opt)
            }
        }
    }
    let base = crate::url::with_query(base, &keep);
    let shown = crate::redact(&base);
    let opts = Opts::from_url(&base)
        .map_err(|e| Error::invalid(format!("bad mysql URL {shown:?}: {e}")))?;
    if opts.db_name().is_none() {
        return Err(Error::invalid(format!("mysql URL {shown:?} names no database (…/DB)")));
    }
    // Talk TCP to the address given (a fault proxy in front of the server must see every
    // byte), unless the URL says otherwise.
    let mut b = OptsBuilder::from_opts(opts);
    if !socket_given {
        b = b.prefer_socket(false);
    }
    Ok((b.into(), o))
}

/// A `mysql://` URL, parsed once: the driver's options (leasehold's removed; TCP unless a
/// socket is named) and leasehold's options.
#[derive(Clone)]
pub(crate) struct MysqlUrl {
    opts: Opts,
    o: Options,
}

impl MysqlUrl {
    /// Parses a `mysql://` URL (see [`parse_url`]).
    fn parse(url: &str) -> Result<MysqlUrl> {
        let (opts, o) = parse_url(url)?;
        Ok(MysqlUrl { opts, o })
    }
}

impl super::StoreConfig for MysqlUrl {
    fn open(&self, limits: Limits) -> super::Boxed<'_, Result<Arc<dyn Store>>> {
        super::opened(open(self, limits))
    }

    fn probe<'a>(
        &'a self,
        p: &'a mut crate::probe::findings::Probe,
    ) -> super::Boxed<'a, std::result::Result<(), String>> {
        Box::pin(probe::mysql(self, p))
    }
}

impl MysqlStore {
    /// Connects to the lease table of a `mysql://` URL (`mode=lease`, the default) within
    /// [`crate::DEFAULT_CONNECT_TIMEOUT`] (or the URL's `connect_timeout`). For whichever
    /// form a URL asks for, use [`crate::Locker::connect`].
    pub async fn connect(url: &str) -> Result<Self> {
        let (opts, o, limits) = parse_for(url, false)?;
        MysqlStore::open(opts, &o, limits).await
    }
}

impl MysqlSessionStore {
    /// Connects for `GET_LOCK` session locks (a `mysql://` URL with `mode=session`) within
    /// [`crate::DEFAULT_CONNECT_TIMEOUT`] (or the URL's `connect_timeout`).
    pub async fn connect(url: &str) -> Result<Self> {
        let (opts, o, limits) = parse_for(url, true)?;
        MysqlSessionStore::open(opts, &o, limits).await
    }
}

/// `url` parsed, when its mode is `session` or not, with the default limits and its
/// `connect_timeout`.
fn parse_for(url: &str, session: bool) -> Result<(Opts, Options, Limits)> {
    let (opts, o) = parse_url(url)?;
    if o.session != session {
        return Err(Error::invalid(format!(
            "{} asks for mode={}, which this store type does not open (Locker::connect opens \
             either)",
            crate::redact(url),
            if o.session { "session" } else { "lease" }
        )));
    }
    let limits = limits_for(&o, Limits::default());
    Ok((opts, o, limits))
}

fn limits_for(o: &Options, limits: Limits) -> Limits {
    Limits { connect: o.connect_timeout.unwrap_or(limits.connect), ..limits }
}

async fn open(u: &MysqlUrl, limits: Limits) -> Result<Arc<dyn Store>> {
    let (opts, o) = (u.opts.clone(), &u.o);
    let limits = limits_for(o, limits);
    Ok(if o.session {
        Arc::new(MysqlSessionStore::open(opts, o, limits).await?)
    } else {
        Arc::new(MysqlStore::open(opts, o, limits).await?)
    })
}

/// A new connection, opened within `limit`.
async fn new_conn(opts: &Opts, limit: Duration) -> Result<Conn> {
    let connect = async { Conn::new(opts.clone()).await.map_err(connect_err) };
    crate::limits::within(limit, || "connecting to mysql".into(), guarded(opts, connect)).await
}

/// `connect`, with another service at the server's address (Redis, PostgreSQL, HTTP, which
/// never send the greeting the driver waits for) named as [`Error::Config`] instead of
/// timing out as an outage (`backends::peer`).
async fn guarded<T>(
    opts: &Opts,
    connect: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    let host = opts.ip_or_hostname();
    let addr = opts.socket().is_none().then_some((host, opts.tcp_port()));
    crate::backends::peer::guarded("mysql", super::peer::Speaks::Mysql, addr, connect).await
}

/// How long a statement may wait in the server, written into the statement itself (so a
/// changed op timeout costs no round trip on an open connection): lock waits at 4/5 of `op`
/// (whole seconds, at least 1), so the server's answer comes before the client gives up;
/// with `statements`, on MariaDB, the whole statement at `op` (`max_statement_time`; not
/// where a statement waits in `GET_LOCK` on purpose). `verb` is the statement's first word;
/// the answer replaces it: MariaDB's `SET STATEMENT … FOR` in an executable comment that
/// MySQL skips, and MySQL's `SET_VAR` optimizer hints, which MariaDB reads as a comment.
fn bounded_verb(verb: &str, op: Duration, statements: bool) -> String {
    let lock = op.mul_f64(0.8).as_secs_f64().ceil().max(1.0) as u64;
    let vars = format!("lock_wait_timeout = {lock}, innodb_lock_wait_timeout = {lock}");
    let maria = if statements {
        format!("{vars}, max_statement_time = {:.3}", op.as_secs_f64())
    } else {
        vars
    };
    format!(
        "/*M!100301 SET STATEMENT {maria} FOR */ {verb} /*+ SET_VAR(lock_wait_timeout = {lock}) \
         SET_VAR(innodb_lock_wait_timeout = {lock}) */"
    )
}

mod doorbell;
/// The fence resource; its public path is `leasehold::fence::mysql`.
#[doc(hidden)]
pub mod fence;
mod lease;
mod prune;
mod session;
mod session_fences;
#[cfg(feature = "tools")]
pub mod tools;

pub use lease::MysqlStore;
pub use session::MysqlSessionStore;

/// The server's clock in µs since 1970 (UTC, whatever the session time zone), the floor of
/// every fence (see [`crate::FenceRepeat::ClockBacked`]).
const CLOCK_US: &str = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";

/// `mysql://USER@HOST:PORT/DB[?mode=lease|session…]`: the driver refuses parameters it does
/// not know.
pub(crate) const STORE: super::Descriptor = super::Descriptor {
    form: "mysql://USER@HOST:PORT/DB[?mode=lease|session]",
    usage: "mysql://USER[:PASS]@HOST:PORT/DB[?mode=session]",
    summary: "MySQL/MariaDB lease table or GET_LOCK",
    parse: |url| super::parsed(MysqlUrl::parse(url)),
};

#[cfg(test)]
mod tests {
    use super::*;

    /// Each of leasehold's options, and the driver's passed on.
    #[test]
    fn options_parse_once() {
        let (opts, o) = parse_url(
            "mysql://u@h/db?mode=session&table=t1&prefix=p:&fence=none&heartbeat=2s\
             &connect_timeout=3s&stmt_cache_size=7",
        )
        .unwrap();
        assert!(o.session && !o.fence);
        assert_eq!((o.table.as_str(), o.prefix.as_str()), ("t1", "p:"));
        assert_eq!(o.heartbeat, Duration::from_secs(2));
        assert_eq!(o.connect_timeout, Some(Duration::from_secs(3)));
        assert_eq!(o.horizon, crate::horizon::DEFAULT_HORIZON, "a day unless given");
        assert_eq!(
            parse_url("mysql://u@h/db?horizon=90s").unwrap().1.horizon,
            Duration::from_secs(90)
        );
        assert_eq!(opts.stmt_cache_size(), 7, "the driver's option");
        assert!(!opts.prefer_socket(), "TCP unless the URL says otherwise");
        let (opts, o) =
            parse_url("mysql://u@h/db?mode=lease&fence=table&prefer_socket=true").unwrap();
        assert!(!o.session && o.fence && opts.prefer_socket());
    }

    /// A typo or a bad value is refused at parse time, naming the option.
    #[test]
    fn bad_options_are_named() {
        let cases = [
            ("mysql://u@h/db?tabel=x", "\"tabel\""),
            ("mysql://u@h/db?mode=xact", "mode=\"xact\""),
            ("mysql://u@h/db?table=a-b", "table=\"a-b\""),
            ("mysql://u@h/db?fence=sequence", "fence=\"sequence\""),
            ("mysql://u@h/db?heartbeat=5", "heartbeat=\"5\""),
            ("mysql://u@h/db?connect_timeout=2h", "connect_timeout=\"2h\""),
            ("mysql://u@h/db?horizon=10ms", "horizon=\"10ms\""),
            ("mysql://u@h?mode=lease", "names no database"),
            ("mysql://u@h/db?tabel=x", "valid options: mode, table, prefix,"),
        ];
        crate::url::assert_refused(parse_url, &cases);
        assert!(parse_url("mysql://u@h/db?pool_min=x").is_err(), "the driver's check");
    }
}
