//! Readers, writer intents and semaphore slots on the PostgreSQL lease table
//! (`docs/design.md` §9), each inside the statement or transaction of the grant it guards.
//!
//! - The key's lease row carries what its grants must see under the row lock (the
//!   granting statement re-reads the locked row, where a subquery would read an older
//!   snapshot): `shared_until`, the latest expiry among the readers granted since the key
//!   last had none, and `readers`, how many of those were not released while live. A writer
//!   is refused while `shared_until` lies ahead; the last live reader to leave clears it. A
//!   reader that expires unreleased stays counted, so the key stays closed to writers until
//!   `shared_until` passes (safe, and bounded by the readers' expiry).
//! - `TABLE_readers(key, owner, fence, expires_at, info)`: one row per reader, its fence from
//!   the key's counter (the lease row's `fence`, the mutex's), so every writer's fence
//!   exceeds every earlier reader's.
//! - `intent_owner`, `intent_until` on the lease row: a writer refused while it waits records
//!   its intent, until the blockers' expiry plus its own ttl, refreshed by each of its
//!   attempts; while it lives, new readers are refused. Its grant, or the end of its wait,
//!   clears it.
//! - `TABLE_slots(key, semaphore, owner, permits)`: the permit count a slot was granted for.
//!   Slot grants of one semaphore run in a transaction on a connection of their own, behind
//!   `pg_advisory_xact_lock` on the semaphore's name; a request naming another count is
//!   refused while a slot granted for it lives.

use std::collections::HashSet;
use std::time::Instant;

use tokio_postgres::{Client, Statement};

use super::PostgresStore;
use crate::backends::postgres::{CLOCK_US, PgConn, left, ms, server_bounds};
use crate::store::{AcquireRequest, Attempt, Grant, RenewItem};
use crate::{Error, FenceToken, Holder, HolderInfo, Key, OwnerToken, Result};

/// The lease row lets a writer in: no reader's grant still runs.
pub(super) const NO_READERS: &str = "(l.shared_until IS NULL OR l.shared_until <= now())";

/// The statements for readers, intents and slots (`$1`… parameters), prepared beside the
/// lease table's own.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PrimitiveStatements {
    /// Creates the readers and slots tables and the lease row's reader and intent columns.
    pub ddl: String,
    /// A reader's grant: `$1` key, `$2` owner, `$3` TTL in ms, `$4` info → (fence, 0) when
    /// granted, (NULL, ms left) while an exclusive grant or another writer's intent lives.
    pub grant_shared: String,
    /// `$1` keys, `$2` owners, `$3` TTLs in ms (arrays) → the renewed readers (key, owner).
    pub renew_shared: String,
    /// `$1` key, `$2` owner, `$3` channel → one row (still live?, the ticket now called, NULL
    /// when it was not live) iff a reader of ours; the last live reader out calls the next
    /// ticket. Notifies `r TURN KEY`.
    pub release_shared: String,
    /// `$1` key, `$2` owner, `$3` channel: a waiter's intent withdrawn, notifying the key.
    pub withdraw_intent: String,
    /// `$1` key or NULL → live readers (key, owner, fence, ms left, info).
    pub holders_shared: String,
    /// `$1` semaphore: serializes the slot grants of one semaphore (in their transaction).
    pub lock_semaphore: String,
    /// `$1` semaphore, `$2` permits → the other count a live slot was granted for, if any.
    pub check_permits: String,
    /// `$1` slot key, `$2` semaphore, `$3` owner, `$4` permits: records the slot's count.
    pub record_slot: String,
}

