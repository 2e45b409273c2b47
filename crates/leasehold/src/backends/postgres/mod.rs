//! PostgreSQL, three lock forms on one server:
//!
//! - `postgres://USER@HOST:PORT/DB[?mode=lease&schema=S&table=T&horizon=DUR]` (the default): a **lease
//!   table**. Grant, renew and release are one statement each; expiry is decided by the
//!   database's `now()` (no client clock takes part); the per-row fence counter is bumped by
//!   the granting statement only, to `max(fence + 1, clock_timestamp() in µs)`, so fences
//!   never go back, not even on a promoted standby that missed the last grants
//!   ([`crate::FenceRepeat::ClockBacked`]). A row nobody held, read or waited on within the
//!   horizon (`horizon=`, a day by default; [`crate::horizon`]) is deleted by the store's
//!   pruning task (`prune.rs`); the next grant's fence then comes from the clock, above it.
//!   Waiters `LISTEN` on one channel per table and wake no later than the holder's expiry.
//!   A refused waiter takes a ticket in the key's row (`tickets`); a release calls the next
//!   ticket (`turn`) and notifies `r TURN KEY`, so only the called waiter tries at once and a
//!   handoff costs one attempt however many processes wait (NOTIFY reaches them all). The
//!   others try when called, or 5 ms per ticket ahead of theirs after a release the called
//!   waiter did not answer (`g TURN KEY` says it did). Many leases renew in one
//!   `UPDATE … FROM unnest(…)`. Readers, writer intents and semaphore slots (`shared.rs`):
//!   the key's row carries the readers' latest expiry and a waiting writer's intent, checked
//!   under its row lock by every grant; readers' rows sit in `TABLE_readers`, each fenced
//!   from the key's counter; slot grants check the permit count in one transaction.
//! - `postgres://…?mode=session[&prefix=P&fence=sequence|none&heartbeat=5000ms]`: a
//!   **session advisory lock** on `hashtextextended(P || KEY, 0)`, so psql or any other client
//!   takes the same lock with `SELECT pg_advisory_lock(hashtextextended('KEY', 0))`. Each
//!   lock holds a **dedicated** connection, returned to this store's idle list only after
//!   `pg_advisory_unlock` answered true; a failed unlock, an error, a cancelled acquire or a
//!   failed heartbeat closes the connection instead (the server then drops the lock), and
//!   the end of that connection fires the lease's `lost()`. Readers take
//!   `pg_advisory_lock_shared`; semaphores are refused (nowhere to record the count). Waiting is the server's own
//!   blocking `pg_advisory_lock` under `lock_timeout` (FIFO in the lock manager). The fence,
//!   unless `fence=none`, comes from the sequence `S.leasehold_fence_seq`, set in the granting
//!   statement to `max(nextval, clock_timestamp() in µs)`.
//! - [`with_xact_lock`], [`xact_lock`], [`try_xact_lock`]: the **transaction** form,
//!   `pg_advisory_xact_lock` inside the caller's transaction; the lock ends with it.
//!
//! Errors: a role, password, database or privilege the server refuses (SQLSTATE class 28,
//! `3D000`, `42501`) is [`Error::Config`]; a server that cannot be reached, refuses
//! connections for now, or cancels a statement that waited longer than the op timeout
//! (`55P03`, `57014`) is [`Error::Unavailable`].
//!
//! Bounds: every connection this store opens (TCP, startup, authentication, the schema)
//! answers within the URL's `connect_timeout=` (`3s`, `500ms`, or libpq's whole seconds),
//! else the connect limit ([`crate::Locker::connect_within`], 5 s by default): the whole of
//! it, where the driver itself would bound only the TCP connect. Each request answers within the
//! op timeout, which the server enforces too (`statement_timeout` on the lease table's
//! connection, `lock_timeout` on every connection), so a grant behind another session's
//! `LOCK TABLE` or row lock answers and leaves no statement waiting; a request that got no
//! answer in time closes its connection (a frozen peer), and the next one reconnects.
//!
//! `pgbouncer=transaction` in the URL declares a PgBouncer in transaction-pooling mode:
//! session locks are then refused (they would stay with a server connection other clients
//! reuse), the lease table and the transaction form work. Connections are plain TCP
//! (`sslmode=require` is refused by the driver).

