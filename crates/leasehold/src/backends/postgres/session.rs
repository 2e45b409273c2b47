//! Session advisory locks (`mode=session`): a dedicated connection per lock, the server's
//! blocking wait.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Config, NoTls, Statement};

use super::session_sql::{LOCK_ID, SessionStatements};
use super::{Options, PgConn, create_schema, ms, pg_err, server_bounds};
use crate::backends::Limits;
use crate::backends::session::{Conns, SessionConnection, Undoing};
use crate::store::{AcquireRequest, Attempt, Grant};
use crate::{
    Error, FenceRepeat, FenceToken, Guarantees, Holder, HolderInfo, Key, LockKind, OwnerToken,
    Result, Store,
};

/// A session connection of this store. It carries the locks named in `keys` (held, or
/// reserved by a request in flight); no statement of anyone else ever runs on it.
struct SessionConn {
    pg: PgConn,
    try_grant: Statement,
    wait_grant: Statement,
    verify: Statement,
    ping: Statement,
    unlock: Statement,
    /// The reader's statements: try, wait, unlock.
    shared: [Statement; 3],
    keys: Mutex<HashSet<String>>,
}

impl SessionConn {
    /// A connection within `connect`, its lock waits bounded by `op` in the server (a blocking
    /// wait sets its own for its statement), named after `info` in `pg_stat_activity` (unless
    /// the URL names it: `info` is then `None`).
    pub(super) async fn open(
        cfg: &Config,
        seq: Option<&str>,
        (connect, op): (Duration, Duration),
        info: Option<&HolderInfo>,
    ) -> Result<SessionConn> {
        let mut cfg = cfg.clone();
        if let Some(i) = info {
            cfg.application_name(application_name(i));
        }
        let pg = PgConn::open(&cfg, connect, &server_bounds(op, false), None).await?;
        let sql = SessionStatements::new(seq);
        if !sql.clock_back.is_empty() {
            let setup = format!("{}; {}", sql.setup, sql.clock_back);
            pg.bounded(
                "moving the fence sequence up to the clock",
                connect,
                pg.client.batch_execute(&setup),
            )
            .await?;
        }
        let prepared = async {
            let client = &pg.client;
            Ok::<_, tokio_postgres::Error>([
                client.prepare(&sql.try_grant).await?,
                client.prepare(&sql.wait_grant).await?,
                client.prepare(&sql.verify).await?,
                client.prepare("SELECT 1").await?,
                client.prepare(&sql.unlock).await?,
                client.prepare(&sql.try_grant_shared).await?,
                client.prepare(&sql.wait_grant_shared).await?,
                client.prepare(&sql.unlock_shared).await?,
            ])
        };
        let [try_grant, wait_grant, verify, ping, unlock, try_s, wait_s, unlock_s] =
            pg.bounded("prepare", connect, prepared).await?;
        let shared = [try_s, wait_s, unlock_s];
        Ok(SessionConn {
            pg,
            try_grant,
            wait_grant,
            verify,
            ping,
            unlock,
            shared,
            keys: Mutex::default(),
        })
    }

    /// The unlock statement for a grant in `mode`.
    fn unlock_for(&self, mode: crate::Mode) -> &Statement {
        if mode == crate::Mode::Shared { &self.shared[2] } else { &self.unlock }
    }
}

