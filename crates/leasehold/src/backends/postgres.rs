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
pub fn client_config(url: &str) -> Result<Config> {
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

// ---------------------------------------------------------------------------------------------
// Lease table

/// The statements the lease-table store prepares (with `$1`… parameters), for operators who
/// want to read them and for `leasehold bench`, which runs the very same text through pgbench.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LeaseStatements {
    /// `$1` key, `$2` owner, `$3` TTL in ms → (fence, NULL) when granted, (NULL, ms left)
    /// when busy.
    pub grant: String,
    /// A waiter's attempt: as `grant`, plus `$4` the waiter's ticket (0: none yet) and `$5`
    /// the channel → (fence or NULL, ms left, the waiter's ticket, the ticket called last).
    /// A refused waiter without a ticket, or whose ticket was called already (someone else
    /// took the key first), takes the next one; a waiter granted by its ticket notifies the
    /// other waiters that the call was answered.
    pub grant_queued: String,
    /// `$1` key, `$2` owner, `$3` TTL in ms → 1 row updated iff renewed.
    pub renew: String,
    /// `$1` keys, `$2` owners, `$3` TTLs in ms (arrays) → the renewed (key, owner) rows.
    pub renew_many: String,
    /// `$1` key, `$2` owner, `$3` notification channel → one row (still live?, the ticket
    /// now called) iff ours; calls the next waiting ticket and notifies `r TURN KEY`.
    pub release: String,
    /// `$1` key or NULL → live holders.
    pub holders: String,
    /// The `LISTEN` channel releases notify.
    pub channel: String,
}

/// The lease-table statements for a `postgres://` URL's `schema` and `table` options.
pub fn lease_statements(url: &str) -> Result<LeaseStatements> {
    let (_, o) = parse_url(url)?;
    Ok(LeaseStatements::new(&o.schema, &o.table))
}