mod probe;

use std::future::poll_fn;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio_postgres::error::SqlState;
use tokio_postgres::{AsyncMessage, Client, Config, NoTls};

use super::Limits;
use super::peer::Speaks;
use crate::store::SessionEnd;
use crate::{Error, Result, Store};

const RENEW_CHUNK: usize = 5000;

/// Maps a driver error. A server error is a plain backend error; a broken connection in the
/// middle of a request leaves its outcome unknown.
/// The error with the server's own message (tokio-postgres prints only "db error").
pub(crate) fn pg_text(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut s = format!("{} ({})", db.message(), db.code().code());
            if let Some(d) = db.detail() {
                s.push_str(&format!(": {d}"));
            }
            s
        }
        None => e.to_string(),
    }
}

fn pg_err(what: &str, e: tokio_postgres::Error) -> Error {
    let msg = format!("postgres {what}: {}", pg_text(&e));
    match e.code() {
        Some(c) if refuses_config(c) => Error::config(msg, Some(e.into())),
        Some(c) if refuses_service(c) => Error::unavailable(msg, Some(e.into())),
        Some(_) => Error::backend("postgres", msg, e),
        // The connection broke mid-request: it may have been applied.
        None => Error::UnknownOutcome(msg),
    }
}

/// The server refused this client's configuration: a role, a password, a database, a
/// privilege (its SQLSTATE).
fn refuses_config(c: &SqlState) -> bool {
    let code = c.code();
    code.starts_with("28") // invalid authorization: no such role, wrong password, pg_hba
        || *c == SqlState::INVALID_CATALOG_NAME // 3D000: no such database
        || *c == SqlState::INSUFFICIENT_PRIVILEGE // 42501
        || *c == SqlState::INVALID_SCHEMA_NAME // 3F000
}

/// The server will not serve now, and nothing was applied: a lock or statement timeout
/// cancelled the statement, too many connections, a server starting or shutting down.
fn refuses_service(c: &SqlState) -> bool {
    let code = c.code();
    *c == SqlState::LOCK_NOT_AVAILABLE // 55P03: lock_timeout
        || *c == SqlState::QUERY_CANCELED // 57014: statement_timeout
        || code.starts_with("08") // connection exception
        || code.starts_with("53") // insufficient resources: too many connections
        || code == "57P01" || code == "57P02" || code == "57P03" // shutdown, starting up
        || *c == SqlState::READ_ONLY_SQL_TRANSACTION // 25006: a standby
}

/// A connection that could not be opened: a refusal of the configuration is
/// [`Error::Config`], anything else [`Error::Unavailable`] (nothing was held).
fn connect_err(e: tokio_postgres::Error) -> Error {
    let text = pg_text(&e);
    match e.code() {
        Some(c) if refuses_config(c) => {
            Error::config(format!("postgres refused the connection: {text}"), Some(e.into()))
        }
        None if text.contains("TLS") || text.contains("tls") => Error::config(
            format!(
                "cannot connect to postgres: {text} (leasehold's PostgreSQL store speaks plain \
                 TCP only: drop sslmode=require, or put a TLS tunnel in front)"
            ),
            Some(e.into()),
        ),
        _ => Error::unavailable(format!("cannot connect to postgres: {text}"), Some(e.into())),
    }
}

/// The first TCP host and port a config connects to (`None` for a Unix socket): where a
/// wrong service is looked for when the handshake fails (`backends::peer`).
fn tcp_addr(cfg: &Config) -> Option<(String, u16)> {
    match cfg.get_hosts().first()? {
        tokio_postgres::config::Host::Tcp(h) => {
            Some((h.clone(), cfg.get_ports().first().copied().unwrap_or(5432)))
        }
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX).max(1)
}

fn left(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// Which lock form a `postgres://` URL asks for (its `mode=` option). Not the crate's
/// [`crate::Mode`], which says how a grant shares its key: one public `Mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// The lease table (default).
    Lease,
    /// Session advisory locks on dedicated connections.
    Session,
}

