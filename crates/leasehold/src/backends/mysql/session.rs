//! `GET_LOCK` session locks (`mode=session`), each on a connection of this store's own.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use tokio::sync::{oneshot, watch};

use super::session_fences as fences;
use super::{LOCK_NAME, Options, my_err, new_conn};
use crate::backends::Limits;
use crate::backends::session::{Conns, SessionConnection, Undoing};
use crate::store::{AcquireRequest, Attempt, Grant, SessionEnd};
use crate::{
    Error, FenceRepeat, FenceToken, Guarantees, Holder, Key, LockKind, OwnerToken, Result, Store,
};

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

impl SessionConnection for SessionConn {
    fn keys(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn alive(&self) -> bool {
        !self.dead.load(Ordering::SeqCst)
    }
}

impl SessionConn {
    pub(super) async fn open(
        opts: &Opts,
        connect: Duration,
        heartbeat: Duration,
        alarm: watch::Receiver<u64>,
    ) -> Result<Arc<SessionConn>> {
        let conn = new_conn(opts, connect).await?;
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

type Held = super::super::session::Held<SessionConn>;

/// The `GET_LOCK` store (`mode=session`).
pub struct MysqlSessionStore {
    opts: Opts,
    /// The connect limit; the op timeout as set last (ms), bounding the fence bump's lock
    /// waits in the server.
    connect: Duration,
    op_ms: std::sync::atomic::AtomicU64,
    prefix: String,
    fences: Option<String>,
    /// The table of the lock prefixes granting through `fences` (`session_fences.rs`).
    prefixes: String,
    heartbeat: Duration,
    conns: Conns<SessionConn>,
    held: super::super::session::Grants<SessionConn>,
    undoing: Arc<Undoing>,
    /// Bumped by the sentinel when its connection ends; every heartbeat pings at once.
    alarm: watch::Sender<u64>,
    sentinel: tokio::task::AbortHandle,
    /// Deletes fence rows idle past the horizon while the store lives (`prune.rs`).
    _pruner: Option<super::prune::Pruner>,
}

impl Drop for MysqlSessionStore {
    fn drop(&mut self) {
        self.sentinel.abort();
    }
}

/// A connection that sits in `SELECT SLEEP(…)` for the store's lifetime. MySQL connections
/// are only read when a request is in flight, so a lock holder would learn that the server
/// restarted (and dropped its locks) only at its next heartbeat, after a successor may have
/// taken them; the sentinel's read ends the moment the server closes its connections, and it
/// makes every heartbeat ping at once.
async fn sentinel(opts: Opts, connect: Duration, alarm: watch::Sender<u64>) {
    loop {
        if let Ok(mut c) = new_conn(&opts, connect).await {
            let _ = c.query_drop("DO SLEEP(31536000)").await;
        }
        alarm.send_modify(|n| *n += 1);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl std::fmt::Debug for MysqlSessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MysqlSessionStore").field("prefix", &self.prefix).finish()
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

impl MysqlSessionStore {
    pub(super) async fn open(opts: Opts, o: &Options, limits: Limits) -> Result<Self> {
        let fences = o.fence.then(|| format!("`{}_fences`", o.table));
        if let Some(t) = &fences {
            let mut c = new_conn(&opts, limits.connect).await?;
            let create = fences::create(&mut c, t, &o.table, &o.prefix);
            crate::limits::within(limits.connect, || "creating the fence table".into(), create)
                .await?;
            let _ = c.disconnect().await;
        } else {
            // Checks the credentials and the database now, not at the first acquire.
            let c = new_conn(&opts, limits.connect).await?;
            let _ = c.disconnect().await;
        }
        let pruner = fences.as_ref().map(|t| {
            let sweeps = vec![fences::sweep(t, &o.table, &o.prefix, o.horizon, limits.op)];
            super::prune::Pruner::start(opts.clone(), limits.connect, o.horizon, sweeps)
        });
        let alarm = watch::Sender::new(0);
        let sentinel =
            tokio::spawn(sentinel(opts.clone(), limits.connect, alarm.clone())).abort_handle();
        Ok(MysqlSessionStore {
            connect: limits.connect,
            op_ms: std::sync::atomic::AtomicU64::new(limits.op.as_millis() as u64),
            opts,
            prefix: o.prefix.clone(),
            fences,
            prefixes: fences::prefixes_table(&o.table),
            heartbeat: o.heartbeat,
            conns: Conns::default(),
            held: Default::default(),
            undoing: Arc::default(),
            alarm,
            sentinel,
            _pruner: pruner,
        })
    }

    fn lock_name(&self, key: &Key) -> String {
        format!("{}{}", self.prefix, key.as_str())
    }

    /// A connection for `name`, with `name` reserved on it ([`Conns::reserve`]: never one
    /// already carrying it, as `GET_LOCK` is re-entrant within a session).
    async fn reserve(&self, name: &str, exclusive: bool) -> Result<Arc<SessionConn>> {
        let open = || {
            let alarm = self.alarm.subscribe();
            SessionConn::open(&self.opts, self.connect, self.heartbeat, alarm)
        };
        self.conns.reserve(name, exclusive, open).await
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
        let connect = self.connect;
        let op = Duration::from_millis(self.op_ms.load(Ordering::Relaxed));
        tokio::spawn(async move {
            let on = (&conn, &opts, connect, op);
            let _ = tx.send(grant_on(on, &name, wait, fences.as_deref(), &key, abandon_rx).await);
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
            self.conns.give_back(conn.clone());
        }
        let Some(fence) = fence else { return Ok(Attempt::Busy { holder_expires_in: None }) };
        let end = conn.end_signal();
        let held = Held {
            key: req.key.clone(),
            mode: crate::Mode::Exclusive,
            fence,
            info: req.info.cloned(),
            conn,
        };
        self.held.insert(*req.owner, held);
        Ok(Attempt::Granted(Grant::new(FenceToken::new(fence), sent).with_session_end(end)))
    }
}

/// The session-lock statements (`?` parameters), as the store sends them (feature `tools`).
#[cfg(feature = "tools")]
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

/// The session-lock statements, the fence counters beside lease table `table` (none
/// without `fence`). The lock name is the `prefix` option followed by the key.
#[cfg(feature = "tools")]
pub(super) fn session_statements(table: &str, fence: bool) -> SessionStatements {
    SessionStatements {
        get_lock: format!("SELECT GET_LOCK({LOCK_NAME}, ?)"),
        fence: fence
            .then(|| fences::bump_sql(&format!("`{table}_fences`"), crate::DEFAULT_OP_TIMEOUT)),
        release_lock: format!("SELECT RELEASE_LOCK({LOCK_NAME})"),
    }
}

/// `GET_LOCK` on `conn`, then the fence bump (its lock waits bounded by `op`) while holding
/// it. `Ok(None)`: busy. `opts` and the connect limit open the side connection that
/// interrupts an abandoned wait.
async fn grant_on(
    (conn, opts, connect, op): (&Arc<SessionConn>, &Opts, Duration, Duration),
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
            if let Ok(mut side) = new_conn(opts, connect).await {
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
    c.exec_drop(fences::bump_sql(t, op), (key.as_str().as_bytes(),))
        .await
        .map_err(|e| my_err("fence", e))?;
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
impl Store for MysqlSessionStore {
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
                 the grant, while the lock is held; a free key's row whose fence is older than \
                 the horizon (horizon=, a day by default) is deleted by the store's pruning \
                 task, and the next fence starts from the clock, above it"
            } else {
                "none (fence=none)"
            },
            fence_repeat: if self.fences.is_some() {
                FenceRepeat::ClockBacked
            } else {
                FenceRepeat::NoFence
            },
            failure_admits_second_holder: true,
            holders_know_fence: true,
            // This process's grants only: another process's lock is `Busy` in `holders`.
            holders_know_info: true,
            waiting: "server-side blocking GET_LOCK(name, timeout)",
            primitives: crate::Primitives {
                note: "mutex only: GET_LOCK has no shared mode, so readers are refused, and no \
                       place to record a semaphore's permit count with the grant, so \
                       semaphores are refused (use mode=lease for both); several keys",
                ..crate::Primitives::MUTEX
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
        let v = conn
            .scalar(
                &format!("SELECT IS_USED_LOCK({LOCK_NAME}) = CONNECTION_ID()"),
                name_params(&self.lock_name(key)),
            )
            .await?;
        Ok(v == Some(1))
    }

    async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool> {
        let held = self.held.take(key, owner);
        let Some(h) = held else { return Ok(false) };
        if !h.conn.alive() {
            // The session ended, and the server dropped the lock with it: not ours any more.
            return Ok(false);
        }
        // Out of the map: a release dropped before its answer closes the connection (ending
        // the session and its lock), since nothing could release it any more.
        let mut unanswered = KillOnDrop(Some(h.conn.clone()));
        let name = self.lock_name(key);
        self.undoing.settled(&name, Duration::from_secs(10)).await;
        let r =
            h.conn.scalar(&format!("SELECT RELEASE_LOCK({LOCK_NAME})"), name_params(&name)).await;
        unanswered.0 = None;
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

    fn set_op_timeout(&self, op_timeout: Duration) {
        let ms = op_timeout.as_millis() as u64;
        self.op_ms.store(ms, Ordering::Relaxed);
    }

    async fn forget(&self, key: &Key) -> Result<()> {
        let Some(t) = &self.fences else { return Ok(()) };
        let mut c = new_conn(&self.opts, self.connect).await?;
        let r = fences::forget(&mut c, t, &self.prefixes, &self.prefix, key).await;
        let _ = c.disconnect().await;
        r
    }

    async fn holders(&self, key: Option<&Key>) -> Result<Vec<Holder>> {
        let out = self.held.holders(key);
        if let Some(key) = key
            && out.is_empty()
        {
            let mut c = new_conn(&self.opts, self.connect).await?;
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
            c.kill("release abandoned before its answer");
        }
    }
}
