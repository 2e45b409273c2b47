//! The lease table (`mode=lease`, the default).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Pool};

use super::{CLOCK_US, Options, RENEW_CHUNK, bounded_verb, connect_err, my_err, us};
use crate::backends::Limits;
use crate::backends::session::Undoing;
use crate::store::{AcquireRequest, Attempt, Grant, RenewItem};
use crate::{
    Error, FenceRepeat, FenceToken, Guarantees, Holder, HolderInfo, Key, LockKind, OwnerToken,
    Result, Store,
};

mod forget;
mod shared;

/// The lease-table statements (`?` parameters), for `leasehold bench`, which runs the very
/// same text through the raw client (feature `tools`).
#[cfg(feature = "tools")]
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LeaseStatements {
    /// key, owner, TTL in µs, the holder's info line (or NULL) → affected rows 1 (first
    /// grant) or 2 (granted), with the fence in `LAST_INSERT_ID`; 0 (busy).
    pub grant: String,
    /// TTL in µs, key, owner → 1 row iff renewed.
    pub renew: String,
    /// key, owner → 1 row iff released while live.
    pub release: String,
}

/// The lease-table statements for lease table `table`.
#[cfg(feature = "tools")]
pub(super) fn lease_statements(table: &str) -> LeaseStatements {
    let s = LeaseSql::new(table, crate::DEFAULT_OP_TIMEOUT);
    LeaseStatements { grant: s.grant, renew: s.renew, release: s.release }
}

/// The lease-table store (`mode=lease`).
pub struct MysqlStore {
    pool: Pool,
    /// The statements, bounded in the server by the op timeout (rebuilt when it changes).
    sql: std::sync::RwLock<Arc<LeaseSql>>,
    /// The connect limit.
    connect: Duration,
    /// Keys with a grant statement in flight (see `try_acquire`).
    granting: Arc<Undoing>,
    /// The per-key doorbells waiting acquisitions queue on.
    bells: super::doorbell::Doorbell,
    /// The readers', slots' and semaphores' tables beside the lease table.
    prims: Arc<shared::Tables>,
    /// Waiting writers of this store whose intent is recorded on their key's row.
    intents: Mutex<HashSet<OwnerToken>>,
    /// Deletes rows idle past the horizon while the store lives (`prune.rs`).
    _pruner: super::prune::Pruner,
}

impl std::fmt::Debug for MysqlStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MysqlStore").field("table", &self.sql().table).finish()
    }
}

struct LeaseSql {
    table: String,
    /// The op timeout the statements are bounded by.
    op: Duration,
    grant: String,
    busy_left: String,
    renew: String,
    release: String,
    release_expired: String,
}

impl LeaseSql {
    fn new(table: &str, op: Duration) -> LeaseSql {
        let t = format!("`{table}`");
        const NOW: &str = "UTC_TIMESTAMP(6)";
        let [insert, select, update] =
            ["INSERT", "SELECT", "UPDATE"].map(|v| bounded_verb(v, op, true));
        // Free for an exclusive grant: no live holder, no live reader.
        let free = format!("(owner IS NULL OR expires_at <= {NOW}) AND {}", shared::NO_READERS);
        LeaseSql {
            op,
            // Assignments run left to right and see earlier ones: the fence and owner are
            // decided on the old row; expires_at follows the owner.
            grant: format!(
                "{insert} INTO {t} (lock_key, owner, fence, expires_at, info)
                 VALUES (?, ?, LAST_INSERT_ID({CLOCK_US}), {NOW} + INTERVAL ? MICROSECOND, ?)
                 ON DUPLICATE KEY UPDATE
                   fence = IF({free}, LAST_INSERT_ID(GREATEST(fence + 1, {CLOCK_US})), fence),
                   info = IF({free}, VALUES(info), info),
                   owner = IF({free}, VALUES(owner), owner),
                   expires_at = IF(owner <=> VALUES(owner), VALUES(expires_at), expires_at)"
            ),
            busy_left: format!(
                "{select} GREATEST(0, TIMESTAMPDIFF(MICROSECOND, {NOW},
                                   GREATEST(expires_at, COALESCE(shared_until, expires_at))))
                 FROM {t} WHERE lock_key = ?"
            ),
            renew: format!(
                "{update} {t} SET expires_at = {NOW} + INTERVAL ? MICROSECOND, renewals = renewals + 1
                 WHERE lock_key = ? AND owner = ? AND expires_at > {NOW}"
            ),
            release: format!(
                "{update} {t} SET owner = NULL, expires_at = {NOW}
                 WHERE lock_key = ? AND owner = ? AND expires_at > {NOW}"
            ),
            release_expired: format!(
                "{update} {t} SET owner = NULL WHERE lock_key = ? AND owner = ?"
            ),
            table: t,
        }
    }
}