/// Options read from the URL's query string (removed before the driver sees it).
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub mode: Form,
    pub schema: String,
    pub table: String,
    pub prefix: String,
    pub fence: bool,
    pub heartbeat: Duration,
    pub pgbouncer_transaction: bool,
    /// The URL's `connect_timeout`: the bound on opening a whole connection.
    pub connect_timeout: Option<Duration>,
    /// Whether the URL names an `application_name` (else session connections are named after
    /// their holder).
    pub application_name: bool,
    /// Whether the URL names a `schema` (else it is `public`).
    #[cfg_attr(not(feature = "tools"), allow(dead_code))]
    pub schema_given: bool,
    /// How long the lease table keeps an idle key's row (`horizon=`, [`crate::horizon`]).
    pub horizon: Duration,
}

crate::url::option_keys! {
    /// The options a `postgres://` URL takes: leasehold's, then tokio-postgres's (passed on).
    pub(crate) enum OptionKey {
        Mode = "mode",
        Schema = "schema",
        Table = "table",
        Prefix = "prefix",
        Fence = "fence",
        Heartbeat = "heartbeat",
        Horizon = "horizon",
        Pgbouncer = "pgbouncer",
        User = "user",
        Password = "password",
        Dbname = "dbname",
        Options = "options",
        ApplicationName = "application_name",
        Sslmode = "sslmode",
        Sslnegotiation = "sslnegotiation",
        Host = "host",
        Hostaddr = "hostaddr",
        Port = "port",
        ConnectTimeout = "connect_timeout",
        TcpUserTimeout = "tcp_user_timeout",
        Keepalives = "keepalives",
        KeepalivesIdle = "keepalives_idle",
        KeepalivesInterval = "keepalives_interval",
        KeepalivesRetries = "keepalives_retries",
        TargetSessionAttrs = "target_session_attrs",
        ChannelBinding = "channel_binding",
        LoadBalanceHosts = "load_balance_hosts",
    }
}

/// The driver's configuration (leasehold's options removed) and leasehold's options.
pub(crate) fn parse_url(url: &str) -> Result<(Config, Options)> {
    parse_driver_url(url).map(|(cfg, o, _)| (cfg, o))
}

/// [`parse_url`], and the URL the driver's configuration was parsed from.
fn parse_driver_url(url: &str) -> Result<(Config, Options, String)> {
    use crate::url::choice;
    let (base, query) = crate::url::options::<OptionKey>(url)?;
    let mut keep = Vec::new();
    let mut o = Options {
        mode: Form::Lease,
        schema: "public".into(),
        table: "leasehold_leases".into(),
        prefix: String::new(),
        fence: true,
        heartbeat: Duration::from_secs(5),
        pgbouncer_transaction: false,
        connect_timeout: None,
        application_name: false,
        schema_given: false,
        horizon: crate::horizon::DEFAULT_HORIZON,
    };
    for opt in query {
        let crate::url::Opt { key, value: v, .. } = opt;
        match key {
            OptionKey::Mode => {
                o.mode = choice("mode", v, &[("lease", Form::Lease), ("session", Form::Session)])
                    .map_err(|e| {
                        Error::invalid(format!(
                            "{} (the transaction form is a library API: \
                             leasehold::backends::postgres::with_xact_lock)",
                            e.detail()
                        ))
                    })?
            }
            OptionKey::Schema => {
                o.schema = crate::url::identifier("schema", v, 63)?;
                o.schema_given = true;
            }
            OptionKey::Table => o.table = crate::url::identifier("table", v, 63)?,
            OptionKey::Prefix => o.prefix = v.to_owned(),
            OptionKey::Fence => {
                o.fence = choice("fence", v, &[("sequence", true), ("none", false)])?
            }
            OptionKey::Heartbeat => {
                o.heartbeat = crate::url::duration_option(
                    "heartbeat",
                    v,
                    Duration::from_millis(1),
                    Duration::from_secs(3600),
                )?
            }
            OptionKey::Horizon => o.horizon = crate::horizon::horizon_option(v)?,
            // Set on the driver's config below: the driver takes whole seconds only, and
            // its error would not name the option.
            OptionKey::ConnectTimeout => {
                o.connect_timeout = Some(crate::url::connect_timeout_option(v)?)
            }
            OptionKey::Pgbouncer => {
                let choices = [("transaction", true), ("session", false), ("none", false)];
                o.pgbouncer_transaction = choice("pgbouncer", v, &choices)?
            }
            _ => keep.push(opt),
        }
    }
    let base = crate::url::with_query(base, &keep);
    let mut cfg: Config = base
        .parse()
        .map_err(|e| Error::invalid(format!("bad postgres URL {:?}: {e}", crate::redact(&base))))?;
    if let Some(t) = o.connect_timeout {
        cfg.connect_timeout(t);
    }
    o.application_name = cfg.get_application_name().is_some();
    if !o.application_name {
        cfg.application_name("leasehold");
    }
    Ok((cfg, o, base))
}

