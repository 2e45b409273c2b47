//! MySQL and MariaDB, two lock forms:
//!
//! - `mysql://USER[:PASS]@HOST:PORT/DB[?mode=lease&table=T]` (the default): a **lease
//!   table** `(lock_key, owner, fence, expires_at)`. Grant is one `INSERT … ON DUPLICATE KEY
//!   UPDATE` whose fence comes back as `LAST_INSERT_ID`; renew and release are one owner-checked
//!   `UPDATE` each; expiry is decided by the server's `UTC_TIMESTAMP(6)` (no client clock, no
//!   session time zone); the fence is set by grants only, to `max(fence + 1, the server's
//!   clock in µs)`, and rows are never deleted, so a replica promoted after missing grants
//!   still issues larger fences ([`crate::FenceRepeat::ClockBacked`]). MySQL has no notifications: waiters in this process wake at a release here,
//!   others poll with a 1–50 ms backoff, never later than the holder's expiry.
//! - `mysql://…?mode=session[&prefix=P&fence=table|none&heartbeat=5000ms]`: **`GET_LOCK`**
//!   on the name `P || KEY`, or `leasehold:` + `SHA1(P || KEY)` when that is longer than the
//!   server's 64 characters (computed by the server, so any client can take the same lock).
//!   Locks ride on connections owned by this store, never on a pooled one (a pool's
//!   `reset_connection` silently drops `GET_LOCK`s, or keeps them for the next borrower).
//!   Waiting is the server's blocking `GET_LOCK(name, timeout)`. The fence, unless
//!   `fence=none`, is a per-key counter row in `TABLE_fences`, set to `max(fence + 1,
//!   clock µs)` right after the grant while the lock is held. A failed unlock, heartbeat or request closes the
//!   connection: the server drops its locks and every lease on it fires `lost()`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Pool};
use tokio::sync::{oneshot, watch};

use super::bell::{BellWatch, Bells};
use super::session::Undoing;
use crate::store::{AcquireRequest, Attempt, Grant, Holder, RenewItem, SessionEnd, Watch};
use crate::{Error, FenceRepeat, FenceToken, Guarantees, Key, LockKind, OwnerToken, Result, Store};

pub use mysql_async;

const RENEW_CHUNK: usize = 1000;
const PER_CONN: usize = 64;
const BACKOFF_MIN: Duration = Duration::from_millis(1);
const BACKOFF_MAX: Duration = Duration::from_millis(50);

/// The lock name of `?` as the server computes it (one parameter, used three times).
const LOCK_NAME: &str = "IF(CHAR_LENGTH(?) <= 64, ?, CONCAT('leasehold:', SHA1(?)))";

fn my_err(what: &str, e: mysql_async::Error) -> Error {
    let msg = format!("mysql {what}: {e}");
    match e {
        mysql_async::Error::Server(_) => Error::backend("mysql", msg, e),
        // The request may have been applied; we cannot tell.
        _ => Error::UnknownOutcome(msg),
    }
}

fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

fn ident(what: &str, v: &str) -> Result<String> {
    let ok = !v.is_empty()
        && v.len() <= 64
        && !v.starts_with(|c: char| c.is_ascii_digit())
        && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(v.to_owned())
    } else {
        Err(Error::invalid(format!(
            "{what}={v:?}: use 1-64 ASCII letters, digits or '_', not starting with a digit"
        )))
    }
}

#[derive(Debug, Clone)]
struct Options {
    session: bool,
    table: String,
    prefix: String,
    fence: bool,
    heartbeat: Duration,
}

fn parse_url(url: &str) -> Result<(Opts, Options)> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut keep = Vec::new();
    let mut o = Options {
        session: false,
        table: "leasehold_leases".into(),
        prefix: String::new(),
        fence: true,
        heartbeat: Duration::from_secs(5),
    };
    let mut socket_given = false;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "mode" => {
                o.session = match v {
                    "lease" => false,
                    "session" => true,
                    _ => {
                        return Err(Error::invalid(format!(
                            "mode={v:?}: expected lease or session"
                        )));
                    }
                }
            }
            "table" => o.table = ident("table", v)?,
            "prefix" => o.prefix = v.to_owned(),
            "fence" => {
                o.fence = match v {
                    "table" => true,
                    "none" => false,
                    _ => {
                        return Err(Error::invalid(format!("fence={v:?}: expected table or none")));
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
            _ => {
                socket_given |= k == "prefer_socket";
                keep.push(pair)
            }
        }
    }
    let base = if keep.is_empty() { base.to_owned() } else { format!("{base}?{}", keep.join("&")) };
    let opts = Opts::from_url(&base)
        .map_err(|e| Error::invalid(format!("bad mysql URL {base:?}: {e}")))?;
    if opts.db_name().is_none() {
        return Err(Error::invalid(format!("mysql URL {base:?} names no database (…/DB)")));
    }
    // Talk TCP to the address given (a fault proxy in front of the server must see every
    // byte), unless the URL says otherwise.
    let mut b = OptsBuilder::from_opts(opts);
    if !socket_given {
        b = b.prefer_socket(false);
    }
    Ok((b.into(), o))
}