impl LeaseStatements {
    fn new(schema: &str, table: &str) -> LeaseStatements {
        let t = format!("\"{schema}\".\"{table}\"");
        // One notification channel per table; channel names are identifiers (63 bytes).
        let mut channel = format!("leasehold:{schema}.{table}");
        channel.truncate(63);
        LeaseStatements {
            grant: format!(
            "WITH g AS (
               INSERT INTO {t} AS l (key, owner, fence, expires_at)
               VALUES ($1, $2, {US}, now() + $3::bigint * interval '1 millisecond')
               ON CONFLICT (key) DO UPDATE
                 SET owner = excluded.owner, fence = GREATEST(l.fence + 1, {US}), expires_at = excluded.expires_at
                 WHERE l.owner IS NULL OR l.expires_at <= now()
               RETURNING l.fence)
             SELECT fence, 0::bigint FROM g
             UNION ALL
             SELECT NULL::bigint, COALESCE((SELECT GREATEST(0, ceil(extract(epoch FROM l.expires_at - now()) * 1000))::bigint
                                            FROM {t} l WHERE l.key = $1), 0)
             WHERE NOT EXISTS (SELECT 1 FROM g)", US = CLOCK_US),
            renew: format!(
            "UPDATE {t} SET expires_at = now() + $3::bigint * interval '1 millisecond'
             WHERE key = $1 AND owner = $2 AND expires_at > now()"),
            renew_many: format!(
            "UPDATE {t} l SET expires_at = now() + x.ms * interval '1 millisecond'
             FROM unnest($1::text[], $2::text[], $3::bigint[]) AS x(key, owner, ms)
             WHERE l.key = x.key AND l.owner = x.owner AND l.expires_at > now()
             RETURNING l.key, l.owner"),
            grant_queued: format!(
            "WITH g AS (
               INSERT INTO {t} AS l (key, owner, fence, expires_at)
               VALUES ($1, $2, {US}, now() + $3::bigint * interval '1 millisecond')
               ON CONFLICT (key) DO UPDATE SET
                 owner = CASE WHEN {free} THEN excluded.owner ELSE l.owner END,
                 fence = CASE WHEN {free} THEN GREATEST(l.fence + 1, {US}) ELSE l.fence END,
                 expires_at = CASE WHEN {free} THEN excluded.expires_at ELSE l.expires_at END,
                 tickets = CASE WHEN {free} OR $4::bigint > l.turn THEN l.tickets
                                ELSE l.tickets + 1 END,
                 turn = CASE WHEN {free} THEN GREATEST(l.turn, $4::bigint) ELSE l.turn END
               RETURNING l.owner = $2 AS won, l.fence, l.expires_at, l.tickets, l.turn)
             SELECT CASE WHEN won THEN fence END,
                    GREATEST(0, ceil(extract(epoch FROM expires_at - now()) * 1000))::bigint,
                    CASE WHEN won OR $4::bigint > turn THEN $4::bigint ELSE tickets END,
                    turn,
                    CASE WHEN won AND $4::bigint > 0 THEN pg_notify($5, 'g ' || turn || ' ' || $1) END
             FROM g",
            free = "(l.owner IS NULL OR l.expires_at <= now())", US = CLOCK_US),
            release: format!(
            "WITH old AS (SELECT key, expires_at FROM {t} WHERE key = $1 AND owner = $2 FOR UPDATE),
                  upd AS (UPDATE {t} l SET owner = NULL, expires_at = now(),
                                 turn = GREATEST(l.turn, LEAST(l.turn + 1, l.tickets))
                          FROM old
                          WHERE l.key = old.key RETURNING old.expires_at > now() AS live, l.turn)
             SELECT live, turn, pg_notify($3, 'r ' || turn || ' ' || $1) FROM upd"),
            holders: format!(
            "SELECT key, owner, fence,
                    GREATEST(0, ceil(extract(epoch FROM expires_at - now()) * 1000))::bigint
             FROM {t} WHERE owner IS NOT NULL AND expires_at > now()
               AND ($1::text IS NULL OR key = $1) ORDER BY key"),
            channel,
        }
    }
}

struct LeaseConn {
    pg: PgConn,
    grant: Statement,
    grant_queued: Statement,
    renew: Statement,
    renew_many: Statement,
    release: Statement,
    holders: Statement,
}

/// How long a waiter whose ticket was not called waits, per ticket ahead of it, after a
/// release nobody answered (the called waiter gave up or died) before it tries anyway.
const STAGGER: Duration = Duration::from_millis(5);

/// What this process has heard about the waiting queue of each key (from notifications and
/// its own releases): the ticket called last, and since when the key is free if it was
/// released and not taken since. Waiters sleep on a per-key change counter.
#[derive(Default)]
struct Queues(Mutex<HashMap<String, KeyQueue>>);

struct KeyQueue {
    changes: watch::Sender<u64>,
    turn: i64,
    free_since: Option<Instant>,
    /// Bumped when every waiter must look again (a notification of an older format, or a
    /// listener reconnected after releases may have gone unseen).
    pokes: u64,
}

/// A key's queue as a waiter sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct QueueState {
    turn: i64,
    free_since: Option<Instant>,
    pokes: u64,
}

impl Queues {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, KeyQueue>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn subscribe(&self, key: &Key) -> watch::Receiver<u64> {
        self.map()
            .entry(key.as_str().to_owned())
            .or_insert_with(|| KeyQueue {
                changes: watch::Sender::new(0),
                turn: 0,
                free_since: None,
                pokes: 0,
            })
            .changes
            .subscribe()
    }

    fn state(&self, key: &Key) -> QueueState {
        self.map().get(key.as_str()).map_or(
            QueueState { turn: 0, free_since: None, pokes: 0 },
            |q| QueueState { turn: q.turn, free_since: q.free_since, pokes: q.pokes },
        )
    }

    /// Applies a change to `key`'s queue, if anyone here waits on it.
    fn update(&self, key: &str, f: impl FnOnce(&mut KeyQueue)) {
        let mut map = self.map();
        let Some(q) = map.get_mut(key) else { return };
        if q.changes.receiver_count() == 0 {
            map.remove(key);
            return;
        }
        f(q);
        q.changes.send_modify(|n| *n += 1);
    }

    /// The key was released and ticket `turn` called.
    fn released(&self, key: &str, turn: i64) {
        self.update(key, |q| {
            q.turn = q.turn.max(turn);
            q.free_since = Some(Instant::now());
        });
    }

    /// The waiter holding ticket `turn` took the key.
    fn taken(&self, key: &str, turn: i64) {
        self.update(key, |q| {
            q.turn = q.turn.max(turn);
            q.free_since = None;
        });
    }

    /// A notification: `r TURN KEY` (released), `g TURN KEY` (taken by the called waiter), or
    /// a bare key (a release by a version without queues: everyone looks again).
    fn notified(&self, payload: &str) {
        let mut parts = payload.splitn(3, ' ');
        match (parts.next(), parts.next().map(str::parse::<i64>), parts.next()) {
            (Some("r"), Some(Ok(turn)), Some(key)) => self.released(key, turn),
            (Some("g"), Some(Ok(turn)), Some(key)) => self.taken(key, turn),
            _ => self.update(payload, |q| q.pokes += 1),
        }
    }

    /// Every waiter looks again.
    fn poke_all(&self) {
        let mut map = self.map();
        map.retain(|_, q| q.changes.receiver_count() > 0);
        for q in map.values_mut() {
            q.pokes += 1;
            q.changes.send_modify(|n| *n += 1);
        }
    }
}

struct Listener {
    cfg: Config,
    channel: String,
    queues: Arc<Queues>,
    conn: tokio::sync::Mutex<Option<PgConn>>,
}

impl Listener {
    /// Makes sure a listening connection is up; a new one rings every bell, since releases
    /// may have gone unseen while there was none.
    async fn ensure(&self) -> Result<()> {
        let mut conn = self.conn.lock().await;
        if conn.as_ref().is_some_and(PgConn::alive) {
            return Ok(());
        }
        let c = PgConn::open(&self.cfg, Some(self.queues.clone())).await?;
        c.client
            .batch_execute(&format!("LISTEN \"{}\"", self.channel))
            .await
            .map_err(|e| pg_err("LISTEN", e))?;
        *conn = Some(c);
        drop(conn);
        self.queues.poke_all();
        Ok(())
    }

    fn alive(&self) -> bool {
        self.conn.try_lock().map(|c| c.as_ref().is_some_and(PgConn::alive)).unwrap_or(true)
    }
}

/// The lease-table store (`mode=lease`).
pub struct PgLeaseStore {
    cfg: Config,
    table: String,
    sql: LeaseStatements,
    conn: tokio::sync::Mutex<Option<Arc<LeaseConn>>>,
    listener: Arc<Listener>,
}

impl std::fmt::Debug for PgLeaseStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgLeaseStore").field("table", &self.table).finish()
    }
}