impl PrimitiveStatements {
    pub(crate) fn new(schema: &str, table: &str) -> PrimitiveStatements {
        let t = format!("\"{schema}\".\"{table}\"");
        // Identifiers are 63 bytes at most.
        let base: String = table.chars().take(55).collect();
        let r = format!("\"{schema}\".\"{base}_readers\"");
        let s = format!("\"{schema}\".\"{base}_slots\"");
        let ttl = "now() + $3::bigint * interval '1 millisecond'";
        let left =
            |e: &str| format!("GREATEST(0, ceil(extract(epoch FROM {e} - now()) * 1000))::bigint");
        PrimitiveStatements {
            ddl: format!(
                "ALTER TABLE {t} ADD COLUMN IF NOT EXISTS shared_until timestamptz,
                                 ADD COLUMN IF NOT EXISTS readers bigint NOT NULL DEFAULT 0,
                                 ADD COLUMN IF NOT EXISTS intent_owner text,
                                 ADD COLUMN IF NOT EXISTS intent_until timestamptz;
                 CREATE TABLE IF NOT EXISTS {r} (
                     key        text NOT NULL,
                     owner      text NOT NULL,
                     fence      bigint NOT NULL,
                     expires_at timestamptz NOT NULL,
                     info       text,
                     PRIMARY KEY (key, owner));
                 CREATE TABLE IF NOT EXISTS {s} (
                     key       text PRIMARY KEY,
                     semaphore text NOT NULL,
                     owner     text NOT NULL,
                     permits   integer NOT NULL);
                 CREATE INDEX IF NOT EXISTS \"{base}_slots_semaphore\" ON {s} (semaphore)"
            ),
            grant_shared: format!(
                "WITH g AS (
                   INSERT INTO {t} AS l (key, owner, fence, expires_at, shared_until, readers)
                   VALUES ($1, NULL, {US}, now(), {ttl}, 1)
                   ON CONFLICT (key) DO UPDATE SET
                     fence = GREATEST(l.fence + 1, {US}),
                     readers = CASE WHEN {NO_READERS} THEN 1 ELSE l.readers + 1 END,
                     shared_until = GREATEST(l.shared_until, excluded.shared_until)
                   WHERE (l.owner IS NULL OR l.expires_at <= now())
                     AND (l.intent_until IS NULL OR l.intent_until <= now())
                   RETURNING l.fence),
                 r AS (
                   INSERT INTO {r} (key, owner, fence, expires_at, info)
                   SELECT $1, $2, fence, {ttl}, $4::text FROM g
                   ON CONFLICT (key, owner) DO UPDATE SET fence = excluded.fence,
                     expires_at = excluded.expires_at, info = excluded.info
                   RETURNING fence)
                 SELECT fence, 0::bigint FROM r
                 UNION ALL
                 SELECT NULL::bigint, COALESCE((SELECT {busy} FROM {t} l WHERE l.key = $1), 0)
                 WHERE NOT EXISTS (SELECT 1 FROM g)",
                US = CLOCK_US,
                busy = left(
                    "GREATEST(CASE WHEN l.owner IS NOT NULL THEN l.expires_at END, l.intent_until)"
                ),
            ),
            renew_shared: format!(
                "WITH x AS (
                   UPDATE {r} x SET expires_at = now() + u.ms * interval '1 millisecond'
                   FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u(key, owner, ms)
                   WHERE x.key = u.key AND x.owner = u.owner AND x.expires_at > now()
                   RETURNING x.key, x.owner, x.expires_at),
                 m AS (SELECT key, max(expires_at) AS e FROM x GROUP BY key),
                 u AS (UPDATE {t} l SET shared_until = GREATEST(l.shared_until, m.e)
                       FROM m WHERE l.key = m.key)
                 SELECT key, owner FROM x"
            ),
            release_shared: format!(
                "WITH d AS (DELETE FROM {r} WHERE key = $1 AND owner = $2
                            RETURNING expires_at > now() AS live),
                 u AS (UPDATE {t} l SET
                         readers = GREATEST(l.readers - 1, 0),
                         shared_until = CASE WHEN l.readers <= 1 THEN NULL ELSE l.shared_until END,
                         turn = CASE WHEN l.readers <= 1
                                     THEN GREATEST(l.turn, LEAST(l.turn + 1, l.tickets))
                                     ELSE l.turn END
                       FROM d WHERE l.key = $1 AND d.live
                       RETURNING l.turn)
                 SELECT d.live, (SELECT turn FROM u),
                        pg_notify($3, 'r ' || COALESCE((SELECT turn FROM u), 0) || ' ' || $1)::text
                 FROM d"
            ),
            withdraw_intent: format!(
                "UPDATE {t} SET intent_owner = NULL, intent_until = NULL
                 WHERE key = $1 AND intent_owner = $2 RETURNING pg_notify($3, $1)::text"
            ),
            holders_shared: format!(
                "SELECT key, owner, fence, {}, info FROM {r}
                 WHERE expires_at > now() AND ($1::text IS NULL OR key = $1) ORDER BY key, fence",
                left("expires_at")
            ),
            lock_semaphore: "SELECT pg_advisory_xact_lock(hashtextextended('leasehold:semaphore:' || $1, 0))::text"
                .into(),
            check_permits: format!(
                "SELECT s.permits FROM {s} s JOIN {t} l ON l.key = s.key AND l.owner = s.owner
                 WHERE s.semaphore = $1 AND s.permits <> $2 AND l.expires_at > now() LIMIT 1"
            ),
            record_slot: format!(
                "INSERT INTO {s} (key, semaphore, owner, permits) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (key) DO UPDATE SET semaphore = excluded.semaphore,
                   owner = excluded.owner, permits = excluded.permits"
            ),
        }
    }
}