/// The driver options of a `mysql://` store URL, leasehold's options removed (TCP unless a
/// socket is named). For tools that talk to the same server (`leasehold doctor`).
pub fn client_opts(url: &str) -> Result<Opts> {
    parse_url(url).map(|(opts, _)| opts)
}

/// Opens a `mysql://` store in the form its URL asks for.
pub async fn connect(url: &str) -> Result<Arc<dyn Store>> {
    let (opts, o) = parse_url(url)?;
    Ok(if o.session {
        Arc::new(MySessionStore::open(opts, &o).await?)
    } else {
        Arc::new(MyLeaseStore::open(opts, &o).await?)
    })
}

async fn new_conn(opts: &Opts) -> Result<Conn> {
    Conn::new(opts.clone())
        .await
        .map_err(|e| Error::unavailable(format!("cannot connect to mysql: {e}"), Some(e.into())))
}

// ---------------------------------------------------------------------------------------------
// Lease table

/// The lease-table statements (`?` parameters), for operators who want to read them and for
/// `leasehold bench`, which runs the very same text through the raw client.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LeaseStatements {
    /// key, owner, TTL in µs → affected rows 1 (first grant) or 2 (granted), with the fence
    /// in `LAST_INSERT_ID`; 0 (busy).
    pub grant: String,
    /// TTL in µs, key, owner → 1 row iff renewed.
    pub renew: String,
    /// key, owner → 1 row iff released while live.
    pub release: String,
}

/// The lease-table statements for a `mysql://` URL's `table` option.
pub fn lease_statements(url: &str) -> Result<LeaseStatements> {
    let (_, o) = parse_url(url)?;
    let s = LeaseSql::new(&o.table);
    Ok(LeaseStatements { grant: s.grant, renew: s.renew, release: s.release })
}

/// The lease-table store (`mode=lease`).
pub struct MyLeaseStore {
    pool: Pool,
    sql: LeaseSql,
    bells: Bells,
}

impl std::fmt::Debug for MyLeaseStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MyLeaseStore").field("table", &self.sql.table).finish()
    }
}

struct LeaseSql {
    table: String,
    grant: String,
    busy_left: String,
    renew: String,
    release: String,
    release_expired: String,
}

impl LeaseSql {
    fn new(table: &str) -> LeaseSql {
        let t = format!("`{table}`");
        const NOW: &str = "UTC_TIMESTAMP(6)";
        LeaseSql {
            // Assignments run left to right and see earlier ones: the fence and owner are
            // decided on the old row; expires_at follows the owner.
            grant: format!(
                "INSERT INTO {t} (lock_key, owner, fence, expires_at)
                 VALUES (?, ?, LAST_INSERT_ID({CLOCK_US}), {NOW} + INTERVAL ? MICROSECOND)
                 ON DUPLICATE KEY UPDATE
                   fence = IF(owner IS NULL OR expires_at <= {NOW},
                              LAST_INSERT_ID(GREATEST(fence + 1, {CLOCK_US})), fence),
                   owner = IF(owner IS NULL OR expires_at <= {NOW}, VALUES(owner), owner),
                   expires_at = IF(owner <=> VALUES(owner), VALUES(expires_at), expires_at)"
            ),
            busy_left: format!(
                "SELECT GREATEST(0, TIMESTAMPDIFF(MICROSECOND, {NOW}, expires_at)) FROM {t}
                 WHERE lock_key = ? AND owner IS NOT NULL"
            ),
            renew: format!(
                "UPDATE {t} SET expires_at = {NOW} + INTERVAL ? MICROSECOND, renewals = renewals + 1
                 WHERE lock_key = ? AND owner = ? AND expires_at > {NOW}"
            ),
            release: format!(
                "UPDATE {t} SET owner = NULL, expires_at = {NOW}
                 WHERE lock_key = ? AND owner = ? AND expires_at > {NOW}"
            ),
            release_expired: format!(
                "UPDATE {t} SET owner = NULL WHERE lock_key = ? AND owner = ?"
            ),
            table: t,
        }
    }
}