/// A `postgres://` URL, parsed once: the driver's configuration (leasehold's options
/// removed, its application name and `connect_timeout` applied) and leasehold's options.
#[derive(Clone)]
pub(crate) struct PostgresUrl {
    pub cfg: Config,
    pub opts: Options,
    /// The URL the driver's configuration was parsed from (leasehold's options removed),
    /// for tools that hand the server to another client (pgbench).
    #[cfg_attr(not(feature = "tools"), allow(dead_code))]
    pub driver_url: String,
}

impl PostgresUrl {
    /// Parses a `postgres://` URL (see [`parse_url`]).
    pub(crate) fn parse(url: &str) -> Result<PostgresUrl> {
        let (cfg, opts, driver_url) = parse_driver_url(url)?;
        Ok(PostgresUrl { cfg, opts, driver_url })
    }
}

impl super::StoreConfig for PostgresUrl {
    fn open(&self, limits: Limits) -> super::Boxed<'_, Result<Arc<dyn Store>>> {
        super::opened(open(self, limits))
    }

    fn probe<'a>(
        &'a self,
        p: &'a mut crate::probe::findings::Probe,
    ) -> super::Boxed<'a, std::result::Result<(), String>> {
        Box::pin(probe::postgres(self, p))
    }
}

/// One connection and the task that drives it. Dropping it closes the socket at once (the
/// driver task is aborted), so the server ends the session and drops its locks.
struct PgConn {
    client: Client,
    driver: AbortHandle,
    ended: watch::Receiver<Option<String>>,
}

