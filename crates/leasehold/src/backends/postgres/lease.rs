//! The lease table (`mode=lease`, the default): grant, renew and release as one statement
//! each, waiters queued by ticket.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio_postgres::{Config, Statement};

use super::queue::Queues;
use super::{Options, PgConn, RENEW_CHUNK, create_schema, left, ms, pg_err, server_bounds};
use crate::backends::Limits;
use crate::store::{AcquireRequest, Attempt, Grant, RenewItem, within_op_timeout};
use crate::{
    FenceRepeat, FenceToken, Guarantees, Holder, HolderInfo, Key, LockKind, OwnerToken, Result,
    Store,
};

mod shared;
mod statements;
pub use shared::PrimitiveStatements;
pub use statements::LeaseStatements;

struct LeaseConn {
    pg: PgConn,
    /// The op timeout (ms) its server-side bounds were last set to.
    bounds_ms: AtomicU64,
    grant: Statement,
    grant_queued: Statement,
    renew: Statement,
    renew_many: Statement,
    release: Statement,
    holders: Statement,
    prims: shared::Prepared,
}

/// How long a waiter whose ticket was not called waits, per ticket ahead of it, after a
/// release nobody answered (the called waiter gave up or died) before it tries anyway.
const STAGGER: Duration = Duration::from_millis(5);

struct Listener {
    cfg: Config,
    connect: Duration,
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
        let c = PgConn::open(&self.cfg, self.connect, "", Some(self.queues.clone())).await?;
        let listen = format!("LISTEN \"{}\"", self.channel);
        c.bounded("LISTEN", self.connect, c.client.batch_execute(&listen)).await?;
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
pub struct PostgresStore {
    cfg: Config,
    /// The connect limit; the op timeout as set last, in ms (see [`Store::set_op_timeout`]).
    connect: Duration,
    op_ms: AtomicU64,
    table: String,
    sql: LeaseStatements,
    prims_sql: PrimitiveStatements,
    slots: shared::SlotConn,
    conn: tokio::sync::Mutex<Option<Arc<LeaseConn>>>,
    listener: Arc<Listener>,
    /// Deletes idle rows past the horizon while the store lives.
    _pruner: super::prune::Pruner,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").field("table", &self.table).finish()
    }
}