impl MyLeaseStore {
    async fn open(opts: Opts, o: &Options) -> Result<Self> {
        let sql = LeaseSql::new(&o.table);
        // Our statements leave no session state behind, and a reset on every return to the
        // pool would cost a round trip and drop the prepared-statement cache.
        let pool_opts = opts.pool_opts().clone().with_reset_connection(false);
        let pool = Pool::new(OptsBuilder::from_opts(opts).pool_opts(pool_opts));
        let mut c = pool.get_conn().await.map_err(|e| {
            Error::unavailable(format!("cannot connect to mysql: {e}"), Some(e.into()))
        })?;
        c.query_drop(format!(
            "CREATE TABLE IF NOT EXISTS {} (
                lock_key   VARBINARY(512) NOT NULL PRIMARY KEY,
                owner      VARBINARY(64) NULL,
                fence      BIGINT UNSIGNED NOT NULL,
                expires_at DATETIME(6) NOT NULL,
                renewals   BIGINT UNSIGNED NOT NULL DEFAULT 0
            ) ENGINE = InnoDB",
            sql.table
        ))
        .await
        .map_err(|e| my_err("creating the lease table", e))?;
        Ok(MyLeaseStore { pool, sql, bells: Bells::default() })
    }

    async fn conn(&self) -> Result<Conn> {
        self.pool.get_conn().await.map_err(|e| {
            Error::unavailable(format!("cannot connect to mysql: {e}"), Some(e.into()))
        })
    }
}

#[async_trait]
impl Store for MyLeaseStore {
    fn guarantees(&self) -> Guarantees {
        Guarantees {
            backend: "mysql",
            kind: LockKind::Lease,
            exclusion: "linearizable (one InnoDB row per key, updated under its row lock)",
            store_failure: "a committed grant survives a crash with innodb_flush_log_at_trx_commit=1; \
                            failing over to an asynchronous replica can lose recent grants and \
                            admit a second holder, whose fence is still larger than the stale \
                            holder's",
            expiry: "the server's UTC_TIMESTAMP(6); no client clock takes part",
            fence: "per-row max(fence + 1, UTC_TIMESTAMP(6) in µs), set by the granting \
                    statement; rows are never deleted",
            fence_repeat: FenceRepeat::ClockBacked,
            failure_admits_second_holder: true,
            waiting: "woken by a release in this process; 1-50 ms backoff across processes, \
                      never later than the holder's expiry",
        }
    }