impl PgLeaseStore {
    async fn open(cfg: Config, o: &Options) -> Result<Self> {
        let table = format!("\"{}\".\"{}\"", o.schema, o.table);
        let sql = LeaseStatements::new(&o.schema, &o.table);
        let store = PgLeaseStore {
            listener: Arc::new(Listener {
                cfg: cfg.clone(),
                channel: sql.channel.clone(),
                queues: Arc::default(),
                conn: Default::default(),
            }),
            cfg,
            table,
            sql,
            conn: Default::default(),
        };
        let ddl = format!(
            "CREATE TABLE IF NOT EXISTS {} (
                key        text PRIMARY KEY,
                owner      text,
                fence      bigint NOT NULL,
                expires_at timestamptz NOT NULL,
                tickets    bigint NOT NULL DEFAULT 0,
                turn       bigint NOT NULL DEFAULT 0
            );
            DO $$ BEGIN
              IF NOT EXISTS (SELECT 1 FROM information_schema.columns
                             WHERE table_schema = '{schema}' AND table_name = '{name}'
                               AND column_name = 'turn') THEN
                ALTER TABLE {t} ADD COLUMN tickets bigint NOT NULL DEFAULT 0,
                                ADD COLUMN turn bigint NOT NULL DEFAULT 0;
              END IF;
            END $$",
            store.table,
            schema = o.schema,
            name = o.table,
            t = store.table
        );
        let setup = PgConn::open(&store.cfg, None).await?;
        create_schema(&setup.client, &o.schema, &ddl).await?;
        drop(setup);
        store.conn().await?;
        Ok(store)
    }

    /// The live connection, reconnecting (and re-preparing) after a failure.
    async fn conn(&self) -> Result<Arc<LeaseConn>> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref().filter(|c| c.pg.alive()) {
            return Ok(c.clone());
        }
        let pg = PgConn::open(&self.cfg, None).await?;
        // Every statement here looks rows up by key. Statistics taken while the table held a
        // few dozen rows made the planner scan the whole table once per renewed lease (a
        // 2,000-lease renewal took over a second); on this connection, always use the index.
        pg.client
            .batch_execute("SET enable_seqscan = off")
            .await
            .map_err(|e| pg_err("SET enable_seqscan", e))?;
        let prep = |sql: String| {
            let client = &pg.client;
            async move { client.prepare(&sql).await.map_err(|e| pg_err("prepare", e)) }
        };
        let sql = &self.sql;
        let grant = prep(sql.grant.clone()).await?;
        let grant_queued = prep(sql.grant_queued.clone()).await?;
        let renew = prep(sql.renew.clone()).await?;
        let renew_many = prep(sql.renew_many.clone()).await?;
        let release = prep(sql.release.clone()).await?;
        let holders = prep(sql.holders.clone()).await?;
        let c =
            Arc::new(LeaseConn { pg, grant, grant_queued, renew, renew_many, release, holders });
        *slot = Some(c.clone());
        Ok(c)
    }
}

/// The answer to a waiter's attempt.
enum Queued {
    Granted(Grant),
    Busy { holder_expires_in: Duration, ticket: i64 },
}

impl PgLeaseStore {
    async fn grant_queued(&self, req: &AcquireRequest<'_>, ticket: i64) -> Result<Queued> {
        let c = self.conn().await?;
        let sent = Instant::now();
        let row =
            c.pg.client
                .query_one(
                    &c.grant_queued,
                    &[
                        &req.key.as_str(),
                        &req.owner.to_string(),
                        &ms(req.ttl),
                        &ticket,
                        &self.sql.channel,
                    ],
                )
                .await
                .map_err(|e| pg_err("grant", e))?;
        match row.get::<_, Option<i64>>(0) {
            Some(f) => {
                if ticket > 0 {
                    self.listener.queues.taken(req.key.as_str(), row.get(3));
                }
                Ok(Queued::Granted(Grant::new(FenceToken::new(f as u64), sent)))
            }
            None => Ok(Queued::Busy { holder_expires_in: left(row.get(1)), ticket: row.get(2) }),
        }
    }
}