impl MysqlStore {
    pub(super) async fn open(opts: Opts, o: &Options, limits: Limits) -> Result<Self> {
        let sql = LeaseSql::new(&o.table, limits.op);
        let sweeps = forget::sweeps(&shared::Tables::new(&o.table), o.horizon, limits.op);
        let pruner = super::prune::Pruner::start(opts.clone(), limits.connect, o.horizon, sweeps);
        // Our statements leave no session state behind, and a reset on every return to the
        // pool would cost a round trip and drop the prepared-statement cache.
        let pool_opts = opts.pool_opts().clone().with_reset_connection(false);
        let store = MysqlStore {
            pool: Pool::new(OptsBuilder::from_opts(opts.clone()).pool_opts(pool_opts)),
            granting: Arc::default(),
            prims: Arc::new(shared::Tables::new(&o.table)),
            intents: Mutex::default(),
            sql: std::sync::RwLock::new(Arc::new(sql)),
            bells: super::doorbell::Doorbell::new(opts.clone(), limits.connect, &o.table),
            connect: limits.connect,
            _pruner: pruner,
        };
        // The first connection only: a pool that waits for a free connection later is
        // not a sign of another service at the address.
        let first = async { store.pool.get_conn().await.map_err(super::connect_err) };
        let first = super::guarded(&opts, first);
        let mut c =
            crate::limits::within(store.connect, || "connecting to mysql".into(), first).await?;
        let t = &store.sql().table;
        let create = async {
            c.query_drop(format!(
                "CREATE TABLE IF NOT EXISTS {t} (
                    lock_key   VARBINARY(512) NOT NULL PRIMARY KEY,
                    owner      VARBINARY(64) NULL,
                    fence      BIGINT UNSIGNED NOT NULL,
                    expires_at DATETIME(6) NOT NULL,
                    renewals   BIGINT UNSIGNED NOT NULL DEFAULT 0,
                    info       VARBINARY(1024) NULL
                ) ENGINE = InnoDB"
            ))
            .await
            .map_err(|e| my_err("creating the lease table", e))?;
            // Tables made by a version without `info`.
            let has: Option<i64> = c
                .exec_first(
                    "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()
                       AND table_name = ? AND column_name = 'info'",
                    (&o.table,),
                )
                .await
                .map_err(|e| my_err("reading the lease table's columns", e))?;
            if has == Some(0) {
                match c
                    .query_drop(format!("ALTER TABLE {t} ADD COLUMN info VARBINARY(1024) NULL"))
                    .await
                {
                    // 1060: another process added it first.
                    Err(mysql_async::Error::Server(e)) if e.code == 1060 => {}
                    r => r.map_err(|e| my_err("adding the lease table's info column", e))?,
                }
            }
            store.prims.create(&mut c, &o.table).await?;
            Ok::<_, Error>(())
        };
        crate::limits::within(store.connect, || "creating the mysql lease table".into(), create)
            .await?;
        Ok(store)
    }

    fn sql(&self) -> Arc<LeaseSql> {
        self.sql.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    async fn conn(&self) -> Result<Conn> {
        let get = async { self.pool.get_conn().await.map_err(connect_err) };
        crate::limits::within(self.connect, || "connecting to mysql".into(), get).await
    }
}