    async fn try_acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        let mut c = self.conn().await?;
        let sent = Instant::now();
        let key = req.key.as_str().as_bytes();
        let owner = req.owner.to_string();
        c.exec_drop(&self.sql.grant, (key, &owner, us(req.ttl)))
            .await
            .map_err(|e| my_err("grant", e))?;
        let fence = match c.affected_rows() {
            1 | 2 => c.last_insert_id().filter(|f| *f > 0).ok_or_else(|| {
                Error::backend(
                    "mysql",
                    "grant: the server did not return the fence (LAST_INSERT_ID)",
                    "missing last_insert_id",
                )
            })?,
            _ => {
                let left: Option<i64> = c
                    .exec_first(&self.sql.busy_left, (key,))
                    .await
                    .map_err(|e| my_err("reading the holder's expiry", e))?;
                let left = Duration::from_micros(u64::try_from(left.unwrap_or(0)).unwrap_or(0));
                return Ok(Attempt::Busy { holder_expires_in: Some(left) });
            }
        };
        Ok(Attempt::Granted(Grant::new(FenceToken::new(fence), sent)))
    }

    async fn acquire(&self, req: &AcquireRequest<'_>, until: Option<Instant>) -> Result<Attempt> {
        crate::store::acquire_watching(self, req, until, || self.watch(req.key)).await
    }

    async fn renew(&self, key: &Key, owner: &OwnerToken, ttl: Duration) -> Result<bool> {
        let mut c = self.conn().await?;
        c.exec_drop(&self.sql.renew, (us(ttl), key.as_str().as_bytes(), owner.to_string()))
            .await
            .map_err(|e| my_err("renew", e))?;
        Ok(c.affected_rows() == 1)
    }

    async fn renew_many(&self, items: &[RenewItem]) -> Result<Vec<bool>> {
        let mut c = self.conn().await?;
        let mut out = Vec::with_capacity(items.len());
        let t = &self.sql.table;
        for chunk in items.chunks(RENEW_CHUNK) {
            // One UPDATE per distinct TTL (the watchdog's batch has one), then one SELECT
            // that reads back which rows are ours and live.
            let mut by_ttl: HashMap<Duration, Vec<&RenewItem>> = HashMap::new();
            for it in chunk {
                by_ttl.entry(it.ttl).or_default().push(it);
            }
            for (ttl, its) in by_ttl {
                let keys = vec!["?"; its.len()].join(",");
                let pairs = vec!["(?,?)"; its.len()].join(",");
                let mut params: Vec<mysql_async::Value> = vec![us(ttl).into()];
                params.extend(its.iter().map(|i| i.key.as_str().as_bytes().into()));
                for i in &its {
                    params.push(i.key.as_str().as_bytes().into());
                    params.push(i.owner.to_string().into());
                }
                c.exec_drop(
                    format!(
                        "UPDATE {t} SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
                           renewals = renewals + 1
                         WHERE lock_key IN ({keys}) AND (lock_key, owner) IN ({pairs})
                           AND expires_at > UTC_TIMESTAMP(6)"
                    ),
                    params,
                )
                .await
                .map_err(|e| my_err("renew", e))?;
            }
            let keys = vec!["?"; chunk.len()].join(",");
            let params: Vec<mysql_async::Value> =
                chunk.iter().map(|i| i.key.as_str().as_bytes().into()).collect();
            let rows: Vec<(Vec<u8>, Vec<u8>)> = c
                .exec(
                    format!(
                        "SELECT lock_key, owner FROM {t} WHERE lock_key IN ({keys})
                           AND owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6)"
                    ),
                    params,
                )
                .await
                .map_err(|e| my_err("renew", e))?;
            let live: HashSet<(Vec<u8>, Vec<u8>)> = rows.into_iter().collect();
            out.extend(chunk.iter().map(|i| {
                live.contains(&(
                    i.key.as_str().as_bytes().to_vec(),
                    i.owner.to_string().into_bytes(),
                ))
            }));
        }
        Ok(out)
    }

    async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool> {
        let mut c = self.conn().await?;
        let (k, o) = (key.as_str().as_bytes(), owner.to_string());
        c.exec_drop(&self.sql.release, (k, &o)).await.map_err(|e| my_err("release", e))?;
        let live = c.affected_rows() == 1;
        if live {
            self.bells.ring(key.as_str());
        } else {
            // Ours but expired: clear the owner anyway (a no-op for anyone else's row).
            c.exec_drop(&self.sql.release_expired, (k, &o))
                .await
                .map_err(|e| my_err("release", e))?;
        }
        Ok(live)
    }

    async fn holders(&self, key: Option<&Key>) -> Result<Vec<Holder>> {
        let mut c = self.conn().await?;
        let t = &self.sql.table;
        let sql = format!(
            "SELECT lock_key, owner, fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
             FROM {t} WHERE owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6) {} ORDER BY lock_key",
            if key.is_some() { "AND lock_key = ?" } else { "" }
        );
        let params: Vec<mysql_async::Value> =
            key.map(|k| k.as_str().as_bytes().into()).into_iter().collect();
        let rows: Vec<(Vec<u8>, String, u64, i64)> =
            c.exec(sql, params).await.map_err(|e| my_err("holders", e))?;
        rows.into_iter()
            .map(|(k, o, f, left)| {
                let k = String::from_utf8(k)
                    .map_err(|_| Error::invalid("a lease row's key is not UTF-8"))?;
                Ok(Holder::new(
                    Key::new(k)?,
                    o.parse()?,
                    Some(FenceToken::new(f)),
                    Some(Duration::from_micros(u64::try_from(left).unwrap_or(0))),
                ))
            })
            .collect()
    }
}

impl MyLeaseStore {
    /// Subscribes to changes of `key` (a release, an expiry), for [`crate::store::acquire_watching`].
    pub(crate) async fn watch(&self, key: &Key) -> Result<Box<dyn Watch>> {
        Ok(Box::new(BellWatch::polling(self.bells.subscribe(key), BACKOFF_MIN, BACKOFF_MAX)))
    }
}

// ---------------------------------------------------------------------------------------------
// GET_LOCK session locks

/// A connection of this store carrying `GET_LOCK`s (held, or reserved by a request in
/// flight). Requests run in tasks of their own, so an abandoned caller never leaves the
/// connection mid-request.
struct SessionConn {
    conn: tokio::sync::Mutex<Option<Conn>>,
    id: u32,
    keys: Mutex<HashSet<String>>,
    dead: AtomicBool,
    ended: watch::Sender<Option<String>>,
}