#[async_trait]
impl Store for PgLeaseStore {
    fn guarantees(&self) -> Guarantees {
        Guarantees {
            backend: "postgres",
            kind: LockKind::Lease,
            exclusion: "linearizable (one row per key, updated under its row lock)",
            store_failure: "a committed grant survives a crash (synchronous_commit=on); \
                            promoting an asynchronous standby can lose recent grants and admit \
                            a second holder, whose fence is still larger than the stale \
                            holder's; synchronous replication keeps the grants",
            expiry: "the database's now(); no client clock takes part",
            fence: "per-row max(fence + 1, clock_timestamp() in µs), set by the granting \
                    statement; rows are never deleted",
            fence_repeat: FenceRepeat::ClockBacked,
            failure_admits_second_holder: true,
            waiting: "LISTEN/NOTIFY on release, calling one ticketed waiter per release; else \
                      the holder's expiry",
        }
    }

    async fn try_acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        let c = self.conn().await?;
        let sent = Instant::now();
        let row =
            c.pg.client
                .query_one(&c.grant, &[&req.key.as_str(), &req.owner.to_string(), &ms(req.ttl)])
                .await
                .map_err(|e| pg_err("grant", e))?;
        match row.get::<_, Option<i64>>(0) {
            Some(f) => Ok(Attempt::Granted(Grant::new(FenceToken::new(f as u64), sent))),
            None => Ok(Attempt::Busy { holder_expires_in: Some(left(row.get(1))) }),
        }
    }

    /// Waiting takes a ticket: a release calls the next ticket, and only the waiter holding it
    /// tries at once; the others try when their ticket is called, after a stagger when the
    /// called waiter does not answer, or at the holder's expiry. One attempt per handoff
    /// instead of one per waiter (a NOTIFY reaches every listening connection).
    async fn acquire(&self, req: &AcquireRequest<'_>, until: Option<Instant>) -> Result<Attempt> {
        let Some(until) = until else {
            return within_op_timeout(req, self.try_acquire(req)).await;
        };
        let queues = self.listener.queues.clone();
        let mut rx = queues.subscribe(req.key);
        self.listener.ensure().await?;
        let mut ticket = 0i64;
        loop {
            // Changes from here on may postdate the attempt's answer.
            rx.borrow_and_update();
            let before = queues.state(req.key);
            let attempt = within_op_timeout(req, self.grant_queued(req, ticket)).await?;
            let (holder_expires_in, mine) = match attempt {
                Queued::Granted(g) => return Ok(Attempt::Granted(g)),
                Queued::Busy { holder_expires_in, ticket } => (holder_expires_in, ticket),
            };
            ticket = mine;
            let now = Instant::now();
            if now >= until {
                return Ok(Attempt::Busy { holder_expires_in: Some(holder_expires_in) });
            }
            // At the holder's expiry at the latest (plus a millisecond so the server's clock
            // has passed it), or at the caller's deadline.
            let expiry = (now + holder_expires_in + Duration::from_millis(1)).min(until);
            let mut changed = false;
            loop {
                let st = queues.state(req.key);
                let mut wake = expiry;
                if changed {
                    if st.pokes != before.pokes {
                        break;
                    }
                    if let Some(free) = st.free_since {
                        if st.turn >= ticket {
                            break;
                        }
                        // Not called yet: try anyway if the called waiters do not answer.
                        let ahead = u32::try_from(ticket - st.turn).unwrap_or(u32::MAX).min(20);
                        wake = wake.min(free + STAGGER * ahead);
                    }
                }
                if Instant::now() >= wake {
                    break;
                }
                if !self.listener.alive() && self.listener.ensure().await.is_err() {
                    // No notifications: poll.
                    let t = wake.min(Instant::now() + Duration::from_millis(100));
                    tokio::time::sleep_until(t.into()).await;
                    break;
                }
                tokio::select! {
                    r = rx.changed() => {
                        if r.is_err() {
                            tokio::time::sleep_until(wake.into()).await;
                            break;
                        }
                        changed = true;
                    }
                    _ = tokio::time::sleep_until(wake.into()) => break,
                }
            }
        }
    }

    async fn renew(&self, key: &Key, owner: &OwnerToken, ttl: Duration) -> Result<bool> {
        let c = self.conn().await?;
        let n =
            c.pg.client
                .execute(&c.renew, &[&key.as_str(), &owner.to_string(), &ms(ttl)])
                .await
                .map_err(|e| pg_err("renew", e))?;
        Ok(n == 1)
    }

    async fn renew_many(&self, items: &[RenewItem]) -> Result<Vec<bool>> {
        let c = self.conn().await?;
        let mut out = Vec::with_capacity(items.len());
        for chunk in items.chunks(RENEW_CHUNK) {
            let keys: Vec<&str> = chunk.iter().map(|i| i.key.as_str()).collect();
            let owners: Vec<String> = chunk.iter().map(|i| i.owner.to_string()).collect();
            let ttls: Vec<i64> = chunk.iter().map(|i| ms(i.ttl)).collect();
            let rows =
                c.pg.client
                    .query(&c.renew_many, &[&keys, &owners, &ttls])
                    .await
                    .map_err(|e| pg_err("renew", e))?;
            let done: HashSet<(String, String)> =
                rows.iter().map(|r| (r.get(0), r.get(1))).collect();
            out.extend(
                chunk.iter().zip(owners).map(|(i, o)| done.contains(&(i.key.to_string(), o))),
            );
        }
        Ok(out)
    }

    async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool> {
        let c = self.conn().await?;
        let rows =
            c.pg.client
                .query(&c.release, &[&key.as_str(), &owner.to_string(), &self.sql.channel])
                .await
                .map_err(|e| pg_err("release", e))?;
        let Some(row) = rows.first() else { return Ok(false) };
        // Waiters of this process hear of it without waiting for the notification.
        self.listener.queues.released(key.as_str(), row.get(1));
        Ok(row.get::<_, bool>(0))
    }

    async fn holders(&self, key: Option<&Key>) -> Result<Vec<Holder>> {
        let c = self.conn().await?;
        let rows =
            c.pg.client
                .query(&c.holders, &[&key.map(Key::as_str)])
                .await
                .map_err(|e| pg_err("holders", e))?;
        rows.iter()
            .map(|r| {
                Ok(Holder::new(
                    Key::new(r.get::<_, String>(0))?,
                    r.get::<_, String>(1).parse()?,
                    Some(FenceToken::new(r.get::<_, i64>(2) as u64)),
                    Some(left(r.get(3))),
                ))
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Session advisory locks

/// The advisory-lock key of a string, as the server computes it.
const LOCK_ID: &str = "hashtextextended($1, 0)";
/// Locks one session connection carries at most.
const PER_CONN: usize = 64;

/// The statements the session store prepares (`$1` is the lock name: prefix + key).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionStatements {
    /// → the fence (0 with `fence=none`) when granted, -1 when busy.
    pub try_grant: String,
    /// `$2` lock_timeout (e.g. `250ms`, `0` for none) → the fence, or error 55P03 when the
    /// wait ran out.
    pub wait_grant: String,
    /// → whether this session holds the lock.
    pub verify: String,
    /// → whether the lock was held (and is now released).
    pub unlock: String,
}

/// The session-lock statements for a `postgres://…?mode=session` URL.
pub fn session_statements(url: &str) -> Result<SessionStatements> {
    let (_, o) = parse_url(url)?;
    let seq = o.fence.then(|| format!("\"{}\".leasehold_fence_seq", o.schema));
    Ok(SessionStatements::new(seq.as_deref()))
}

impl SessionStatements {
    fn new(seq: Option<&str>) -> SessionStatements {
        // The sequence is set to max(next value, clock µs), so a promoted standby whose
        // sequence is behind restarts above every fence the old primary issued.
        let fence = seq.map_or("0::bigint".to_owned(), |s| {
            format!("setval('{s}', GREATEST(nextval('{s}'), {CLOCK_US}))")
        });
        SessionStatements {
            try_grant: format!(
                "SELECT CASE WHEN pg_try_advisory_lock({LOCK_ID}) THEN {fence} ELSE -1 END"
            ),
            wait_grant: format!(
                "WITH c AS MATERIALIZED (SELECT set_config('lock_timeout', $2, false) AS v),
                      g AS MATERIALIZED (SELECT pg_advisory_lock({LOCK_ID}) AS l FROM c)
                 SELECT {fence} FROM g"
            ),
            verify: format!(
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
                     AND pid = pg_backend_pid() AND objsubid = 1
                     AND ((classid::bigint << 32) | objid::bigint) = {LOCK_ID})"
            ),
            unlock: format!("SELECT pg_advisory_unlock({LOCK_ID})"),
        }
    }
}

/// A session connection of this store. It carries the locks named in `keys` (held, or
/// reserved by a request in flight); no statement of anyone else ever runs on it.
struct SessionConn {
    pg: PgConn,
    try_grant: Statement,
    wait_grant: Statement,
    verify: Statement,
    ping: Statement,
    unlock: Statement,
    keys: Mutex<HashSet<String>>,
}

impl SessionConn {
    async fn open(cfg: &Config, seq: Option<&str>) -> Result<SessionConn> {
        let pg = PgConn::open(cfg, None).await?;
        let prep = |sql: String| {
            let client = &pg.client;
            async move { client.prepare(&sql).await.map_err(|e| pg_err("prepare", e)) }
        };
        let sql = SessionStatements::new(seq);
        let try_grant = prep(sql.try_grant).await?;
        let wait_grant = prep(sql.wait_grant).await?;
        let verify = prep(sql.verify).await?;
        let ping = prep("SELECT 1".to_owned()).await?;
        let unlock = prep(sql.unlock).await?;
        Ok(SessionConn { pg, try_grant, wait_grant, verify, ping, unlock, keys: Mutex::default() })
    }

    fn keys(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }
}

struct Held {
    key: Key,
    fence: u64,
    conn: Arc<SessionConn>,
}

/// The session advisory-lock store (`mode=session`).
pub struct PgSessionStore {
    cfg: Config,
    prefix: String,
    seq: Option<String>,
    heartbeat: Duration,
    conns: Mutex<Vec<Arc<SessionConn>>>,
    held: Mutex<HashMap<OwnerToken, Held>>,
    undoing: Arc<Undoing>,
}

impl std::fmt::Debug for PgSessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgSessionStore").field("prefix", &self.prefix).finish()
    }
}