/// The reader statements, prepared on the lease table's connection.
pub(super) struct Prepared {
    grant_shared: Statement,
    renew_shared: Statement,
    release_shared: Statement,
    withdraw_intent: Statement,
    holders_shared: Statement,
}

impl Prepared {
    pub(super) async fn new(
        client: &Client,
        sql: &PrimitiveStatements,
    ) -> std::result::Result<Prepared, tokio_postgres::Error> {
        Ok(Prepared {
            grant_shared: client.prepare(&sql.grant_shared).await?,
            renew_shared: client.prepare(&sql.renew_shared).await?,
            release_shared: client.prepare(&sql.release_shared).await?,
            withdraw_intent: client.prepare(&sql.withdraw_intent).await?,
            holders_shared: client.prepare(&sql.holders_shared).await?,
        })
    }
}

/// The connection slot grants run their transactions on (one at a time: a transaction
/// cannot share the lease table's pipelined connection).
#[derive(Default)]
pub(super) struct SlotConn(tokio::sync::Mutex<Option<(PgConn, u64)>>);

type Params<'a> = [&'a (dyn tokio_postgres::types::ToSql + Sync)];

impl PostgresStore {
    /// A reader's attempt: `Granted`, or busy with the time left of what blocks it.
    pub(super) async fn grant_shared(&self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        let c = self.conn().await?;
        let sent = Instant::now();
        let info = req.info.map(HolderInfo::encode);
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
            [&req.key.as_str(), &req.owner.to_string(), &ms(req.ttl), &info];
        let grant = c.pg.client.query_one(&c.prims.grant_shared, &params);
        let row = self.run(&c, "reader grant", req.op_timeout, grant).await?;
        Ok(match row.get::<_, Option<i64>>(0) {
            Some(f) => Attempt::Granted(Grant::new(FenceToken::from_i64(f), sent)),
            None => Attempt::Busy { holder_expires_in: Some(left(row.get(1))) },
        })
    }

    /// Renews the readers among `items` (the lease rows did not have them): which were.
    pub(super) async fn renew_shared(
        &self,
        items: &[RenewItem],
    ) -> Result<HashSet<(String, String)>> {
        let c = self.conn().await?;
        let keys: Vec<&str> = items.iter().map(|i| i.key.as_str()).collect();
        let owners: Vec<String> = items.iter().map(|i| i.owner.to_string()).collect();
        let ttls: Vec<i64> = items.iter().map(|i| ms(i.ttl)).collect();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&keys, &owners, &ttls];
        let renew = c.pg.client.query(&c.prims.renew_shared, &params);
        let rows = self.run(&c, "reader renew", self.op(), renew).await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// Releases `owner`'s reader of `key`: `None` when it has none, else whether it was live.
    pub(super) async fn release_shared(
        &self,
        key: &Key,
        owner: &OwnerToken,
    ) -> Result<Option<bool>> {
        let c = self.conn().await?;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
            [&key.as_str(), &owner.to_string(), &self.sql.channel];
        let release = c.pg.client.query(&c.prims.release_shared, &params);
        let rows = self.run(&c, "reader release", self.op(), release).await?;
        let Some(row) = rows.first() else { return Ok(None) };
        // Waiters of this process hear of it without waiting for the notification.
        if let Some(turn) = row.get::<_, Option<i64>>(1) {
            self.listener.queues.released(key.as_str(), turn);
        }
        Ok(Some(row.get(0)))
    }