impl SessionConn {
    async fn open(
        opts: &Opts,
        heartbeat: Duration,
        alarm: watch::Receiver<u64>,
    ) -> Result<Arc<SessionConn>> {
        let conn = new_conn(opts).await?;
        let c = Arc::new(SessionConn {
            id: conn.id(),
            conn: tokio::sync::Mutex::new(Some(conn)),
            keys: Mutex::default(),
            dead: AtomicBool::new(false),
            ended: watch::Sender::new(None),
        });
        tokio::spawn(session_heartbeat(Arc::downgrade(&c), heartbeat, alarm));
        Ok(c)
    }

    fn keys(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn alive(&self) -> bool {
        !self.dead.load(Ordering::SeqCst)
    }

    /// Declares the session over: every lease on it is lost; the connection is closed (the
    /// server then drops its locks) as soon as no request holds it.
    fn kill(self: &Arc<Self>, why: &str) {
        if self.dead.swap(true, Ordering::SeqCst) {
            return;
        }
        self.ended.send_replace(Some(why.to_owned()));
        let me = self.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Some(c) = me.conn.lock().await.take() {
                    let _ = c.disconnect().await;
                }
            });
        }
    }

    fn end_signal(&self) -> SessionEnd {
        let mut rx = self.ended.subscribe();
        Box::pin(async move {
            match rx.wait_for(|r| r.is_some()).await {
                Ok(r) => r.clone().unwrap_or_default(),
                Err(_) => "mysql connection closed".to_owned(),
            }
        })
    }

    /// Runs one statement returning one optional integer; a transport error kills the
    /// session.
    async fn scalar(
        self: &Arc<Self>,
        sql: &str,
        params: Vec<mysql_async::Value>,
    ) -> Result<Option<i64>> {
        let mut g = self.conn.lock().await;
        let Some(c) = g.as_mut().filter(|_| self.alive()) else {
            return Err(Error::UnknownOutcome("mysql session connection is closed".into()));
        };
        match c.exec_first::<Option<i64>, _, _>(sql, params).await {
            Ok(v) => Ok(v.flatten()),
            Err(e) => {
                let fatal = e.is_fatal();
                let err = my_err("session request", e);
                drop(g);
                if fatal {
                    self.kill("mysql connection failed");
                }
                Err(err)
            }
        }
    }
}

/// Pings a connection carrying locks every `every`, and at once when the store's sentinel
/// connection ends (see [`sentinel`]); a failed or slow ping closes it, which fires `lost()`
/// of every lease on it.
async fn session_heartbeat(conn: Weak<SessionConn>, every: Duration, alarm: watch::Receiver<u64>) {
    let mut alarm = Some(alarm);
    loop {
        match alarm.as_mut() {
            Some(a) => tokio::select! {
                r = a.changed() => {
                    if r.is_err() {
                        alarm = None;
                    }
                }
                _ = tokio::time::sleep(every) => {}
            },
            None => tokio::time::sleep(every).await,
        }
        let Some(c) = conn.upgrade() else { return };
        if !c.alive() {
            return;
        }
        if c.keys().is_empty() {
            continue;
        }
        let ok = tokio::time::timeout(every, c.scalar("SELECT 1", vec![])).await;
        if !matches!(ok, Ok(Ok(Some(1)))) {
            tracing::warn!("mysql session heartbeat failed: closing the connection");
            c.kill("mysql session heartbeat failed");
            return;
        }
    }
}

struct Held {
    key: Key,
    fence: u64,
    conn: Arc<SessionConn>,
}

/// The `GET_LOCK` store (`mode=session`).
pub struct MySessionStore {
    opts: Opts,
    prefix: String,
    fences: Option<String>,
    heartbeat: Duration,
    conns: Mutex<Vec<Arc<SessionConn>>>,
    held: Mutex<HashMap<OwnerToken, Held>>,
    undoing: Arc<Undoing>,
    /// Bumped by the sentinel when its connection ends; every heartbeat pings at once.
    alarm: watch::Sender<u64>,
    sentinel: tokio::task::AbortHandle,
}

impl Drop for MySessionStore {
    fn drop(&mut self) {
        self.sentinel.abort();
    }
}