#[async_trait]
impl Store for MysqlStore {
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
                    statement; a row idle past the horizon (horizon=, a day by default) is \
                    deleted by the store's pruning task, and the key's next fence starts from \
                    the clock, above it",
            fence_repeat: FenceRepeat::ClockBacked,
            failure_admits_second_holder: true,
            holders_know_fence: true,
            holders_know_info: true,
            waiting: "queued on a per-key GET_LOCK doorbell that a release passes to the next \
                      waiter, in any process; 1-50 ms polling when the holder took the key \
                      without waiting, never later than the holder's expiry",
            primitives: crate::Primitives {
                note: "semaphores (permit count checked in the slot's granting transaction), \
                       fenced readers with writer preference (a waiting writer's intent on the \
                       key's row); a writer waiting for readers polls at 1-50 ms; several keys",
                ..crate::Primitives::ALL
            },
        }
    }

    async fn try_acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        let mut c = self.conn().await?;
        let sent = Instant::now();
        let (key, owner) = (req.key.as_str().to_owned(), req.owner.to_string());
        let info = req.info.map(HolderInfo::encode);
        let statements = self.sql();
        let (sql, ttl) = (statements.grant.clone(), us(req.ttl));
        // The grant runs to its end in a task of its own, also when the caller gives up on
        // it: a release of the key waits for it (`granting`), so the owner-checked cleanup of
        // an abandoned acquire cannot run before the grant it must undo, on another pooled
        // connection, and miss it.
        self.granting.start(&key);
        let granting = self.granting.clone();
        let busy_left = statements.busy_left.clone();
        let (prims, mode) = (self.prims.clone(), req.mode);
        let slot = req.slot.map(|s| (s.semaphore.as_str().to_owned(), s.permits));
        let task = tokio::spawn(async move {
            let r = async {
                let params =
                    (key.as_bytes(), owner.as_str(), ttl, info.as_deref().map(str::as_bytes));
                if mode == crate::Mode::Shared {
                    let (k, o, t, i) = params;
                    return shared::grant_shared(&mut c, &prims, k, o, t, i).await;
                }
                let (rows, last) = match &slot {
                    Some((sem, n)) => {
                        shared::grant_slot(&mut c, &prims, (sem, *n), &sql, params).await?
                    }
                    None => {
                        c.exec_drop(&sql, params).await.map_err(|e| my_err("grant", e))?;
                        (c.affected_rows(), c.last_insert_id())
                    }
                };
                match rows {
                    1 | 2 => Ok(Ok(last.filter(|f| *f > 0).ok_or_else(|| {
                        Error::backend(
                            "mysql",
                            "grant: the server did not return the fence (LAST_INSERT_ID)",
                            "missing last_insert_id",
                        )
                    })?)),
                    _ => {
                        let left: Option<i64> =
                            c.exec_first(&busy_left, (key.as_bytes(),))
                                .await
                                .map_err(|e| my_err("reading the holder's expiry", e))?;
                        Ok(Err(Duration::from_micros(
                            u64::try_from(left.unwrap_or(0)).unwrap_or(0),
                        )))
                    }
                }
            }
            .await;
            granting.finish(&key);
            r
        });
        let answer = task
            .await
            .map_err(|e| Error::UnknownOutcome(format!("mysql grant task failed: {e}")))?;
        Ok(match answer? {
            Ok(fence) => Attempt::Granted(Grant::new(FenceToken::new(fence), sent)),
            Err(left) => Attempt::Busy { holder_expires_in: Some(left) },
        })
    }

    async fn acquire(&self, req: &AcquireRequest<'_>, until: Option<Instant>) -> Result<Attempt> {
        match until {
            // Readers poll: a bell held for a reader's whole grant would queue the next.
            Some(until) if req.mode == crate::Mode::Shared => {
                let attempt = || crate::store::within_op_timeout(req, self.try_acquire(req));
                self.bells.acquire_polling(until, &attempt).await
            }
            Some(until) => {
                let out = self.bells.acquire_queued(req, until, || self.waiting_attempt(req)).await;
                if !matches!(out, Ok(Attempt::Granted(_))) {
                    self.end_intent(req).await?;
                }
                out
            }
            None => crate::store::within_op_timeout(req, self.try_acquire(req)).await,
        }
    }

    async fn renew(&self, key: &Key, owner: &OwnerToken, ttl: Duration) -> Result<bool> {
        let mut c = self.conn().await?;
        c.exec_drop(&self.sql().renew, (us(ttl), key.as_str().as_bytes(), owner.to_string()))
            .await
            .map_err(|e| my_err("renew", e))?;
        if c.affected_rows() == 1 {
            return Ok(true);
        }
        let o = owner.to_string();
        shared::renew_shared(&mut c, &self.prims, key.as_str().as_bytes(), &o, us(ttl)).await
    }

    async fn renew_many(&self, items: &[RenewItem]) -> Result<Vec<bool>> {
        let mut c = self.conn().await?;
        let mut out = Vec::with_capacity(items.len());
        let sql = self.sql();
        let t = &sql.table;
        let [update, select] = ["UPDATE", "SELECT"].map(|v| bounded_verb(v, sql.op, true));
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
                        "{update} {t} SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
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
                        "{select} lock_key, owner FROM {t} WHERE lock_key IN ({keys})
                           AND owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6)"
                    ),
                    params,
                )
                .await
                .map_err(|e| my_err("renew", e))?;
            let live: HashSet<(Vec<u8>, Vec<u8>)> = rows.into_iter().collect();
            for i in chunk {
                let (k, o) = (i.key.as_str().as_bytes(), i.owner.to_string());
                let mut done = live.contains(&(k.to_vec(), o.clone().into_bytes()));
                if !done {
                    // Not a lease row's: perhaps a reader's.
                    done = shared::renew_shared(&mut c, &self.prims, k, &o, us(i.ttl)).await?;
                }
                out.push(done);
            }
        }
        Ok(out)
    }

    async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool> {
        // An abandoned grant of this key still in flight must land first (see try_acquire).
        self.granting.settled(key.as_str(), Duration::from_secs(10)).await;
        let mut c = self.conn().await?;
        let (k, o) = (key.as_str().as_bytes(), owner.to_string());
        let sql = self.sql();
        c.exec_drop(&sql.release, (k, &o)).await.map_err(|e| my_err("release", e))?;
        let live = c.affected_rows() == 1;
        // Committed: pass the bell on (if this lease took one) to the next queued waiter.
        self.bells.ring(owner).await;
        if !live && let Some(was) = shared::release_shared(&mut c, &self.prims, k, &o).await? {
            return Ok(was);
        }
        if !live {
            // Ours but expired: clear the owner anyway (a no-op for anyone else's row).
            c.exec_drop(&sql.release_expired, (k, &o)).await.map_err(|e| my_err("release", e))?;
        }
        Ok(live)
    }

    async fn forget(&self, key: &Key) -> Result<()> {
        let mut c = self.conn().await?;
        let sql = format!(
            "DELETE FROM {} WHERE lock_key = ? AND (owner IS NULL OR expires_at < UTC_TIMESTAMP(6))
               AND {}",
            self.sql().table,
            shared::NO_READERS
        );
        c.exec_drop(sql, (key.as_str().as_bytes(),)).await.map_err(|e| my_err("forget", e))
    }

    async fn holders(&self, key: Option<&Key>) -> Result<Vec<Holder>> {
        let mut c = self.conn().await?;
        let statements = self.sql();
        let t = &statements.table;
        let select = bounded_verb("SELECT", statements.op, true);
        let sql = format!(
            "{select} lock_key, owner, fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at),
                    info
             FROM {t} WHERE owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6) {} ORDER BY lock_key",
            if key.is_some() { "AND lock_key = ?" } else { "" }
        );
        let params: Vec<mysql_async::Value> =
            key.map(|k| k.as_str().as_bytes().into()).into_iter().collect();
        let rows: Vec<(Vec<u8>, String, u64, i64, Option<Vec<u8>>)> =
            c.exec(sql, params).await.map_err(|e| my_err("holders", e))?;
        let readers =
            shared::readers(&mut c, &self.prims, key.map(|k| k.as_str().as_bytes())).await?;
        let n = rows.len();
        let mut out = rows
            .into_iter()
            .chain(readers)
            .enumerate()
            .map(|(i, (k, o, f, left, info))| {
                let k = String::from_utf8(k)
                    .map_err(|_| Error::invalid("a lease row's key is not UTF-8"))?;
                let info = info.and_then(|i| HolderInfo::decode(std::str::from_utf8(&i).ok()?));
                let mode = if i < n { crate::Mode::Exclusive } else { crate::Mode::Shared };
                Ok(Holder::new(
                    Key::new(k)?,
                    o.parse()?,
                    Some(FenceToken::new(f)),
                    Some(Duration::from_micros(u64::try_from(left).unwrap_or(0))),
                )
                .with_info(info)
                .with_mode(mode))
            })
            .collect::<Result<Vec<_>>>()?;
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn set_op_timeout(&self, op_timeout: Duration) {
        let mut sql = self.sql.write().unwrap_or_else(|p| p.into_inner());
        if sql.op != op_timeout {
            *sql = Arc::new(LeaseSql::new(sql.table.trim_matches('`'), op_timeout));
        }
    }
}

