//! Waiting on the lease table across processes: a per-key doorbell lock, `GET_LOCK` on
//! `leasehold-bell:TABLE:KEY`, passed on like a baton.
//!
//! A waiting acquirer first queues for the key's bell on a connection of its own, blocked in
//! the server's `GET_LOCK(bell, timeout)`; then it attempts. Granted, it keeps the bell for as
//! long as it holds the lease, and its release, right after the owner-checked `UPDATE`,
//! does `RELEASE_LOCK(bell)`: the server hands the bell to the next queued waiter, which
//! attempts once, after the release has committed. One attempt per handoff, no herd, and no
//! release can slip between a refused attempt and the wait, since a bell holder always
//! attempts after it got the bell. The row stays the only authority: the bell decides only
//! when to ask.
//!
//! Who got the bell but is refused (the holder took the key without waiting, so it holds no
//! bell, or its bell connection died) polls the key at 1–50 ms while holding the bell, never
//! past the holder's expiry. A queued waiter gives up on the bell after a second (its holder
//! may be stalled) and attempts anyway. Without a bell connection (it could not be opened)
//! waiters poll. Only waiting acquisitions take a bell: a lease granted by a single attempt
//! costs no connection, while one granted through the queue keeps its bell connection until
//! its release (a process holding N of them keeps N connections), and a detached one until
//! the process ends.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};

use super::{BACKOFF_MAX, BACKOFF_MIN, LOCK_NAME, new_conn};
use crate::store::{AcquireRequest, Attempt};
use crate::{Key, OwnerToken, Result};

/// How long a queued waiter waits for the bell before it attempts anyway.
const BELL_WAIT: Duration = Duration::from_secs(1);
/// Idle bell connections kept for the next waiters.
const IDLE: usize = 4;

/// The doorbells of one lease store: its bell connections and how to open more.
pub(super) struct Doorbell {
    idle: Mutex<Vec<Conn>>,
    /// Connections holding the bell of a lease granted through the queue, by owner.
    held: Mutex<HashMap<OwnerToken, (String, Conn)>>,
    /// For the bell connections, which are never pooled.
    opts: Opts,
    /// The connect limit.
    connect: Duration,
    /// `leasehold-bell:TABLE:`, the prefix of every key's bell name.
    prefix: String,
    /// Attempts made by waiting acquisitions.
    #[cfg(test)]
    pub(super) attempts: std::sync::atomic::AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(super) fn params(name: &str) -> Vec<mysql_async::Value> {
    vec![name.into(), name.into(), name.into()]
}

impl Doorbell {
    /// The doorbells of the lease table `table`, opening bell connections with `opts`.
    pub(super) fn new(opts: Opts, connect: Duration, table: &str) -> Doorbell {
        Doorbell {
            idle: Mutex::default(),
            held: Mutex::default(),
            opts,
            connect,
            prefix: format!("leasehold-bell:{table}:"),
            #[cfg(test)]
            attempts: Default::default(),
        }
    }

    fn give_back(&self, c: Conn) {
        let mut idle = lock(&self.idle);
        if idle.len() < IDLE {
            idle.push(c);
        }
    }

    /// Releases the bell of the lease `owner` held, if it took one, after its release.
    pub(super) async fn ring(&self, owner: &OwnerToken) {
        let Some((name, mut c)) = lock(&self.held).remove(owner) else { return };
        let sql = format!("DO RELEASE_LOCK({LOCK_NAME})");
        if c.exec_drop(sql, params(&name)).await.is_ok() {
            self.give_back(c);
        }
        // Else the connection is dropped, and the server drops the bell with it.
    }

    fn bell_name(&self, key: &Key) -> String {
        format!("{}{}", self.prefix, key.as_str())
    }

    async fn bell_conn(&self) -> Option<Conn> {
        let idle = lock(&self.idle).pop();
        match idle {
            Some(c) => Some(c),
            None => new_conn(&self.opts, self.connect).await.ok(),
        }
    }

    /// Acquires through `attempt` (one owner-checked attempt, bounded), waiting until `until`
    /// (see the module docs).
    pub(super) async fn acquire_queued<F: Future<Output = Result<Attempt>>>(
        &self,
        req: &AcquireRequest<'_>,
        until: Instant,
        attempt: impl Fn() -> F,
    ) -> Result<Attempt> {
        let Some(mut conn) = self.bell_conn().await else {
            return self.acquire_polling(until, &attempt).await;
        };
        let name = self.bell_name(req.key);
        let mut bound = BELL_WAIT;
        loop {
            let wait = bound.min(until.saturating_duration_since(Instant::now()));
            let sql = format!("SELECT GET_LOCK({LOCK_NAME}, ?)");
            let mut p = params(&name);
            p.push(wait.as_secs_f64().into());
            let got = tokio::time::timeout(
                wait + req.op_timeout,
                conn.exec_first::<Option<i64>, _, _>(sql, p),
            )
            .await;
            match got {
                Ok(Ok(Some(Some(1)))) => break,
                Ok(Ok(_)) => {}
                // The bell connection failed: poll instead (its bell, if any, is gone).
                _ => return self.acquire_polling(until, &attempt).await,
            }
            // Not called within `bound`: its holder may be stalled, so look anyway.
            let left = match self.counted(&attempt).await {
                Ok(Attempt::Busy { holder_expires_in }) => holder_expires_in,
                other => {
                    self.give_back(conn);
                    return other;
                }
            };
            if Instant::now() >= until {
                self.give_back(conn);
                return Ok(Attempt::Busy { holder_expires_in: left });
            }
            bound = left.map_or(BELL_WAIT, |l| (l + Duration::from_millis(1)).min(BELL_WAIT));
        }
        // The bell is ours: the previous holder released, or holds no bell (then poll).
        let out = self.acquire_polling(until, &attempt).await;
        match &out {
            Ok(Attempt::Granted(_)) => {
                lock(&self.held).insert(*req.owner, (name, conn));
            }
            _ => {
                let sql = format!("DO RELEASE_LOCK({LOCK_NAME})");
                if conn.exec_drop(sql, params(&name)).await.is_ok() {
                    self.give_back(conn);
                }
            }
        }
        out
    }

    /// Attempts until granted or `until`, at 1–50 ms and at the holder's expiry.
    pub(super) async fn acquire_polling<F: Future<Output = Result<Attempt>>>(
        &self,
        until: Instant,
        attempt: &impl Fn() -> F,
    ) -> Result<Attempt> {
        let mut backoff = BACKOFF_MIN;
        loop {
            let attempt = self.counted(attempt).await?;
            let Attempt::Busy { holder_expires_in } = attempt else { return Ok(attempt) };
            let now = Instant::now();
            if now >= until {
                return Ok(Attempt::Busy { holder_expires_in });
            }
            let mut wake = (now + backoff).min(until);
            if let Some(l) = holder_expires_in {
                wake = wake.min(now + l + Duration::from_millis(1));
            }
            tokio::time::sleep_until(wake.into()).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    async fn counted<F: Future<Output = Result<Attempt>>>(
        &self,
        attempt: &impl Fn() -> F,
    ) -> Result<Attempt> {
        #[cfg(test)]
        self.attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        attempt().await
    }
}