/// A connection that sits in `SELECT SLEEP(…)` for the store's lifetime. MySQL connections
/// are only read when a request is in flight, so a lock holder would learn that the server
/// restarted (and dropped its locks) only at its next heartbeat, after a successor may have
/// taken them; the sentinel's read ends the moment the server closes its connections, and it
/// makes every heartbeat ping at once.
async fn sentinel(opts: Opts, alarm: watch::Sender<u64>) {
    loop {
        if let Ok(mut c) = new_conn(&opts).await {
            let _ = c.query_drop("DO SLEEP(31536000)").await;
        }
        alarm.send_modify(|n| *n += 1);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl std::fmt::Debug for MySessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MySessionStore").field("prefix", &self.prefix).finish()
    }
}

fn name_params(name: &str) -> Vec<mysql_async::Value> {
    vec![name.into(), name.into(), name.into()]
}

/// A grant request answered, or not yet: dropping it unanswered undoes the request on its
/// connection (a blocking wait is interrupted with `KILL QUERY`, a lock granted meanwhile is
/// released) before a release of the same name in this process may proceed.
struct Flight {
    rx: Option<oneshot::Receiver<Result<Option<u64>>>>,
    abandon: Option<oneshot::Sender<()>>,
    conn: Arc<SessionConn>,
    name: String,
    undoing: Arc<Undoing>,
}

impl Drop for Flight {
    fn drop(&mut self) {
        let Some(rx) = self.rx.take() else { return };
        if let Some(a) = self.abandon.take() {
            let _ = a.send(());
        }
        let (conn, name, undoing) = (self.conn.clone(), self.name.clone(), self.undoing.clone());
        undoing.start(&name);
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            conn.kill("acquire abandoned without a runtime");
            undoing.finish(&name);
            return;
        };
        rt.spawn(async move {
            if let Ok(Ok(Some(_))) = rx.await {
                let sql = format!("SELECT RELEASE_LOCK({LOCK_NAME})");
                if !matches!(conn.scalar(&sql, name_params(&name)).await, Ok(Some(1))) {
                    conn.kill("could not undo an abandoned GET_LOCK");
                }
            }
            conn.keys().remove(&name);
            undoing.finish(&name);
        });
    }
}

impl MySessionStore {
    async fn open(opts: Opts, o: &Options) -> Result<Self> {
        let fences = o.fence.then(|| format!("`{}_fences`", o.table));
        if let Some(t) = &fences {
            let mut c = new_conn(&opts).await?;
            c.query_drop(format!(
                "CREATE TABLE IF NOT EXISTS {t} (
                    lock_key VARBINARY(512) NOT NULL PRIMARY KEY,
                    fence    BIGINT UNSIGNED NOT NULL
                ) ENGINE = InnoDB"
            ))
            .await
            .map_err(|e| my_err("creating the fence table", e))?;
            let _ = c.disconnect().await;
        }
        let alarm = watch::Sender::new(0);
        let sentinel = tokio::spawn(sentinel(opts.clone(), alarm.clone())).abort_handle();
        Ok(MySessionStore {
            opts,
            prefix: o.prefix.clone(),
            fences,
            heartbeat: o.heartbeat,
            conns: Mutex::default(),
            held: Mutex::default(),
            undoing: Arc::default(),
            alarm,
            sentinel,
        })
    }

    fn lock_name(&self, key: &Key) -> String {
        format!("{}{}", self.prefix, key.as_str())
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<OwnerToken, Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn conns(&self) -> std::sync::MutexGuard<'_, Vec<Arc<SessionConn>>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A connection for `name`, with `name` reserved on it; never one already carrying it
    /// (`GET_LOCK` is re-entrant within a session). `exclusive`: one carrying nothing, taken
    /// out of the shared list while a blocking wait stalls it.
    async fn reserve(&self, name: &str, exclusive: bool) -> Result<Arc<SessionConn>> {
        let found = {
            let mut conns = self.conns();
            conns.retain(|c| c.alive());
            let pick = conns.iter().position(|c| {
                let keys = c.keys();
                if exclusive {
                    keys.is_empty()
                } else {
                    keys.len() < PER_CONN && !keys.contains(name)
                }
            });
            match pick {
                Some(i) if exclusive => Some(conns.swap_remove(i)),
                Some(i) => Some(conns[i].clone()),
                None => None,
            }
        };
        let conn = match found {
            Some(c) => c,
            None => {
                let c =
                    SessionConn::open(&self.opts, self.heartbeat, self.alarm.subscribe()).await?;
                if !exclusive {
                    self.conns().push(c.clone());
                }
                c
            }
        };
        conn.keys().insert(name.to_owned());
        Ok(conn)
    }

    fn give_back(&self, conn: Arc<SessionConn>) {
        let mut conns = self.conns();
        let empty = conns.iter().filter(|c| c.keys().is_empty()).count();
        if conn.alive() && (!conn.keys().is_empty() || empty < 2) {
            conns.push(conn);
        }
    }

    async fn grant(&self, req: &AcquireRequest<'_>, wait: Option<Duration>) -> Result<Attempt> {
        let name = self.lock_name(req.key);
        let conn = self.reserve(&name, wait.is_some()).await?;
        let (tx, rx) = oneshot::channel();
        let (abandon_tx, abandon_rx) = oneshot::channel();
        let mut flight = Flight {
            rx: Some(rx),
            abandon: Some(abandon_tx),
            conn: conn.clone(),
            name: name.clone(),
            undoing: self.undoing.clone(),
        };
        let sent = Instant::now();
        let (opts, fences, key) = (self.opts.clone(), self.fences.clone(), req.key.clone());
        tokio::spawn(async move {
            let _ = tx.send(
                grant_on(&conn, &opts, &name, wait, fences.as_deref(), &key, abandon_rx).await,
            );
        });
        let answer = flight.rx.as_mut().expect("present").await;
        flight.rx = None; // answered: nothing to undo on drop
        let conn = flight.conn.clone();
        let name = flight.name.clone();
        drop(flight);
        let answer =
            answer.unwrap_or_else(|_| Err(Error::UnknownOutcome("grant task ended".into())));
        let fence = match answer {
            Ok(f) => f,
            Err(e) => {
                // Undo whatever the server did, on that connection.
                conn.kill("a GET_LOCK request failed");
                return Err(e);
            }
        };
        if fence.is_none() {
            conn.keys().remove(&name);
        }
        if wait.is_some() {
            self.give_back(conn.clone());
        }
        let Some(fence) = fence else { return Ok(Attempt::Busy { holder_expires_in: None }) };
        let end = conn.end_signal();
        self.held().insert(*req.owner, Held { key: req.key.clone(), fence, conn });
        Ok(Attempt::Granted(Grant::new(FenceToken::new(fence), sent).with_session_end(end)))
    }
}