impl SessionConnection for SessionConn {
    fn keys(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn alive(&self) -> bool {
        self.pg.alive()
    }
}

type Held = super::super::session::Held<SessionConn>;

/// `leasehold PID@HOST COMMAND`, as `pg_stat_activity` shows a session connection (the
/// server keeps 63 bytes).
fn application_name(i: &HolderInfo) -> String {
    let mut name = format!("leasehold {}@{} {}", i.pid, i.host, i.command);
    let mut end = name.len().min(63);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name.truncate(end);
    name
}

/// The session advisory-lock store (`mode=session`).
pub struct PostgresSessionStore {
    cfg: Config,
    /// The connect limit; the op timeout as set last, in ms.
    connect: Duration,
    op_ms: std::sync::atomic::AtomicU64,
    prefix: String,
    seq: Option<String>,
    heartbeat: Duration,
    /// Whether the URL names the connections (`application_name`).
    named: bool,
    conns: Conns<SessionConn>,
    held: super::super::session::Grants<SessionConn>,
    undoing: Arc<Undoing>,
}

impl std::fmt::Debug for PostgresSessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresSessionStore").field("prefix", &self.prefix).finish()
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
    mode: crate::Mode,
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
        let mode = self.mode;
        undoing.start(&name);
        rt.spawn(async move {
            if waiting {
                let _ = conn.pg.client.cancel_token().cancel_query(NoTls).await;
            }
            // Runs after the abandoned request on the same connection.
            let undone = tokio::time::timeout(
                Duration::from_secs(10),
                conn.pg.client.query_one(conn.unlock_for(mode), &[&name]),
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

impl PostgresSessionStore {
    pub(super) async fn open(cfg: Config, o: &Options, limits: Limits) -> Result<Self> {
        if o.pgbouncer_transaction {
            return Err(Error::invalid(
                "mode=session refused: behind PgBouncer in transaction pooling a session \
                 advisory lock stays on a server connection that other clients then reuse; \
                 use mode=lease or the transaction form (with_xact_lock)",
            ));
        }
        let seq = o.fence.then(|| format!("\"{}\".leasehold_fence_seq", o.schema));
        let store = PostgresSessionStore {
            cfg,
            connect: limits.connect,
            op_ms: std::sync::atomic::AtomicU64::new(ms(limits.op) as u64),
            prefix: o.prefix.clone(),
            seq,
            heartbeat: o.heartbeat,
            named: o.application_name,
            conns: Conns::default(),
            held: Default::default(),
            undoing: Arc::default(),
        };
        let pg =
            PgConn::open(&store.cfg, limits.connect, &server_bounds(limits.op, true), None).await?;
        if let Some(seq) = &store.seq {
            let ddl = format!("CREATE SEQUENCE IF NOT EXISTS {seq}");
            let create = create_schema(&pg.client, &o.schema, &ddl);
            crate::limits::within(limits.connect, || "creating the fence sequence".into(), create)
                .await?;
        }
        Ok(store)
    }

    fn op(&self) -> Duration {
        Duration::from_millis(self.op_ms.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn lock_name(&self, key: &Key) -> String {
        format!("{}{}", self.prefix, key.as_str())
    }

    async fn new_conn(&self, info: Option<&HolderInfo>) -> Result<Arc<SessionConn>> {
        let bounds = (self.connect, self.op());
        let info = info.filter(|_| !self.named);
        let conn = Arc::new(SessionConn::open(&self.cfg, self.seq.as_deref(), bounds, info).await?);
        tokio::spawn(heartbeat(Arc::downgrade(&conn), self.heartbeat));
        Ok(conn)
    }

    /// A connection to ask for `name` on, with `name` reserved on it ([`Conns::reserve`]:
    /// never one already carrying it, as advisory locks are re-entrant within a session),
    /// as a request in flight.
    async fn reserve(
        &self,
        name: &str,
        exclusive: bool,
        info: Option<&HolderInfo>,
        mode: crate::Mode,
    ) -> Result<InFlight> {
        let conn = self.conns.reserve(name, exclusive, || self.new_conn(info)).await?;
        Ok(InFlight {
            conn: Some(conn),
            name: name.to_owned(),
            mode,
            waiting: exclusive,
            undoing: self.undoing.clone(),
        })
    }

    async fn grant(&self, req: &AcquireRequest<'_>, wait: Option<Duration>) -> Result<Attempt> {
        let name = self.lock_name(req.key);
        let flight = self.reserve(&name, wait.is_some(), req.info, req.mode).await?;
        let sent = Instant::now();
        let c = flight.conn();
        let shared = req.mode == crate::Mode::Shared;
        let (try_grant, wait_grant) = match shared {
            true => (&c.shared[0], &c.shared[1]),
            false => (&c.try_grant, &c.wait_grant),
        };
        let res = match wait {
            None => c.pg.client.query_one(try_grant, &[&name]).await,
            Some(t) => {
                // 0 means "no timeout" to the server: what an unbounded wait asks.
                let t = if t.as_millis() >= i32::MAX as u128 { 0 } else { ms(t) };
                c.pg.client.query_one(wait_grant, &[&name, &format!("{t}ms")]).await
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
            self.conns.give_back(conn.clone());
        }
        if fence < 0 {
            return Ok(Attempt::Busy { holder_expires_in: None });
        }
        let end = conn.pg.end_signal();
        let held = Held {
            key: req.key.clone(),
            mode: req.mode,
            fence: FenceToken::from_i64(fence).get(),
            info: req.info.cloned(),
            conn,
        };
        self.held.insert(*req.owner, held);
        Ok(Attempt::Granted(Grant::new(FenceToken::from_i64(fence), sent).with_session_end(end)))
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
impl Store for PostgresSessionStore {
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
                "nextval of the sequence leasehold_fence_seq in the granting statement; each \
                 session connection first moves the sequence up to clock_timestamp() in µs"
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
            holders_know_fence: true,
            // This process's grants only: another process's lock is `Busy` in `holders`.
            holders_know_info: true,
            waiting: "server-side blocking pg_advisory_lock under lock_timeout (FIFO)",
            primitives: crate::Primitives {
                permits: false,
                note: "readers with pg_advisory_lock_shared, fenced from the sequence; the \
                       server's lock queue gives writers preference (a reader, waiting or \
                       trying, is refused while a writer waits in pg_advisory_lock); semaphores \
                       are refused (an advisory lock has nowhere to record the permit count \
                       atomically with the grant: use mode=lease); several keys",
                ..crate::Primitives::ALL
            },
        }
    }

    async fn try_acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        self.grant(req, None).await
    }

    async fn acquire(&self, req: &AcquireRequest<'_>, until: Option<Instant>) -> Result<Attempt> {
        crate::store::acquire_in_server(req, until, |wait| self.grant(req, wait)).await
    }

    async fn renew(&self, key: &Key, owner: &OwnerToken, _ttl: Duration) -> Result<bool> {
        let Some(conn) = self.held.conn(key, owner) else { return Ok(false) };
        if !conn.pg.alive() {
            // The session ended, and the server dropped its locks with it.
            return Ok(false);
        }
        let name = self.lock_name(key);
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&name];
        let verify = conn.pg.client.query_one(&conn.verify, &params);
        let row = conn.pg.bounded("verifying the lock", self.op(), verify).await?;
        Ok(row.get(0))
    }

    async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool> {
        let held = self.held.take(key, owner);
        // Session locks belong to a connection of this process; anyone else's are not ours.
        let Some(h) = held else { return Ok(false) };
        if !h.conn.pg.alive() {
            // The session ended, and the server dropped the lock with it: not ours any more.
            return Ok(false);
        }
        // The entry is gone from the map: if this future is dropped before the unlock is
        // answered, nothing could release the lock any more, so the connection is closed
        // (ending the session, and the lock with it).
        let mut unanswered = KillOnDrop(Some(h.conn.clone()));
        let name = self.lock_name(key);
        // An abandoned request for this key must not grab what we free.
        self.undoing.settled(&name, Duration::from_secs(10)).await;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&name];
        let unlock = h.conn.pg.client.query_one(h.conn.unlock_for(h.mode), &params);
        let answer = tokio::time::timeout(self.op().mul_f64(0.9), unlock).await;
        unanswered.0 = None;
        let Ok(answer) = answer else {
            // No answer: the connection is closed, ending the session and the lock with it.
            h.conn.pg.kill();
            return Err(Error::UnknownOutcome(format!(
                "postgres advisory unlock of {key:?} got no answer; its connection is closed"
            )));
        };
        match answer {
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

    fn set_op_timeout(&self, op_timeout: Duration) {
        self.op_ms.store(ms(op_timeout) as u64, std::sync::atomic::Ordering::Relaxed);
    }

    async fn holders(&self, key: Option<&Key>) -> Result<Vec<Holder>> {
        let out = self.held.holders(key);
        if let Some(key) = key
            && out.is_empty()
        {
            // Held by another process? The server knows its session, not its owner token.
            let op = self.op();
            let pg = PgConn::open(&self.cfg, self.connect, &server_bounds(op, true), None).await?;
            let name = self.lock_name(key);
            let sql = format!(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
                   AND objsubid = 1
                   AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                   AND ((classid::bigint << 32) | objid::bigint) = {LOCK_ID}"
            );
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&name];
            let look = pg.client.query_one(&sql, &params);
            let row = pg.bounded("holders", op, look).await?;
            if row.get::<_, i64>(0) > 0 {
                return Err(Error::Busy { key: key.clone() });
            }
        }
        Ok(out)
    }
}

/// Closes a session connection when dropped armed (a release cancelled mid-request).
struct KillOnDrop(Option<Arc<SessionConn>>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            c.pg.kill();
        }
    }
}
