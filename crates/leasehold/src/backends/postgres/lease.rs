//! The lease table (`mode=lease`, the default): grant, renew and release as one statement
//! each, waiters queued by ticket.

use super::*;

/// The statements the lease-table store prepares (with `$1`… parameters); `leasehold bench`
/// runs the very same text through pgbench (feature `tools`).
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

impl LeaseStatements {
    pub(super) fn new(schema: &str, table: &str) -> LeaseStatements {
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
pub(super) struct Queues(Mutex<HashMap<String, KeyQueue>>);

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
    pub(super) fn notified(&self, payload: &str) {
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
    pub(super) async fn open(cfg: Config, o: &Options) -> Result<Self> {
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
            holders_know_fence: true,
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

    async fn forget(&self, key: &Key) -> Result<()> {
        let c = self.conn().await?;
        let sql = format!(
            "DELETE FROM {} WHERE key = $1 AND (owner IS NULL OR expires_at < now())",
            self.table
        );
        c.pg.client.execute(&sql, &[&key.as_str()]).await.map_err(|e| pg_err("forget", e))?;
        Ok(())
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