/// A lock request in flight on a session connection. If it is abandoned (the acquire future
/// dropped, a timeout, an error), the request is undone on that same connection: a blocking
/// wait is cancelled, then `pg_advisory_unlock` runs after it, so a lock the server granted
/// after we stopped listening is freed at once, and the other locks on the connection are
/// untouched.
struct InFlight {
    conn: Option<Arc<SessionConn>>,
    name: String,
    waiting: bool,
    undoing: Arc<Undoing>,
}

impl InFlight {
    fn conn(&self) -> &Arc<SessionConn> {
        self.conn.as_ref().expect("connection present until settled")
    }

    /// The request was answered: keep the reservation (granted) or drop it (busy).
    fn settle(mut self, granted: bool) -> Arc<SessionConn> {
        let conn = self.conn.take().expect("settled once");
        if !granted {
            conn.keys().remove(&self.name);
        }
        conn
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            conn.pg.kill();
            return;
        };
        let (name, waiting, undoing) = (self.name.clone(), self.waiting, self.undoing.clone());
        undoing.start(&name);
        rt.spawn(async move {
            if waiting {
                let _ = conn.pg.client.cancel_token().cancel_query(NoTls).await;
            }
            // Runs after the abandoned request on the same connection.
            let undone = tokio::time::timeout(
                Duration::from_secs(10),
                conn.pg.client.query_one(&conn.unlock, &[&name]),
            )
            .await;
            if !matches!(undone, Ok(Ok(_))) {
                conn.pg.kill();
            }
            conn.keys().remove(&name);
            undoing.finish(&name);
        });
    }
}