/// The session-lock statements (`?` parameters), as the store sends them.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionStatements {
    /// name, name, name, timeout in seconds → 1 granted, 0 timed out.
    pub get_lock: String,
    /// key → bumps the key's fence (the new fence in `LAST_INSERT_ID`);
    /// `None` with `fence=none`.
    pub fence: Option<String>,
    /// name, name, name → 1 released, 0 held by another session, NULL no such lock.
    pub release_lock: String,
}

/// The session-lock statements for a `mysql://…?mode=session` URL. The lock name is the
/// `prefix` option followed by the key.
pub fn session_statements(url: &str) -> Result<SessionStatements> {
    let (_, o) = parse_url(url)?;
    Ok(SessionStatements {
        get_lock: format!("SELECT GET_LOCK({LOCK_NAME}, ?)"),
        fence: o.fence.then(|| fence_sql(&format!("`{}_fences`", o.table))),
        release_lock: format!("SELECT RELEASE_LOCK({LOCK_NAME})"),
    })
}

fn fence_sql(table: &str) -> String {
    format!(
        "INSERT INTO {table} (lock_key, fence) VALUES (?, LAST_INSERT_ID({CLOCK_US}))
         ON DUPLICATE KEY UPDATE fence = LAST_INSERT_ID(GREATEST(fence + 1, {CLOCK_US}))"
    )
}

/// The server's clock in µs since 1970 (UTC, whatever the session time zone), the floor of
/// every fence (see [`crate::FenceRepeat::ClockBacked`]).
const CLOCK_US: &str = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";

