//! PostgreSQL, three lock forms on one server:
//!
//! - `postgres://USER@HOST:PORT/DB[?mode=lease&schema=S&table=T]` (the default): a **lease
//!   table**. Grant, renew and release are one statement each; expiry is decided by the
//!   database's `now()` (no client clock takes part); the per-row fence counter is bumped by
//!   the granting statement only, to `max(fence + 1, clock_timestamp() in µs)`, and the row is
//!   never deleted, so fences never go back, not even on a promoted standby that missed the
//!   last grants ([`crate::FenceRepeat::ClockBacked`]).
//!   Waiters `LISTEN` on one channel per table and wake no later than the holder's expiry.
//!   A refused waiter takes a ticket in the key's row (`tickets`); a release calls the next
//!   ticket (`turn`) and notifies `r TURN KEY`, so only the called waiter tries at once and a
//!   handoff costs one attempt however many processes wait (NOTIFY reaches them all). The
//!   others try when called, or 5 ms per ticket ahead of theirs after a release the called
//!   waiter did not answer (`g TURN KEY` says it did). Many leases renew in one
//!   `UPDATE … FROM unnest(…)`.
//! - `postgres://…?mode=session[&prefix=P&fence=sequence|none&heartbeat=5000ms]`: a
//!   **session advisory lock** on `hashtextextended(P || KEY, 0)`, so psql or any other client
//!   takes the same lock with `SELECT pg_advisory_lock(hashtextextended('KEY', 0))`. Each
//!   lock holds a **dedicated** connection, returned to this store's idle list only after
//!   `pg_advisory_unlock` answered true; a failed unlock, an error, a cancelled acquire or a
//!   failed heartbeat closes the connection instead (the server then drops the lock), and
//!   the end of that connection fires the lease's `lost()`. Waiting is the server's own
//!   blocking `pg_advisory_lock` under `lock_timeout` (FIFO in the lock manager). The fence,
//!   unless `fence=none`, comes from the sequence `S.leasehold_fence_seq`, set in the granting
//!   statement to `max(nextval, clock_timestamp() in µs)`.
//! - [`with_xact_lock`], [`xact_lock`], [`try_xact_lock`]: the **transaction** form,
//!   `pg_advisory_xact_lock` inside the caller's transaction; the lock ends with it.
//!
//! `pgbouncer=transaction` in the URL declares a PgBouncer in transaction-pooling mode:
//! session locks are then refused (they would stay with a server connection other clients
//! reuse), the lease table and the transaction form work. Connections are plain TCP
//! (`sslmode=require` is refused by the driver).

pub mod fence;
mod probe;

use std::collections::{HashMap, HashSet};
use std::future::poll_fn;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio_postgres::error::SqlState;
use tokio_postgres::{AsyncMessage, Client, Config, NoTls, Statement, Transaction};

use super::session::Undoing;
use crate::store::{
    AcquireRequest, Attempt, Grant, Holder, RenewItem, SessionEnd, within_op_timeout,
};
use crate::{Error, FenceRepeat, FenceToken, Guarantees, Key, LockKind, OwnerToken, Result, Store};

pub use tokio_postgres;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
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
    if e.code().is_some() { Error::backend("postgres", msg, e) } else { Error::UnknownOutcome(msg) }
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX).max(1)
}

fn left(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// A SQL identifier we accept in options: letters, digits, `_`, not starting with a digit.
fn ident(what: &str, v: &str) -> Result<String> {
    let ok = !v.is_empty()
        && v.len() <= 63
        && !v.starts_with(|c: char| c.is_ascii_digit())
        && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(v.to_owned())
    } else {
        Err(Error::invalid(format!(
            "{what}={v:?}: use 1-63 ASCII letters, digits or '_', not starting with a digit"
        )))
    }
}

/// Which lock form a `postgres://` URL asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The lease table (default).
    Lease,
    /// Session advisory locks on dedicated connections.
    Session,
}

/// Options read from the URL's query string (removed before the driver sees it).
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub mode: Mode,
    pub schema: String,
    pub table: String,
    pub prefix: String,
    pub fence: bool,
    pub heartbeat: Duration,
    pub pgbouncer_transaction: bool,
}

