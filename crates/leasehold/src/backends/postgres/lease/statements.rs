//! The lease table's statements, as text: what the store prepares and what
//! `leasehold bench` runs through pgbench (one text for both, so the baseline sends what the
//! store sends).

/// The statements the lease-table store prepares (with `$1`… parameters); `leasehold bench`
/// runs the very same text through pgbench (feature `tools`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LeaseStatements {
    /// `$1` key, `$2` owner, `$3` TTL in ms, `$4` the holder's info line (or NULL) → (fence,
    /// NULL) when granted, (NULL, ms left) when busy.
    pub grant: String,
    /// A waiter's attempt: as `grant`, plus `$5` the waiter's ticket (0: none yet) and `$6`
    /// the channel → (fence or NULL, ms left, the waiter's ticket, the ticket called last).
    /// A refused waiter without a ticket, or whose ticket was called already (someone else
    /// took the key first), takes the next one; a waiter granted by its ticket notifies the
    /// other waiters that the call was answered.
    pub grant_queued: String,
    /// `$1` key, `$2` owner, `$3` TTL in ms, `$4` notification channel → one row iff
    /// renewed. A renewal that shortens the lease (`run --at-least` cutting the key to the
    /// rest of its period) notifies `s 0 KEY`, so waiters that read the longer expiry look
    /// again instead of sleeping until it.
    pub renew: String,
    /// `$1` keys, `$2` owners, `$3` TTLs in ms (arrays) → the renewed (key, owner) rows.
    pub renew_many: String,
    /// `$1` key, `$2` owner, `$3` notification channel → one row (still live?, the ticket
    /// now called) iff ours; calls the next waiting ticket and notifies `r TURN KEY`.
    pub release: String,
    /// `$1` key or NULL → live holders (key, owner, fence, ms left, info).
    pub holders: String,
    /// The `LISTEN` channel releases notify.
    pub channel: String,
}

impl LeaseStatements {
    pub(in crate::backends::postgres) fn new(schema: &str, table: &str) -> LeaseStatements {
        let t = format!("\"{schema}\".\"{table}\"");
        // One notification channel per table; channel names are identifiers (63 bytes).
        let mut channel = format!("leasehold:{schema}.{table}");
        channel.truncate(63);
        LeaseStatements {
            grant: format!(
            "WITH g AS (
               INSERT INTO {t} AS l (key, owner, fence, expires_at, info)
               VALUES ($1, $2, {US}, now() + $3::bigint * interval '1 millisecond', $4::text)
               ON CONFLICT (key) DO UPDATE
                 SET owner = excluded.owner, fence = GREATEST(l.fence + 1, {US}), expires_at = excluded.expires_at,
                     info = excluded.info
                 WHERE (l.owner IS NULL OR l.expires_at <= now()) AND {NO_READERS}
               RETURNING l.fence)
             SELECT fence, 0::bigint FROM g
             UNION ALL
             SELECT NULL::bigint, COALESCE((SELECT GREATEST(0, ceil(extract(epoch FROM GREATEST(l.expires_at, l.shared_until) - now()) * 1000))::bigint
                                            FROM {t} l WHERE l.key = $1), 0)
             WHERE NOT EXISTS (SELECT 1 FROM g)", US = crate::backends::postgres::CLOCK_US, NO_READERS = super::shared::NO_READERS),
            renew: format!(
            "WITH old AS (SELECT key, expires_at FROM {t}
                          WHERE key = $1 AND owner = $2 AND expires_at > now() FOR UPDATE),
                  upd AS (UPDATE {t} l SET expires_at = now() + $3::bigint * interval '1 millisecond'
                          FROM old WHERE l.key = old.key
                          RETURNING l.expires_at < old.expires_at AS shorter)
             SELECT CASE WHEN shorter THEN pg_notify($4, 's 0 ' || $1) END FROM upd"),
            renew_many: format!(
            "UPDATE {t} l SET expires_at = now() + x.ms * interval '1 millisecond'
             FROM unnest($1::text[], $2::text[], $3::bigint[]) AS x(key, owner, ms)
             WHERE l.key = x.key AND l.owner = x.owner AND l.expires_at > now()
             RETURNING l.key, l.owner"),
            grant_queued: format!(
            "WITH g AS (
               INSERT INTO {t} AS l (key, owner, fence, expires_at, info)
               VALUES ($1, $2, {US}, now() + $3::bigint * interval '1 millisecond', $4::text)
               ON CONFLICT (key) DO UPDATE SET
                 owner = CASE WHEN {free} THEN excluded.owner ELSE l.owner END,
                 info = CASE WHEN {free} THEN excluded.info ELSE l.info END,
                 fence = CASE WHEN {free} THEN GREATEST(l.fence + 1, {US}) ELSE l.fence END,
                 expires_at = CASE WHEN {free} THEN excluded.expires_at ELSE l.expires_at END,
                 tickets = CASE WHEN {free} OR $5::bigint > l.turn THEN l.tickets
                                ELSE l.tickets + 1 END,
                 turn = CASE WHEN {free} THEN GREATEST(l.turn, $5::bigint) ELSE l.turn END,
                 intent_owner = CASE WHEN NOT {free} THEN $2
                                     WHEN l.intent_owner = $2 THEN NULL ELSE l.intent_owner END,
                 intent_until = CASE WHEN NOT {free}
                                     THEN GREATEST(l.expires_at, l.shared_until, now())
                                          + $3::bigint * interval '1 millisecond'
                                     WHEN l.intent_owner = $2 THEN NULL ELSE l.intent_until END
               RETURNING l.owner = $2 AS won, l.fence, GREATEST(l.expires_at, l.shared_until) AS expires_at,
                         l.tickets, l.turn)
             SELECT CASE WHEN won THEN fence END,
                    GREATEST(0, ceil(extract(epoch FROM expires_at - now()) * 1000))::bigint,
                    CASE WHEN won OR $5::bigint > turn THEN $5::bigint ELSE tickets END,
                    turn,
                    CASE WHEN won AND $5::bigint > 0 THEN pg_notify($6, 'g ' || turn || ' ' || $1) END
             FROM g",
            free = format!("((l.owner IS NULL OR l.expires_at <= now()) AND {})", super::shared::NO_READERS),
            US = crate::backends::postgres::CLOCK_US),
            release: format!(
            "WITH old AS (SELECT key, expires_at FROM {t} WHERE key = $1 AND owner = $2 FOR UPDATE),
                  upd AS (UPDATE {t} l SET owner = NULL, expires_at = now(), info = NULL,
                                 turn = GREATEST(l.turn, LEAST(l.turn + 1, l.tickets))
                          FROM old
                          WHERE l.key = old.key RETURNING old.expires_at > now() AS live, l.turn)
             SELECT live, turn, pg_notify($3, 'r ' || turn || ' ' || $1) FROM upd"),
            holders: format!(
            "SELECT key, owner, fence,
                    GREATEST(0, ceil(extract(epoch FROM expires_at - now()) * 1000))::bigint, info
             FROM {t} WHERE owner IS NOT NULL AND expires_at > now()
               AND ($1::text IS NULL OR key = $1) ORDER BY key"),
            channel,
        }
    }
}