/// `GET_LOCK`, then the fence bump while holding it. `Ok(None)`: busy.
async fn grant_on(
    conn: &Arc<SessionConn>,
    opts: &Opts,
    name: &str,
    wait: Option<Duration>,
    fences: Option<&str>,
    key: &Key,
    abandon: oneshot::Receiver<()>,
) -> Result<Option<u64>> {
    let secs = wait.map_or(0.0, |w| w.as_secs_f64().min(365.0 * 86400.0));
    let mut params = name_params(name);
    params.push(secs.into());
    let sql = format!("SELECT GET_LOCK({LOCK_NAME}, ?)");
    let lock = conn.scalar(&sql, params);
    tokio::pin!(lock);
    let got = tokio::select! {
        r = &mut lock => r,
        Ok(()) = abandon => {
            // Interrupt the server-side wait from another connection, then let it answer.
            if let Ok(mut side) = new_conn(opts).await {
                let _ = side.query_drop(format!("KILL QUERY {}", conn.id)).await;
                let _ = side.disconnect().await;
            }
            lock.await
        }
    };
    if got? != Some(1) {
        return Ok(None);
    }
    let Some(t) = fences else { return Ok(Some(0)) };
    let mut g = conn.conn.lock().await;
    let c = g.as_mut().ok_or_else(|| Error::UnknownOutcome("mysql connection closed".into()))?;
    c.exec_drop(fence_sql(t), (key.as_str().as_bytes(),)).await.map_err(|e| my_err("fence", e))?;
    match c.last_insert_id().filter(|f| *f > 0) {
        Some(f) => Ok(Some(f)),
        None => Err(Error::backend(
            "mysql",
            "fence: the server did not return the fence (LAST_INSERT_ID)",
            "missing last_insert_id",
        )),
    }
}

#[async_trait]
impl Store for MySessionStore {
    fn guarantees(&self) -> Guarantees {
        Guarantees {
            backend: "mysql-session",
            kind: LockKind::Session,
            exclusion: "linearizable (the server's lock registry)",
            store_failure: "a server restart or the end of the holder's connection releases \
                            the lock; the holder's lost() fires when its connection is found \
                            closed: at once on a restart (a sentinel connection's read ends and \
                            every heartbeat pings), else at the next heartbeat",
            expiry: "session: held while the holder's connection lives (heartbeat pings it)",
            fence: if self.fences.is_some() {
                "per-key counter row set to max(fence + 1, UTC_TIMESTAMP(6) in µs) right after \
                 the grant, while the lock is held"
            } else {
                "none (fence=none)"
            },
            fence_repeat: if self.fences.is_some() {
                FenceRepeat::ClockBacked
            } else {
                FenceRepeat::NoFence
            },
            failure_admits_second_holder: true,
            waiting: "server-side blocking GET_LOCK(name, timeout)",
        }
    }

    async fn try_acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        self.grant(req, None).await
    }

    async fn acquire(&self, req: &AcquireRequest<'_>, until: Option<Instant>) -> Result<Attempt> {
        crate::store::acquire_in_server(req, until, |wait| self.grant(req, wait)).await
    }

    async fn renew(&self, key: &Key, owner: &OwnerToken, _ttl: Duration) -> Result<bool> {
        let conn = match self.held().get(owner) {
            Some(h) if h.key == *key => h.conn.clone(),
            _ => return Ok(false),
        };
        let v = conn
            .scalar(
                &format!("SELECT IS_USED_LOCK({LOCK_NAME}) = CONNECTION_ID()"),
                name_params(&self.lock_name(key)),
            )
            .await?;
        Ok(v == Some(1))
    }

    async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool> {
        let held = {
            let mut map = self.held();
            match map.get(owner) {
                Some(h) if h.key == *key => map.remove(owner),
                _ => None,
            }
        };
        let Some(h) = held else { return Ok(false) };
        let name = self.lock_name(key);
        self.undoing.settled(&name, Duration::from_secs(10)).await;
        let r =
            h.conn.scalar(&format!("SELECT RELEASE_LOCK({LOCK_NAME})"), name_params(&name)).await;
        match r {
            Ok(Some(1)) => {
                h.conn.keys().remove(&name);
                Ok(true)
            }
            Ok(_) => {
                h.conn.kill("RELEASE_LOCK found the lock not held");
                Ok(false)
            }
            Err(e) => {
                h.conn.kill("RELEASE_LOCK failed");
                Err(e)
            }
        }
    }

    async fn holders(&self, key: Option<&Key>) -> Result<Vec<Holder>> {
        let mut out: Vec<Holder> = self
            .held()
            .iter()
            .filter(|(_, h)| key.is_none_or(|k| *k == h.key))
            .map(|(o, h)| Holder::new(h.key.clone(), *o, Some(FenceToken::new(h.fence)), None))
            .collect();
        if let Some(key) = key
            && out.is_empty()
        {
            let mut c = new_conn(&self.opts).await?;
            let v: Option<Option<i64>> = c
                .exec_first(
                    format!("SELECT IS_USED_LOCK({LOCK_NAME})"),
                    name_params(&self.lock_name(key)),
                )
                .await
                .map_err(|e| my_err("holders", e))?;
            let _ = c.disconnect().await;
            if v.flatten().is_some() {
                // Held by another process: the server knows its connection, not its owner.
                return Err(Error::Busy { key: key.to_string() });
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
}