impl PostgresStore {
    pub(super) async fn open(cfg: Config, o: &Options, limits: Limits) -> Result<Self> {
        let table = format!("\"{}\".\"{}\"", o.schema, o.table);
        let sql = LeaseStatements::new(&o.schema, &o.table);
        let prims_sql = PrimitiveStatements::new(&o.schema, &o.table);
        let base: String = o.table.chars().take(55).collect();
        let prune_sql = super::prune::PruneStatements::new(
            &table,
            &format!("\"{}\".\"{base}_readers\"", o.schema),
        );
        let pruner = super::prune::Pruner::start(cfg.clone(), limits.connect, prune_sql, o.horizon);
        let store = PostgresStore {
            _pruner: pruner,
            listener: Arc::new(Listener {
                cfg: cfg.clone(),
                connect: limits.connect,
                channel: sql.channel.clone(),
                queues: Arc::default(),
                conn: Default::default(),
            }),
            cfg,
            connect: limits.connect,
            op_ms: AtomicU64::new(ms(limits.op) as u64),
            table,
            sql,
            prims_sql,
            slots: Default::default(),
            conn: Default::default(),
        };
        let ddl = format!(
            "CREATE TABLE IF NOT EXISTS {} (
                key        text PRIMARY KEY,
                owner      text,
                fence      bigint NOT NULL,
                expires_at timestamptz NOT NULL,
                tickets    bigint NOT NULL DEFAULT 0,
                turn       bigint NOT NULL DEFAULT 0,
                info       text
            );
            DO $$ BEGIN
              IF NOT EXISTS (SELECT 1 FROM information_schema.columns
                             WHERE table_schema = '{schema}' AND table_name = '{name}'
                               AND column_name = 'turn') THEN
                ALTER TABLE {t} ADD COLUMN tickets bigint NOT NULL DEFAULT 0,
                                ADD COLUMN turn bigint NOT NULL DEFAULT 0;
              END IF;
              IF NOT EXISTS (SELECT 1 FROM information_schema.columns
                             WHERE table_schema = '{schema}' AND table_name = '{name}'
                               AND column_name = 'info') THEN
                ALTER TABLE {t} ADD COLUMN info text;
              END IF;
            END $$;
            {prims}",
            store.table,
            prims = store.prims_sql.ddl,
            schema = o.schema,
            name = o.table,
            t = store.table
        );
        let setup =
            PgConn::open(&store.cfg, limits.connect, &server_bounds(limits.op, true), None).await?;
        let create = create_schema(&setup.client, &o.schema, &ddl);
        crate::limits::within(limits.connect, || "creating the lease table".into(), create).await?;
        drop(setup);
        store.conn().await?;
        Ok(store)
    }

    fn op(&self) -> Duration {
        Duration::from_millis(self.op_ms.load(Ordering::Relaxed))
    }

    /// `f` on `c` within `op` (see [`PgConn::bounded`]), the connection's server-side bounds
    /// first brought to the op timeout if it changed: pipelined, the `SET` goes out just
    /// before `f`'s request, without a round trip of its own.
    async fn run<T>(
        &self,
        c: &LeaseConn,
        what: &str,
        op: Duration,
        f: impl std::future::Future<Output = std::result::Result<T, tokio_postgres::Error>>,
    ) -> Result<T> {
        let want = self.op();
        let want_ms = want.as_millis() as u64;
        if c.bounds_ms.load(Ordering::Relaxed) == want_ms {
            return c.pg.bounded(what, op, f).await;
        }
        let set = server_bounds(want, true);
        let both = async {
            let (set, r) = tokio::join!(c.pg.client.batch_execute(&set), f);
            set.and(r)
        };
        let r = c.pg.bounded(what, op, both).await;
        if r.is_ok() {
            c.bounds_ms.store(want_ms, Ordering::Relaxed);
        }
        r
    }

    /// The live connection, reconnecting (and re-preparing) after a failure.
    async fn conn(&self) -> Result<Arc<LeaseConn>> {
        let mut slot = self.conn.lock().await;
        let op = self.op();
        if let Some(c) = slot.as_ref().filter(|c| c.pg.alive()) {
            return Ok(c.clone());
        }
        // Every statement here looks rows up by key. Statistics taken while the table held a
        // few dozen rows made the planner scan the whole table once per renewed lease (a
        // 2,000-lease renewal took over a second); on this connection, always use the index.
        let setup = format!("SET enable_seqscan = off; {}", server_bounds(op, true));
        let pg = PgConn::open(&self.cfg, self.connect, &setup, None).await?;
        let sql = &self.sql;
        let prepared = async {
            let client = &pg.client;
            Ok::<_, tokio_postgres::Error>([
                client.prepare(&sql.grant).await?,
                client.prepare(&sql.grant_queued).await?,
                client.prepare(&sql.renew).await?,
                client.prepare(&sql.renew_many).await?,
                client.prepare(&sql.release).await?,
                client.prepare(&sql.holders).await?,
            ])
        };
        let [grant, grant_queued, renew, renew_many, release, holders] =
            pg.bounded("prepare", self.connect, prepared).await?;
        let prims = shared::Prepared::new(&pg.client, &self.prims_sql);
        let prims = pg.bounded("prepare", self.connect, prims).await?;
        let c = Arc::new(LeaseConn {
            pg,
            bounds_ms: AtomicU64::new(op.as_millis() as u64),
            grant,
            grant_queued,
            renew,
            renew_many,
            release,
            holders,
            prims,
        });
        *slot = Some(c.clone());
        Ok(c)
    }
}

/// The answer to a waiter's attempt.
enum Queued {
    Granted(Grant),
    Busy { holder_expires_in: Duration, ticket: i64 },
}

impl PostgresStore {
    async fn grant_queued(&self, req: &AcquireRequest<'_>, ticket: i64) -> Result<Queued> {
        if req.mode == crate::Mode::Shared {
            // Readers take no ticket: every release lets them look.
            return Ok(match self.grant_shared(req).await? {
                Attempt::Granted(g) => Queued::Granted(g),
                Attempt::Busy { holder_expires_in } => Queued::Busy {
                    holder_expires_in: holder_expires_in.unwrap_or_default(),
                    ticket: 0,
                },
            });
        }
        let c = self.conn().await?;
        let sent = Instant::now();
        let info = req.info.map(HolderInfo::encode);
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 6] = [
            &req.key.as_str(),
            &req.owner.to_string(),
            &ms(req.ttl),
            &info,
            &ticket,
            &self.sql.channel,
        ];
        let row = if req.slot.is_some() {
            self.slot_grant(req, &self.sql.grant_queued, &params).await?
        } else {
            let grant = c.pg.client.query_one(&c.grant_queued, &params);
            self.run(&c, "grant", req.op_timeout, grant).await?
        };
        match row.get::<_, Option<i64>>(0) {
            Some(f) => {
                if ticket > 0 {
                    self.listener.queues.taken(req.key.as_str(), row.get(3));
                }
                Ok(Queued::Granted(Grant::new(FenceToken::from_i64(f), sent)))
            }
            None => Ok(Queued::Busy { holder_expires_in: left(row.get(1)), ticket: row.get(2) }),
        }
    }
}