impl PgSessionStore {
    async fn open(cfg: Config, o: &Options) -> Result<Self> {
        if o.pgbouncer_transaction {
            return Err(Error::invalid(
                "mode=session refused: behind PgBouncer in transaction pooling a session \
                 advisory lock stays on a server connection that other clients then reuse; \
                 use mode=lease or the transaction form (with_xact_lock)",
            ));
        }
        let seq = o.fence.then(|| format!("\"{}\".leasehold_fence_seq", o.schema));
        let store = PgSessionStore {
            cfg,
            prefix: o.prefix.clone(),
            seq,
            heartbeat: o.heartbeat,
            conns: Mutex::default(),
            held: Mutex::default(),
            undoing: Arc::default(),
        };
        let pg = PgConn::open(&store.cfg, None).await?;
        if let Some(seq) = &store.seq {
            create_schema(&pg.client, &o.schema, &format!("CREATE SEQUENCE IF NOT EXISTS {seq}"))
                .await?;
        }
        Ok(store)
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

    async fn new_conn(&self) -> Result<Arc<SessionConn>> {
        let conn = Arc::new(SessionConn::open(&self.cfg, self.seq.as_deref()).await?);
        tokio::spawn(heartbeat(Arc::downgrade(&conn), self.heartbeat));
        Ok(conn)
    }

    /// A connection to ask for `name` on, with `name` reserved on it. A connection never
    /// carries the same name twice (advisory locks are re-entrant within a session, so a
    /// second grant there would not exclude anything). `exclusive`: a connection carrying
    /// nothing else, taken out of the shared list (a blocking wait stalls its connection).
    async fn reserve(&self, name: &str, exclusive: bool) -> Result<InFlight> {
        let found = {
            let mut conns = self.conns();
            conns.retain(|c| c.pg.alive());
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
                let c = self.new_conn().await?;
                if !exclusive {
                    self.conns().push(c.clone());
                }
                c
            }
        };
        conn.keys().insert(name.to_owned());
        Ok(InFlight {
            conn: Some(conn),
            name: name.to_owned(),
            waiting: exclusive,
            undoing: self.undoing.clone(),
        })
    }

