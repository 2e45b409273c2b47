//! What the lease table's pruning task forgets (`backends/mysql/prune.rs` runs it): the rows
//! of keys that no grant, reader or waiting writer's intent held within the horizon, with
//! their old readers' and semaphore slots' rows; readers' rows expired more than the horizon
//! ago; semaphores' rows no slot refers to any more.

use std::time::Duration;

use super::shared::Tables;
use crate::backends::mysql::prune::{BATCH, Sweep, cutoff, select};

/// The sweeps of the lease table `t` for `horizon`, their statements bounded by `op`.
pub(super) fn sweeps(t: &Tables, horizon: Duration, op: Duration) -> Vec<Sweep> {
    let Tables { lease, readers, slots, semaphores } = t;
    let (cut, select) = (cutoff(horizon), select(op));
    // A NULL shared_until or intent_until is no time at all.
    let last = "GREATEST(l.expires_at, COALESCE(l.shared_until, l.expires_at),
                         COALESCE(l.intent_until, l.expires_at))";
    vec![
        Sweep {
            what: "pruning the lease table",
            select: format!(
                "{select} l.lock_key FROM {lease} l WHERE {last} < {cut}
                   AND NOT EXISTS (SELECT 1 FROM {readers} r
                                   WHERE r.lock_key = l.lock_key AND r.expires_at >= {cut})
                 LIMIT {BATCH} FOR UPDATE"
            ),
            params: vec![],
            // A reader's or a slot's grant locks the key's row first: with it locked here,
            // none is in flight.
            deletes: vec![
                format!("DELETE FROM {readers} WHERE lock_key IN"),
                format!("DELETE FROM {slots} WHERE lock_key IN"),
                format!("DELETE FROM {lease} WHERE lock_key IN"),
            ],
            free_under: None,
        },
        Sweep {
            what: "pruning the readers' table",
            select: format!(
                "{select} lock_key, owner FROM {readers} WHERE expires_at < {cut}
                 LIMIT {BATCH} FOR UPDATE"
            ),
            params: vec![],
            deletes: vec![format!("DELETE FROM {readers} WHERE (lock_key, owner) IN")],
            free_under: None,
        },
        Sweep {
            what: "pruning the semaphores' table",
            select: format!(
                "{select} s.semaphore FROM {semaphores} s WHERE NOT EXISTS
                   (SELECT 1 FROM {slots} x WHERE x.semaphore = s.semaphore)
                 LIMIT {BATCH} FOR UPDATE"
            ),
            params: vec![],
            deletes: vec![format!("DELETE FROM {semaphores} WHERE semaphore IN")],
            free_under: None,
        },
    ]
}