    /// A writer whose wait ran out withdraws its intent (readers it held back look again).
    pub(super) async fn withdraw_intent(&self, req: &AcquireRequest<'_>) -> Result<()> {
        if req.mode != crate::Mode::Exclusive {
            return Ok(());
        }
        let c = self.conn().await?;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
            [&req.key.as_str(), &req.owner.to_string(), &self.sql.channel];
        let withdraw = c.pg.client.query(&c.prims.withdraw_intent, &params);
        self.run(&c, "withdrawing a writer's intent", self.op(), withdraw).await?;
        Ok(())
    }

    /// The live readers, as holders.
    pub(super) async fn shared_holders(&self, key: Option<&Key>) -> Result<Vec<Holder>> {
        let c = self.conn().await?;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&key.map(Key::as_str)];
        let look = c.pg.client.query(&c.prims.holders_shared, &params);
        let rows = self.run(&c, "holders", self.op(), look).await?;
        rows.iter()
            .map(|r| {
                let info: Option<String> = r.get(4);
                Ok(Holder::new(
                    Key::new(r.get::<_, String>(0))?,
                    r.get::<_, String>(1).parse()?,
                    Some(FenceToken::from_i64(r.get(2))),
                    Some(left(r.get(3))),
                )
                .with_info(info.as_deref().and_then(HolderInfo::decode))
                .with_mode(crate::Mode::Shared))
            })
            .collect()
    }

    /// A semaphore slot's attempt: `sql` (the grant statement, or a waiter's) with `params`,
    /// in one transaction with the permit check and record, behind the semaphore's lock.
    /// A live slot granted for another count refuses ([`Error::InvalidInput`]).
    pub(super) async fn slot_grant(
        &self,
        req: &AcquireRequest<'_>,
        sql: &str,
        params: &Params<'_>,
    ) -> Result<tokio_postgres::Row> {
        let slot = req.slot.expect("a slot request");
        let (sem, permits) = (slot.semaphore.as_str(), slot.permits as i32);
        let mut guard = self.slots.0.lock().await;
        let op_ms = self.op().as_millis() as u64;
        if !guard.as_ref().is_some_and(|(c, ms)| c.alive() && *ms == op_ms) {
            let setup = server_bounds(self.op(), true);
            *guard = Some((PgConn::open(&self.cfg, self.connect, &setup, None).await?, op_ms));
        }
        let (pg, _) = guard.as_ref().expect("opened above");
        let p = &self.prims_sql;
        let owner = req.owner.to_string();
        let tx = async {
            let c = &pg.client;
            c.batch_execute("BEGIN").await?;
            c.query_one(&p.lock_semaphore, &[&sem]).await?;
            if let Some(held) = c.query_opt(&p.check_permits, &[&sem, &permits]).await? {
                c.batch_execute("ROLLBACK").await?;
                return Ok(Err(held.get::<_, i32>(0)));
            }
            let row = c.query_one(sql, params).await?;
            if row.get::<_, Option<i64>>(0).is_some() {
                c.execute(&p.record_slot, &[&req.key.as_str(), &sem, &owner, &permits]).await?;
            }
            c.batch_execute("COMMIT").await?;
            Ok(Ok(row))
        };
        let out = pg.bounded("semaphore slot grant", req.op_timeout, tx).await;
        if out.is_err() {
            // Whatever state the transaction was left in, the next one starts afresh.
            *guard = None;
        }
        match out? {
            Ok(row) => Ok(row),
            Err(held) => Err(Error::invalid(format!(
                "semaphore {sem:?} is held with {held} permits; this request named {permits}"
            ))),
        }
    }
}