    /// Gives a connection back to the shared list (after a wait), closing surplus empty ones.
    fn give_back(&self, conn: Arc<SessionConn>) {
        let mut conns = self.conns();
        let empty = conns.iter().filter(|c| c.keys().is_empty()).count();
        if conn.pg.alive() && (!conn.keys().is_empty() || empty < 2) {
            conns.push(conn);
        }
    }

    async fn grant(&self, req: &AcquireRequest<'_>, wait: Option<Duration>) -> Result<Attempt> {
        let name = self.lock_name(req.key);
        let flight = self.reserve(&name, wait.is_some()).await?;
        let sent = Instant::now();
        let c = flight.conn();
        let res = match wait {
            None => c.pg.client.query_one(&c.try_grant, &[&name]).await,
            Some(t) => {
                // 0 means "no timeout" to the server: what an unbounded wait asks.
                let t = if t.as_millis() >= i32::MAX as u128 { 0 } else { ms(t) };
                c.pg.client.query_one(&c.wait_grant, &[&name, &format!("{t}ms")]).await
            }
        };
        let fence: i64 = match res {
            Ok(row) => row.get(0),
            Err(e) if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => -1,
            // Dropping the flight undoes whatever the server did.
            Err(e) => return Err(pg_err("advisory lock", e)),
        };
        let waited = flight.waiting;
        let conn = flight.settle(fence >= 0);
        if waited {
            self.give_back(conn.clone());
        }
        if fence < 0 {
            return Ok(Attempt::Busy { holder_expires_in: None });
        }
        let end = conn.pg.end_signal();
        self.held().insert(*req.owner, Held { key: req.key.clone(), fence: fence as u64, conn });
        Ok(Attempt::Granted(Grant::new(FenceToken::new(fence as u64), sent).with_session_end(end)))
    }
}

/// Pings a connection carrying locks every `every`; a failed or slow ping closes it, which
/// fires `lost()` of every lease on it (through their session ends) before the server could
/// notice the client gone and hand the locks to someone else.
async fn heartbeat(conn: Weak<SessionConn>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        let Some(c) = conn.upgrade() else { return };
        if !c.pg.alive() {
            return;
        }
        if c.keys().is_empty() {
            continue;
        }
        let ok = tokio::time::timeout(every, c.pg.client.query_one(&c.ping, &[])).await;
        if !matches!(ok, Ok(Ok(_))) {
            tracing::warn!("postgres session heartbeat failed: closing the connection");
            c.pg.kill();
            return;
        }
    }
}

