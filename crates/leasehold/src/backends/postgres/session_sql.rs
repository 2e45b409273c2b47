//! The statements of the session advisory-lock store (`mode=session`), as it prepares them
//! on every session connection.

use super::CLOCK_US;

/// The advisory-lock key of a string, as the server computes it.
pub(super) const LOCK_ID: &str = "hashtextextended($1, 0)";
/// How far (µs) the server's clock must be ahead of the sequence for a clock-back to move it:
/// far more grants than any statement can race with, far less than any failover takes.
pub(super) const CLOCK_BACK_SLACK_US: i64 = 10_000;

/// The statements the session store prepares (`$1` is the lock name: prefix + key).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionStatements {
    /// → the fence (0 with `fence=none`) when granted, -1 when busy.
    pub try_grant: String,
    /// `$2` lock_timeout for this statement only (e.g. `250ms`, `0` for none) → the fence, or
    /// error 55P03 when the wait ran out.
    pub wait_grant: String,
    /// → whether this session holds the lock.
    pub verify: String,
    /// → whether the lock was held (and is now released).
    pub unlock: String,
    /// A reader's [`SessionStatements::try_grant`]: `pg_try_advisory_lock_shared`, refused
    /// while a writer holds the lock or waits for it in the server's queue.
    pub try_grant_shared: String,
    /// A reader's [`SessionStatements::wait_grant`] (`pg_advisory_lock_shared`, queued
    /// behind waiting writers).
    pub wait_grant_shared: String,
    /// A reader's [`SessionStatements::unlock`].
    pub unlock_shared: String,
    /// Run once on every session connection before its first grant (simple query protocol;
    /// empty with `fence=none`): under a transaction advisory lock, moves the sequence up to
    /// the server's clock in µs when it is more than 10 ms behind, so that grants after a
    /// failover or a crash, all made on new connections, stay above every earlier fence.
    pub clock_back: String,
    /// Run once on every session connection, first: its commits stop waiting for WAL
    /// flushes (`synchronous_commit = off`). Nothing committed on it needs one: advisory
    /// locks are not logged, and a sequence advance lost in a crash is covered by the
    /// clock-back every connection makes after the restart, as after a failover.
    pub setup: String,
}

impl SessionStatements {
    /// The fence of a grant is `nextval` of the sequence, whose WAL record covers 32 values
    /// (`setval` on every grant forced a WAL flush each time, and the 32nd `nextval` would
    /// still wait for one, but for [`SessionStatements::setup`]). What keeps it from going back
    /// after a failover is `clock_back`, run on every connection before its first grant:
    /// the sequence is set to the server's clock in µs if it is more than
    /// `CLOCK_BACK_SLACK_US` behind. Every grant after a failover is made on a connection
    /// opened to the new primary, hence after a clock-back there, and so above every fence
    /// the old primary issued (those were at most its clock, given fewer grants than
    /// microseconds), under `CLOCK_ASSUMPTION` with a failover longer than the slack.
    /// Clock-backs are serialized by a transaction advisory lock, and one moves the
    /// sequence only forward by more than the slack, so no grant racing with it can be
    /// handed a value twice.
    pub(crate) fn new(seq: Option<&str>) -> SessionStatements {
        let fence = seq.map_or("0::bigint".to_owned(), |s| format!("nextval('{s}')"));
        let clock_back = seq.map_or(String::new(), |s| {
            format!(
                "BEGIN; SET LOCAL lock_timeout = '10s';
                 SELECT pg_advisory_xact_lock(hashtextextended('leasehold:clock-back', 0));
                 SELECT CASE WHEN c > n + {CLOCK_BACK_SLACK_US} THEN setval('{s}', c) ELSE n END
                   FROM (SELECT nextval('{s}') AS n, {CLOCK_US} AS c) now;
                 COMMIT;"
            )
        });
        let try_grant = |shared: &str| {
            format!(
                "SELECT CASE WHEN pg_try_advisory_lock{shared}({LOCK_ID}) THEN {fence} ELSE -1 END"
            )
        };
        let wait_grant = |shared: &str| {
            format!(
                "WITH c AS MATERIALIZED (SELECT set_config('lock_timeout', $2, true) AS v),
                      g AS MATERIALIZED (SELECT pg_advisory_lock{shared}({LOCK_ID}) AS l FROM c)
                 SELECT {fence} FROM g"
            )
        };
        SessionStatements {
            try_grant: try_grant(""),
            wait_grant: wait_grant(""),
            try_grant_shared: try_grant("_shared"),
            wait_grant_shared: wait_grant("_shared"),
            unlock_shared: format!("SELECT pg_advisory_unlock_shared({LOCK_ID})"),
            verify: format!(
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
                     AND pid = pg_backend_pid() AND objsubid = 1
                     AND ((classid::bigint << 32) | objid::bigint) = {LOCK_ID})"
            ),
            unlock: format!("SELECT pg_advisory_unlock({LOCK_ID})"),
            clock_back,
            setup: if seq.is_some() {
                "SET synchronous_commit = off".into()
            } else {
                String::new()
            },
        }
    }
}