#[async_trait]
impl Store for PostgresStore {
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
                    statement; a row idle past the horizon (horizon=, a day by default) is \
                    deleted, and the clock then starts above its fences",
            fence_repeat: FenceRepeat::ClockBacked,
            failure_admits_second_holder: true,
            holders_know_fence: true,
            holders_know_info: true,
            waiting: "LISTEN/NOTIFY on release, calling one ticketed waiter per release; else \
                      the holder's expiry",
            primitives: crate::Primitives {
                note: "semaphores (permit count checked in the slot's granting transaction), \
                       fenced readers with writer preference (a waiting writer's intent on the \
                       key's row), several keys",
                ..crate::Primitives::ALL
            },
        }
    }

    async fn try_acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        if req.mode == crate::Mode::Shared {
            return self.grant_shared(req).await;
        }
        let c = self.conn().await?;
        let sent = Instant::now();
        let info = req.info.map(HolderInfo::encode);
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
            [&req.key.as_str(), &req.owner.to_string(), &ms(req.ttl), &info];
        let row = if req.slot.is_some() {
            self.slot_grant(req, &self.sql.grant, &params).await?
        } else {
            let grant = c.pg.client.query_one(&c.grant, &params);
            self.run(&c, "grant", req.op_timeout, grant).await?
        };
        match row.get::<_, Option<i64>>(0) {
            Some(f) => Ok(Attempt::Granted(Grant::new(FenceToken::from_i64(f), sent))),
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
                self.withdraw_intent(req).await?;
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
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
            [&key.as_str(), &owner.to_string(), &ms(ttl), &self.sql.channel];
        let rows = self.run(&c, "renew", self.op(), c.pg.client.query(&c.renew, &params)).await?;
        if rows.len() == 1 {
            return Ok(true);
        }
        let item = RenewItem { key: key.clone(), owner: *owner, ttl };
        Ok(!self.renew_shared(std::slice::from_ref(&item)).await?.is_empty())
    }

    async fn renew_many(&self, items: &[RenewItem]) -> Result<Vec<bool>> {
        let c = self.conn().await?;
        let mut out = Vec::with_capacity(items.len());
        for chunk in items.chunks(RENEW_CHUNK) {
            let keys: Vec<&str> = chunk.iter().map(|i| i.key.as_str()).collect();
            let owners: Vec<String> = chunk.iter().map(|i| i.owner.to_string()).collect();
            let ttls: Vec<i64> = chunk.iter().map(|i| ms(i.ttl)).collect();
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&keys, &owners, &ttls];
            let rows =
                self.run(&c, "renew", self.op(), c.pg.client.query(&c.renew_many, &params)).await?;
            let done: HashSet<(String, String)> =
                rows.iter().map(|r| (r.get(0), r.get(1))).collect();
            let start = out.len();
            out.extend(
                chunk.iter().zip(owners).map(|(i, o)| done.contains(&(i.key.to_string(), o))),
            );
            // Not a lease row's: perhaps a reader's.
            let rest: Vec<RenewItem> = chunk
                .iter()
                .zip(&out[start..])
                .filter(|(_, d)| !**d)
                .map(|(i, _)| i.clone())
                .collect();
            if !rest.is_empty() {
                let readers = self.renew_shared(&rest).await?;
                for (i, done) in chunk.iter().zip(&mut out[start..]) {
                    *done = *done || readers.contains(&(i.key.to_string(), i.owner.to_string()));
                }
            }
        }
        Ok(out)
    }

    async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool> {
        let c = self.conn().await?;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
            [&key.as_str(), &owner.to_string(), &self.sql.channel];
        let rows =
            self.run(&c, "release", self.op(), c.pg.client.query(&c.release, &params)).await?;
        let Some(row) = rows.first() else {
            return Ok(self.release_shared(key, owner).await?.unwrap_or(false));
        };
        // Waiters of this process hear of it without waiting for the notification.
        self.listener.queues.released(key.as_str(), row.get(1));
        Ok(row.get::<_, bool>(0))
    }

    async fn forget(&self, key: &Key) -> Result<()> {
        let c = self.conn().await?;
        let sql = format!(
            "DELETE FROM {} l WHERE key = $1 AND (owner IS NULL OR expires_at < now()) AND {}",
            self.table,
            shared::NO_READERS
        );
        c.pg.client.execute(&sql, &[&key.as_str()]).await.map_err(|e| pg_err("forget", e))?;
        Ok(())
    }

    async fn holders(&self, key: Option<&Key>) -> Result<Vec<Holder>> {
        let c = self.conn().await?;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&key.map(Key::as_str)];
        let rows =
            self.run(&c, "holders", self.op(), c.pg.client.query(&c.holders, &params)).await?;
        let readers = self.shared_holders(key).await?;
        let mut out: Vec<Holder> = rows
            .iter()
            .map(|r| {
                let info: Option<String> = r.get(4);
                Ok(Holder::new(
                    Key::new(r.get::<_, String>(0))?,
                    r.get::<_, String>(1).parse()?,
                    Some(FenceToken::from_i64(r.get(2))),
                    Some(left(r.get(3))),
                )
                .with_info(info.as_deref().and_then(HolderInfo::decode)))
            })
            .collect::<Result<_>>()?;
        out.extend(readers);
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn set_op_timeout(&self, op_timeout: Duration) {
        self.op_ms.store(ms(op_timeout) as u64, Ordering::Relaxed);
    }
}