#[async_trait]
impl Store for PgSessionStore {
    fn guarantees(&self) -> Guarantees {
        Guarantees {
            backend: "postgres-session",
            kind: LockKind::Session,
            exclusion: "linearizable (the server's lock manager)",
            store_failure: "a server restart or the end of the holder's connection releases \
                            the lock; the holder's lost() fires when that connection ends or a \
                            heartbeat fails",
            expiry: "session: held while the holder's connection lives (heartbeat pings it)",
            fence: if self.seq.is_some() {
                "the sequence leasehold_fence_seq set to max(nextval, clock_timestamp() in µs), \
                 in the granting statement"
            } else {
                "none (fence=none)"
            },
            fence_repeat: if self.seq.is_some() {
                FenceRepeat::ClockBacked
            } else {
                FenceRepeat::NoFence
            },
            // A promoted standby has none of the old primary's locks: while the old primary
            // (cut off, not dead) keeps the holder's session, the standby grants the key again.
            failure_admits_second_holder: true,
            waiting: "server-side blocking pg_advisory_lock under lock_timeout (FIFO)",
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
        let row = conn
            .pg
            .client
            .query_one(&conn.verify, &[&self.lock_name(key)])
            .await
            .map_err(|e| pg_err("verifying the lock", e))?;
        Ok(row.get(0))
    }

    async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool> {
        let held = {
            let mut map = self.held();
            match map.get(owner) {
                Some(h) if h.key == *key => map.remove(owner),
                _ => None,
            }
        };
        // Session locks belong to a connection of this process; anyone else's are not ours.
        let Some(h) = held else { return Ok(false) };
        let name = self.lock_name(key);
        // An abandoned request for this key must not grab what we free.
        self.undoing.settled(&name, Duration::from_secs(10)).await;
        match h.conn.pg.client.query_one(&h.conn.unlock, &[&name]).await {
            Ok(row) if row.get::<_, bool>(0) => {
                h.conn.keys().remove(&name);
                Ok(true)
            }
            // Not held any more, or no answer: the connection is closed, never reused.
            Ok(_) => {
                h.conn.pg.kill();
                Ok(false)
            }
            Err(e) => {
                h.conn.pg.kill();
                Err(pg_err("advisory unlock", e))
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
            // Held by another process? The server knows its session, not its owner token.
            let pg = PgConn::open(&self.cfg, None).await?;
            let row = pg
                .client
                .query_one(
                    &format!(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
                           AND objsubid = 1
                           AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                           AND ((classid::bigint << 32) | objid::bigint) = {LOCK_ID}"
                    ),
                    &[&self.lock_name(key)],
                )
                .await
                .map_err(|e| pg_err("holders", e))?;
            if row.get::<_, i64>(0) > 0 {
                return Err(Error::Busy { key: key.to_string() });
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
}

/// Opens a `postgres://` store in the form its URL asks for.
pub async fn connect(url: &str) -> Result<Arc<dyn Store>> {
    let (cfg, o) = parse_url(url)?;
    Ok(match o.mode {
        Mode::Lease => Arc::new(PgLeaseStore::open(cfg, &o).await?),
        Mode::Session => Arc::new(PgSessionStore::open(cfg, &o).await?),
    })
}

// ---------------------------------------------------------------------------------------------
// Transaction locks

/// Takes `pg_advisory_xact_lock(hashtextextended(KEY, 0))` in `tx`, waiting on the server
/// (bounded by the session's `lock_timeout`, if set). The lock ends when `tx` commits or rolls
/// back; there is no release call and nothing to leak into a pool.
pub async fn xact_lock(tx: &Transaction<'_>, key: &Key) -> Result<()> {
    tx.execute(&format!("SELECT pg_advisory_xact_lock({LOCK_ID})::text"), &[&key.as_str()])
        .await
        .map_err(|e| match e.code() {
        Some(c) if *c == SqlState::LOCK_NOT_AVAILABLE => Error::Busy { key: key.to_string() },
        _ => pg_err("pg_advisory_xact_lock", e),
    })?;
    Ok(())
}

/// Like [`xact_lock`] without waiting: `Ok(false)` when another session or transaction holds
/// the key.
pub async fn try_xact_lock(tx: &Transaction<'_>, key: &Key) -> Result<bool> {
    let row = tx
        .query_one(&format!("SELECT pg_try_advisory_xact_lock({LOCK_ID})"), &[&key.as_str()])
        .await
        .map_err(|e| pg_err("pg_try_advisory_xact_lock", e))?;
    Ok(row.get(0))
}

/// Runs `work` in a new transaction on `client` that first takes the transaction lock on
/// `key` (waiting at most `wait`, via `SET LOCAL lock_timeout`; `None` waits as long as the
/// server lets it). Commits if `work` returns `Ok`, rolls back otherwise; either way the lock
/// ends with the transaction. [`Error::Busy`] if the wait ran out.
pub async fn with_xact_lock<T, E>(
    client: &mut Client,
    key: &Key,
    wait: Option<Duration>,
    work: impl AsyncFnOnce(&Transaction<'_>) -> std::result::Result<T, E>,
) -> std::result::Result<T, E>
where
    E: From<Error>,
{
    let tx = client.transaction().await.map_err(|e| pg_err("BEGIN", e))?;
    if let Some(w) = wait {
        let w = if w.is_zero() { 1 } else { ms(w) };
        tx.batch_execute(&format!("SET LOCAL lock_timeout = '{w}ms'"))
            .await
            .map_err(|e| pg_err("SET LOCAL lock_timeout", e))?;
    }
    xact_lock(&tx, key).await?;
    let out = work(&tx).await;
    match out {
        Ok(v) => {
            tx.commit().await.map_err(|e| pg_err("COMMIT", e))?;
            Ok(v)
        }
        Err(e) => {
            // Dropping the transaction rolls it back; say so explicitly to surface errors.
            let _ = tx.rollback().await;
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The notification formats: `r TURN KEY` calls a ticket and frees the key, `g TURN KEY`
    /// says the called waiter took it, and a bare key (a release by a version without the
    /// queue) makes every waiter look again. Keys may contain spaces.
    #[test]
    fn queue_notifications() {
        let q = Queues::default();
        let key = Key::new("a key").unwrap();
        let _rx = q.subscribe(&key);
        q.notified("r 3 a key");
        let s = q.state(&key);
        assert_eq!(s.turn, 3);
        assert!(s.free_since.is_some());
        q.notified("g 2 a key");
        let s = q.state(&key);
        assert_eq!((s.turn, s.free_since, s.pokes), (3, None, 0), "turns never go back");
        q.notified("a key");
        assert_eq!(q.state(&key).pokes, 1);
        q.notified("r x a key");
        assert_eq!(q.state(&key).pokes, 1, "a malformed payload names no waited-on key");
        q.notified("r 9 other");
        assert_eq!(q.state(&key).turn, 3);
    }
}