pub(crate) fn parse_url(url: &str) -> Result<(Config, Options)> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut keep = Vec::new();
    let mut o = Options {
        mode: Mode::Lease,
        schema: "public".into(),
        table: "leasehold_leases".into(),
        prefix: String::new(),
        fence: true,
        heartbeat: Duration::from_secs(5),
        pgbouncer_transaction: false,
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "mode" => {
                o.mode = match v {
                    "lease" => Mode::Lease,
                    "session" => Mode::Session,
                    _ => {
                        return Err(Error::invalid(format!(
                            "mode={v:?}: expected lease or session (the transaction form is a \
                             library API: leasehold::backends::postgres::with_xact_lock)"
                        )));
                    }
                }
            }
            "schema" => o.schema = ident("schema", v)?,
            "table" => o.table = ident("table", v)?,
            "prefix" => o.prefix = v.to_owned(),
            "fence" => {
                o.fence = match v {
                    "sequence" => true,
                    "none" => false,
                    _ => {
                        return Err(Error::invalid(format!(
                            "fence={v:?}: expected sequence or none"
                        )));
                    }
                }
            }
            "heartbeat" => {
                o.heartbeat = crate::url::duration_option(
                    "heartbeat",
                    v,
                    Duration::from_millis(1),
                    Duration::from_secs(3600),
                )?
            }
            "pgbouncer" => {
                o.pgbouncer_transaction = match v {
                    "transaction" => true,
                    "session" | "none" => false,
                    _ => {
                        return Err(Error::invalid(format!(
                            "pgbouncer={v:?}: expected transaction, session or none"
                        )));
                    }
                }
            }
            _ => keep.push(pair),
        }
    }
    let base = if keep.is_empty() { base.to_owned() } else { format!("{base}?{}", keep.join("&")) };
    let mut cfg: Config =
        base.parse().map_err(|e| Error::invalid(format!("bad postgres URL {base:?}: {e}")))?;
    if cfg.get_connect_timeout().is_none() {
        cfg.connect_timeout(CONNECT_TIMEOUT);
    }
    if cfg.get_application_name().is_none() {
        cfg.application_name("leasehold");
    }
    Ok((cfg, o))
}

/// The driver configuration of a `postgres://` store URL: leasehold's options removed, its
/// connect timeout and application name applied. For tools that talk to the same server
/// (`leasehold doctor`, benchmarks).
pub(crate) fn client_config(url: &str) -> Result<Config> {
    parse_url(url).map(|(cfg, _)| cfg)
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
    async fn open(cfg: &Config, on_notify: Option<Arc<Queues>>) -> Result<PgConn> {
        let (client, mut conn) = cfg.connect(NoTls).await.map_err(|e| {
            Error::unavailable(format!("cannot connect to postgres: {e}"), Some(e.into()))
        })?;
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
        Ok(PgConn { client, driver: task.abort_handle(), ended })
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

mod lease;
mod session;
#[cfg(feature = "tools")]
pub mod tools;
mod xact;

pub use lease::PgLeaseStore;
use lease::Queues;
use session::LOCK_ID;
pub use session::PgSessionStore;
pub use xact::{try_xact_lock, with_xact_lock, xact_lock};

/// Opens a `postgres://` store in the form its URL asks for.
pub async fn connect(url: &str) -> Result<Arc<dyn Store>> {
    let (cfg, o) = parse_url(url)?;
    Ok(match o.mode {
        Mode::Lease => Arc::new(PgLeaseStore::open(cfg, &o).await?),
        Mode::Session => Arc::new(PgSessionStore::open(cfg, &o).await?),
    })
}

/// `postgres://USER@HOST:PORT/DB[?mode=lease|session…]`: the driver refuses parameters it does
/// not know.
pub(crate) const STORE: super::Descriptor = super::Descriptor {
    schemes: &["postgres", "postgresql"],
    form: "postgres://USER@HOST:PORT/DB[?mode=lease|session]",
    options: None,
    open: |url| Box::pin(connect(url)),
    probe: |url, p| Box::pin(probe::postgres(url, p)),
};