impl Drop for PgConn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl PgConn {
    /// Connects within `limit` (TCP, startup, authentication: the driver bounds only the TCP
    /// connect), then sets `setup` (a batch of `SET`s), within the same limit.
    async fn open(
        cfg: &Config,
        limit: Duration,
        setup: &str,
        on_notify: Option<Arc<Queues>>,
    ) -> Result<PgConn> {
        let mut cfg = cfg.clone();
        cfg.connect_timeout(limit);
        let start = Instant::now();
        let what = || "connecting to postgres".to_owned();
        let addr = tcp_addr(&cfg);
        let peer = addr.as_ref().map(|(h, p)| (h.as_str(), *p));
        let (client, mut conn) = crate::limits::within(limit, what, async {
            let connect = async { cfg.connect(NoTls).await.map_err(connect_err) };
            crate::backends::peer::guarded("postgres", Speaks::Postgres, peer, connect).await
        })
        .await?;
        let (tx, ended) = watch::channel(None);
        let task = tokio::spawn(async move {
            let why = loop {
                match poll_fn(|cx| conn.poll_message(cx)).await {
                    Some(Ok(AsyncMessage::Notification(n))) => {
                        if let Some(queues) = &on_notify {
                            queues.notified(n.payload());
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => break format!("postgres connection failed: {e}"),
                    None => break "postgres connection closed".to_owned(),
                }
            };
            let _ = tx.send(Some(why));
        });
        let pg = PgConn { client, driver: task.abort_handle(), ended };
        if !setup.is_empty() {
            let left = limit.saturating_sub(start.elapsed());
            crate::limits::within(left, what, async {
                pg.client.batch_execute(setup).await.map_err(|e| pg_err("session settings", e))
            })
            .await?;
        }
        Ok(pg)
    }

    /// `f` on this connection within 9/10 of `op` (so that it, not the caller's own bound of
    /// `op`, fires first); no answer in time closes the connection (its peer may be frozen,
    /// and the requests queued behind would wait too), and the outcome is unknown.
    async fn bounded<T>(
        &self,
        what: &str,
        op: Duration,
        f: impl std::future::Future<Output = std::result::Result<T, tokio_postgres::Error>>,
    ) -> Result<T> {
        let limit = op.mul_f64(0.9);
        match tokio::time::timeout(limit, f).await {
            Ok(r) => r.map_err(|e| pg_err(what, e)),
            Err(_) => {
                self.kill();
                Err(Error::UnknownOutcome(format!(
                    "postgres {what} got no answer within {limit:?}; its connection is closed"
                )))
            }
        }
    }

    fn alive(&self) -> bool {
        !self.client.is_closed() && self.ended.borrow().is_none()
    }

    /// Resolves, with a reason, when the connection ends (or is dropped).
    fn end_signal(&self) -> SessionEnd {
        let mut rx = self.ended.clone();
        Box::pin(async move {
            match rx.wait_for(|r| r.is_some()).await {
                Ok(r) => r.clone().unwrap_or_default(),
                Err(_) => "postgres connection closed by leasehold".to_owned(),
            }
        })
    }

    fn kill(&self) {
        self.driver.abort();
    }
}

/// `SET`s bounding a connection's statements by `op` in the server: lock waits at 4/5 of it
/// (the server's answer then comes before the client gives up), statements at `op` when
/// `statements` (not on connections that wait for advisory locks in the server).
fn server_bounds(op: Duration, statements: bool) -> String {
    let lock = ms(op.mul_f64(0.8));
    if statements {
        format!("SET lock_timeout = {lock}; SET statement_timeout = {};", ms(op))
    } else {
        format!("SET lock_timeout = {lock};")
    }
}

async fn create_schema(client: &Client, schema: &str, ddl: &str) -> Result<()> {
    // Concurrent CREATE … IF NOT EXISTS can fail on the catalog's unique index: serialize the
    // installers with a transaction advisory lock.
    let sql = format!(
        "BEGIN; SELECT pg_advisory_xact_lock(hashtextextended('leasehold:install', 0));
         CREATE SCHEMA IF NOT EXISTS \"{schema}\"; {ddl}; COMMIT;"
    );
    client.batch_execute(&sql).await.map_err(|e| pg_err("creating the lease schema", e))
}

/// The server's clock in µs since 1970, the floor of every fence (see
/// [`crate::FenceRepeat::ClockBacked`]).
const CLOCK_US: &str = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint";

mod compact;
/// The fence resource; its public path is `leasehold::fence::postgres`.
#[doc(hidden)]
pub mod fence;
mod lease;
mod prune;
mod queue;
mod session;
mod session_sql;
#[cfg(feature = "tools")]
pub mod tools;
mod xact;

pub use lease::PostgresStore;
use queue::Queues;
pub use session::PostgresSessionStore;
pub use xact::{try_xact_lock, with_xact_lock, xact_lock};

impl PostgresStore {
    /// Connects to the lease table of a `postgres://` URL (`mode=lease`, the default) within
    /// [`crate::DEFAULT_CONNECT_TIMEOUT`] (or the URL's `connect_timeout`). For whichever
    /// form a URL asks for, use [`crate::Locker::connect`].
    pub async fn connect(url: &str) -> Result<Self> {
        let (cfg, o, limits) = parse_for(url, Form::Lease)?;
        PostgresStore::open(cfg, &o, limits).await
    }
}

impl PostgresSessionStore {
    /// Connects for advisory session locks (a `postgres://` URL with `mode=session`) within
    /// [`crate::DEFAULT_CONNECT_TIMEOUT`] (or the URL's `connect_timeout`).
    pub async fn connect(url: &str) -> Result<Self> {
        let (cfg, o, limits) = parse_for(url, Form::Session)?;
        PostgresSessionStore::open(cfg, &o, limits).await
    }
}

/// `url` parsed, when it asks for `mode`, with the default limits and its `connect_timeout`.
fn parse_for(url: &str, mode: Form) -> Result<(Config, Options, Limits)> {
    let (cfg, o) = parse_url(url)?;
    if o.mode != mode {
        return Err(Error::invalid(format!(
            "{} asks for mode {:?}, which this store type does not open (Locker::connect opens \
             either)",
            crate::redact(url),
            o.mode
        )));
    }
    let limits = limits_for(&o, Limits::default());
    Ok((cfg, o, limits))
}

fn limits_for(o: &Options, limits: Limits) -> Limits {
    Limits { connect: o.connect_timeout.unwrap_or(limits.connect), ..limits }
}

async fn open(u: &PostgresUrl, limits: Limits) -> Result<Arc<dyn Store>> {
    let (cfg, o) = (u.cfg.clone(), &u.opts);
    let limits = limits_for(o, limits);
    Ok(match o.mode {
        Form::Lease => Arc::new(PostgresStore::open(cfg, o, limits).await?),
        Form::Session => Arc::new(PostgresSessionStore::open(cfg, o, limits).await?),
    })
}

/// `postgres://USER@HOST:PORT/DB[?mode=lease|session…]`: the driver refuses parameters it does
/// not know.
pub(crate) const STORE: super::Descriptor = super::Descriptor {
    form: "postgres://USER@HOST:PORT/DB[?mode=lease|session]",
    usage: "postgres://USER[:PASS]@HOST:PORT/DB[?schema=S&mode=session]",
    summary: "lease table or advisory locks",
    parse: |url| super::parsed(PostgresUrl::parse(url)),
};

#[cfg(test)]
mod tests {
    use super::*;

    /// Each of leasehold's options, and the driver's passed on.
    #[test]
    fn options_parse_once() {
        let (cfg, o) = parse_url(
            "postgres://u@h/db?mode=session&schema=s1&table=t1&prefix=p:&fence=none\
             &heartbeat=2s&pgbouncer=transaction&sslmode=disable&connect_timeout=3",
        )
        .unwrap();
        assert_eq!(o.mode, Form::Session);
        assert_eq!((o.schema.as_str(), o.table.as_str(), o.prefix.as_str()), ("s1", "t1", "p:"));
        assert!(!o.fence && o.pgbouncer_transaction);
        assert_eq!(o.heartbeat, Duration::from_secs(2));
        assert_eq!(o.connect_timeout, Some(Duration::from_secs(3)), "the driver's option");
        assert_eq!(cfg.get_application_name(), Some("leasehold"));
        let (_, o) = parse_url("postgresql://u@h/db?pgbouncer=session&fence=sequence").unwrap();
        assert_eq!(o.mode, Form::Lease);
        assert!(o.fence && !o.pgbouncer_transaction && !o.application_name);
    }

    /// A typo or a bad value is refused at parse time, naming the option.
    #[test]
    fn bad_options_are_named() {
        let cases = [
            ("postgres://u@h/db?tabel=x", "\"tabel\""),
            ("postgres://u@h/db?mode=xact", "mode=\"xact\""),
            ("postgres://u@h/db?schema=1s", "schema=\"1s\""),
            ("postgres://u@h/db?table=a-b", "table=\"a-b\""),
            ("postgres://u@h/db?fence=table", "fence=\"table\""),
            ("postgres://u@h/db?heartbeat=5", "heartbeat=\"5\""),
            ("postgres://u@h/db?heartbeat=2h", "heartbeat=\"2h\""),
            ("postgres://u@h/db?pgbouncer=statement", "pgbouncer=\"statement\""),
            ("postgres://u@h/db?tabel=x", "valid options: mode, schema, table,"),
        ];
        crate::url::assert_refused(parse_url, &cases);
        assert!(parse_url("postgres://u@h/db?sslmode=sometimes").is_err(), "the driver's check");
    }
}