impl MysqlStore {
    /// A waiting acquirer's attempt: a refused writer records its intent (new readers are
    /// then refused), and clears it once granted.
    pub(super) async fn waiting_attempt(&self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        let out = crate::store::within_op_timeout(req, self.try_acquire(req)).await?;
        if req.mode != crate::Mode::Exclusive {
            return Ok(out);
        }
        let (key, owner) = (req.key.as_str().as_bytes(), req.owner.to_string());
        match &out {
            Attempt::Busy { .. } => {
                let mut c = self.conn().await?;
                shared::note_intent(&mut c, &self.prims, key, &owner, us(req.ttl)).await?;
                lock_set(&self.intents).insert(*req.owner);
            }
            Attempt::Granted(_) => self.end_intent(req).await?,
        }
        Ok(out)
    }

    /// Clears the intent `req`'s writer recorded, if it did.
    async fn end_intent(&self, req: &AcquireRequest<'_>) -> Result<()> {
        if !lock_set(&self.intents).remove(req.owner) {
            return Ok(());
        }
        let mut c = self.conn().await?;
        let (key, owner) = (req.key.as_str().as_bytes(), req.owner.to_string());
        shared::clear_intent(&mut c, &self.prims, key, &owner).await
    }
}

fn lock_set(m: &Mutex<HashSet<OwnerToken>>) -> std::sync::MutexGuard<'_, HashSet<OwnerToken>> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering::SeqCst;

    use super::super::LOCK_NAME;
    use super::super::doorbell::params;
    use super::*;
    use crate::{Locker, Wait};

    /// The machine's server, as the testkit's MySQL tests use it.
    fn server() -> String {
        std::env::var("LEASEHOLD_TEST_MYSQL")
            .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".into())
    }

    async fn store(url: &str) -> Arc<MysqlStore> {
        let (opts, o) = super::super::parse_url(url).unwrap();
        Arc::new(MysqlStore::open(opts, &o, crate::backends::Limits::default()).await.unwrap())
    }

    /// A waiter with a store of its own (as in another process: nothing in this process
    /// tells it) is handed the bell by the release: it attempts once, after the release.
    /// Polling at 1–50 ms would have attempted about ten times during the hold.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_release_elsewhere_passes_the_bell() {
        let db = format!("lh_test_{}", &OwnerToken::generate().unwrap().to_string()[..12]);
        let mut admin = Conn::from_url(server()).await.unwrap();
        admin.query_drop(format!("CREATE DATABASE {db}")).await.unwrap();
        let url = format!("{}/{db}", server());
        let holder = Locker::from_arc(store(&url).await);
        let waiting = store(&url).await;
        let waiter = Locker::from_arc(waiting.clone());
        let wait = Wait::For(Duration::from_secs(20));
        let lease = holder.acquire("k", Duration::from_secs(30)).wait(wait).await.unwrap();
        let w =
            tokio::spawn(
                async move { waiter.acquire("k", Duration::from_secs(30)).wait(wait).await },
            );
        tokio::time::sleep(Duration::from_millis(400)).await;
        // At most one look after a second without the bell, on a very slow machine.
        assert!(waiting.bells.attempts.load(SeqCst) <= 1, "queued on the bell, not polling");
        assert!(lease.release().await.unwrap().is_clean());
        let got = w.await.unwrap().unwrap();
        let n = waiting.bells.attempts.load(SeqCst);
        assert!((1..=2).contains(&n), "{n} attempts: one, after the release");
        assert!(got.release().await.unwrap().is_clean());
        let bell: Option<Option<u64>> = admin
            .exec_first(
                format!("SELECT IS_USED_LOCK({LOCK_NAME})"),
                params("leasehold-bell:leasehold_leases:k"),
            )
            .await
            .unwrap();
        assert_eq!(bell.flatten(), None, "the bell was given back with the last release");
        admin.query_drop(format!("DROP DATABASE {db}")).await.unwrap();
    }
}
