//! `sqlite://PATH`: leases in a WAL-mode SQLite file shared by the processes of one machine.
//!
//! Tables (created on first use):
//! - `leasehold_leases(key PRIMARY KEY, owner, fence, boot_id, expires_ns, info)`: one row per
//!   key; a row is live iff `boot_id` is this boot's and `expires_ns` is in the future; `info`
//!   is who holds it ([`crate::HolderInfo`], added to older files on open).
//! - `leasehold_fences(key PRIMARY KEY, fence)`: the per-key counter, set in the granting
//!   transaction to `max(fence + 1, the wall clock in µs)`, so fences never go back, not even
//!   when the file is deleted or an old backup restored. A key's counter is deleted once its
//!   fence is older than the horizon and no lease or reader of it lived within the horizon
//!   (`?horizon=`, a day by default; the store's pruning task, `prune.rs`, every quarter of
//!   it, 1,000 rows per transaction): the next grant's fence comes from the clock, above it.
//!
//! Expiry is judged on `CLOCK_BOOTTIME` on Linux (monotonic, counts suspend, shared by all
//! processes of the machine; `CLOCK_MONOTONIC` on macOS and FreeBSD), read
//! inside the write transaction: wall-clock jumps neither extend nor cut a
//! lease, and a reboot (new boot id) frees everything. Commits use WAL with
//! `synchronous=NORMAL` (`docs/design.md` §4.2): a process crash, even mid-commit, loses no
//! commit; a power loss or kernel crash can lose the last ones, whose leases died with the
//! boot, and the next fence then comes from the clock, above every fence handed out, while
//! [`crate::CLOCK_ASSUMPTION`] holds for the machine's clock across the reboot.
//!
//! Waiting (`wait.rs`, `doorbell.rs`): waiters queue by ticket in `leasehold_queue(key, tickets,
//! turn, boot_id, alive_ns)` (`alive_ns`: kept ahead of the boot clock by the key's waiters, so
//! the pruning task deletes only the queues of waiters gone past the horizon); a release calls the next ticket in its transaction and rings the key's doorbell, a
//! file beside the database whose inotify close-write event wakes waiters in every process
//! (Linux; elsewhere they poll at 1–50 ms). Only the called waiter attempts at once. No waiter
//! sleeps past the holder's expiry.
//!
//! A path the store cannot use (permission denied, a read-only file system, a directory where
//! the database file belongs, a file that is not a database) is [`Error::Config`]; another
//! process holding the write lock for longer than the op timeout (SQLite's busy timeout) is
//! [`Error::Unavailable`].

mod boot;
mod config;
mod path;
use config::SqliteUrl;
mod doorbell;
/// The fence resource; its public path is `leasehold::fence::sqlite`.
#[doc(hidden)]
pub mod fence;
mod grant;
mod open;
mod prune;
mod shared;
mod wait;

#[cfg(feature = "tools")]
pub mod tools;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::Limits;
use super::doorbell::Bells;
use crate::store::{AcquireRequest, Attempt, Grant, RenewItem};
use crate::{Error, FenceRepeat, FenceToken, Guarantees, Key, LockKind, OwnerToken, Result, Store};
use crate::{Holder, HolderInfo};

/// The embedded SQLite lease store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    path: PathBuf,
    db: Arc<Mutex<Connection>>,
    /// SQLite's busy timeout (how long a request waits for another process's write lock),
    /// in ms: the op timeout, applied to the connection before its next request.
    busy_ms: Arc<AtomicU64>,
    boot_id: Arc<str>,
    /// This store's waiters, rung by its own releases.
    bells: Arc<Bells>,
    /// Every process's releases, through the file system.
    doorbell: Arc<doorbell::Doorbell>,
    /// How far ahead this store's waiters keep their queue rows' `alive_ns`
    /// ([`wait::WAITER_LIVE`]; shorter in tests).
    waiter_live: Duration,
    /// Every commit fsynced: `sync=full` in this store's URL or recorded in the file.
    full_sync: bool,
    /// Grant attempts and looks at the queue made by this store's waiters.
    #[cfg(test)]
    counts: Arc<wait::Counts>,
}

pub(crate) trait SqlExt<T> {
    fn sql(self) -> Result<T>;
}

impl<T> SqlExt<T> for rusqlite::Result<T> {
    fn sql(self) -> Result<T> {
        self.map_err(|e| {
            use rusqlite::ErrorCode as C;
            match e.sqlite_error_code() {
                Some(C::DatabaseBusy | C::DatabaseLocked) => Error::unavailable(
                    "another process held the SQLite database's write lock for longer than the op \
                     timeout",
                    Some(e.into()),
                ),
                Some(C::ReadOnly | C::CannotOpen | C::PermissionDenied | C::NotADatabase) => {
                    Error::config(
                        format!("the SQLite database cannot be used: {e}"),
                        Some(e.into()),
                    )
                }
                Some(C::DiskFull | C::SystemIoFailure) => {
                    Error::unavailable(format!("SQLite: {e}"), Some(e.into()))
                }
                _ => Error::backend("sqlite", e.to_string(), e),
            }
        })
    }
}

fn ns(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

fn remaining(expires_ns: i64, now: i64) -> Duration {
    Duration::from_nanos(u64::try_from(expires_ns.saturating_sub(now)).unwrap_or(0))
}

fn parse_owner(s: &str) -> Result<OwnerToken> {
    s.parse().map_err(|_| Error::Backend {
        backend: "sqlite",
        message: format!("corrupt owner token {s:?} in leasehold_leases"),
        source: None,
    })
}

fn fence(v: i64) -> FenceToken {
    FenceToken::new(u64::try_from(v).unwrap_or(0))
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and its tables.
    ///
    /// Errors: [`Error::InvalidInput`] for an empty path; [`Error::Config`] when the path
    /// cannot be used (permission denied, a read-only file system, a directory where the file
    /// belongs, a file that is not a SQLite database); [`Error::Unavailable`] when another
    /// process holds the database locked for longer than [`crate::DEFAULT_CONNECT_TIMEOUT`].
    ///
    /// The store forgets an idle key's fence counter after [`crate::horizon::DEFAULT_HORIZON`]
    /// (a `sqlite://PATH?horizon=DUR` URL sets another, through [`crate::Locker::connect`]).
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        let h = crate::horizon::DEFAULT_HORIZON;
        Self::open_within(path.as_ref(), Limits::default(), h, false).await
    }

    async fn open_within(
        path: &Path,
        limits: Limits,
        horizon: Duration,
        full_sync: bool,
    ) -> Result<Self> {
        let path = path.to_owned();
        let store =
            tokio::task::spawn_blocking(move || Self::open_blocking(&path, limits, full_sync))
                .await
                .map_err(|e| Error::backend("sqlite", "open task failed", e))??;
        prune::start(Arc::downgrade(&store.db), horizon, store.boot_id.clone());
        Ok(store)
    }

    fn open_blocking(path: &Path, limits: Limits, full_sync: bool) -> Result<Self> {
        let (conn, boot, full_sync) = open::database(path, limits, full_sync)?;
        let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        Ok(SqliteStore {
            doorbell: Arc::new(doorbell::Doorbell::new(&canon)),
            path: canon,
            db: Arc::new(Mutex::new(conn)),
            busy_ms: Arc::new(AtomicU64::new(limits.op.as_millis() as u64)),
            boot_id: boot.into(),
            bells: Arc::default(),
            waiter_live: wait::WAITER_LIVE,
            full_sync,
            #[cfg(test)]
            counts: Arc::default(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection, &str) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let db = self.db.clone();
        let boot = self.boot_id.clone();
        let busy = Duration::from_millis(self.busy_ms.load(Ordering::Relaxed));
        tokio::task::spawn_blocking(move || {
            let mut c = db.lock().unwrap_or_else(|p| p.into_inner());
            c.busy_timeout(busy).sql()?;
            f(&mut c, &boot)
        })
        .await
        .map_err(|e| Error::backend("sqlite", "worker thread failed", e))?
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn guarantees(&self) -> Guarantees {
        Guarantees {
            backend: "sqlite",
            kind: LockKind::Lease,
            exclusion: "linearizable among the processes of one machine (SQLite write lock, WAL)",
            store_failure: if self.full_sync {
                "the file survives process and machine crashes (sync=full: every commit \
                 fsynced); a reboot frees every lease (boot id); a deleted file or a restored \
                 backup still issues larger fences (the clock floor)"
            } else {
                "the file survives process crashes whole and machine crashes consistent (a \
                 power loss can lose the last commits: synchronous=NORMAL); a reboot frees \
                 every lease (boot id); after a lost commit, a deleted file or a restored \
                 backup fences still grow (the clock floor)"
            },
            expiry: boot::EXPIRY,
            fence: "per-key row set to max(fence + 1, the machine's clock in µs) in the granting \
                    transaction; a key's row idle past the horizon (horizon=, a day by default) \
                    is deleted by the store's pruning task, and its next fence starts from the \
                    clock, above it",
            fence_repeat: FenceRepeat::ClockBacked,
            failure_admits_second_holder: false,
            holders_know_fence: true,
            holders_know_info: true,
            waiting: "tickets in the database; a release calls the next one and rings an inotify \
                      doorbell beside the file (1-50 ms polling where there is no inotify), \
                      never later than the holder's expiry",
            primitives: crate::Primitives::ALL,
        }
    }

    async fn try_acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        let (key, owner, ttl) = (req.key.clone(), req.owner.to_string(), ns(req.ttl));
        let info = req.info.map(HolderInfo::encode);
        let ask = shared::Ask::of(req, false);
        let sent = Instant::now();
        self.blocking(move |c, boot| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate).sql()?;
            let now = boot::now_ns()?;
            let info = info.as_deref();
            let out = match grant::grant_in(&tx, &key, &owner, ttl, boot, now, info, &ask)? {
                Ok(f) => Attempt::Granted(Grant::new(fence(f), sent)),
                Err(left) => Attempt::Busy { holder_expires_in: Some(left) },
            };
            tx.commit().sql()?;
            Ok(out)
        })
        .await
    }

    async fn acquire(&self, req: &AcquireRequest<'_>, until: Option<Instant>) -> Result<Attempt> {
        match until {
            Some(until) => self.acquire_queued(req, until).await,
            None => crate::store::within_op_timeout(req, self.try_acquire(req)).await,
        }
    }

    async fn renew(&self, key: &Key, owner: &OwnerToken, ttl: Duration) -> Result<bool> {
        let item = RenewItem { key: key.clone(), owner: *owner, ttl };
        Ok(self.renew_many(std::slice::from_ref(&item)).await?[0])
    }

    async fn renew_many(&self, items: &[RenewItem]) -> Result<Vec<bool>> {
        let items: Vec<(Key, String, i64)> =
            items.iter().map(|i| (i.key.clone(), i.owner.to_string(), ns(i.ttl))).collect();
        self.blocking(move |c, boot| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate).sql()?;
            let now = boot::now_ns()?;
            let mut out = Vec::with_capacity(items.len());
            {
                let mut st = tx
                    .prepare_cached(
                        "UPDATE leasehold_leases SET expires_ns = ?3
                         WHERE key = ?1 AND owner = ?2 AND boot_id = ?4 AND expires_ns > ?5",
                    )
                    .sql()?;
                for (key, owner, ttl) in &items {
                    let exp = now.saturating_add(*ttl);
                    let n = st.execute(params![key.as_str(), owner, exp, boot, now]).sql()?;
                    out.push(n == 1 || shared::renew_reader(&tx, key, owner, exp, boot, now)?);
                }
            }
            tx.commit().sql()?;
            Ok(out)
        })
        .await
    }

    async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool> {
        let (k, owner, db) = (key.clone(), owner.to_string(), self.path.clone());
        let (deleted, live) = self
            .blocking(move |c, boot| {
                let tx = c.transaction_with_behavior(TransactionBehavior::Immediate).sql()?;
                let now = boot::now_ns()?;
                let row: Option<(String, i64)> = tx
                    .query_row(
                        "DELETE FROM leasehold_leases WHERE key = ?1 AND owner = ?2
                         RETURNING boot_id, expires_ns",
                        params![k.as_str(), owner],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()
                    .sql()?;
                let row = match row {
                    Some(r) => Some(r),
                    None => shared::release_reader(&tx, &k, &owner)?,
                };
                shared::clear_intent(&tx, &k, &owner)?;
                if row.is_some() {
                    wait::call_next(&tx, &k)?;
                }
                tx.commit().sql()?;
                if row.is_some() {
                    doorbell::ring(&db, &k);
                }
                Ok(match row {
                    Some((b, exp)) => (true, b == boot && exp > now),
                    None => (false, false),
                })
            })
            .await?;
        if deleted {
            self.bells.ring(key.as_str());
        }
        Ok(live)
    }

    fn set_op_timeout(&self, op_timeout: Duration) {
        self.busy_ms.store(op_timeout.as_millis() as u64, Ordering::Relaxed);
    }

    async fn forget(&self, key: &Key) -> Result<()> {
        let k = key.clone();
        self.blocking(move |c, _| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate).sql()?;
            let held: bool = tx
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM leasehold_leases WHERE key = ?1)
                         OR EXISTS (SELECT 1 FROM leasehold_readers WHERE key = ?1)",
                    [k.as_str()],
                    |r| r.get(0),
                )
                .sql()?;
            if !held {
                tx.execute("DELETE FROM leasehold_fences WHERE key = ?1", [k.as_str()]).sql()?;
                tx.execute("DELETE FROM leasehold_queue WHERE key = ?1", [k.as_str()]).sql()?;
            }
            tx.commit().sql()
        })
        .await
    }

    async fn holders(&self, key: Option<&Key>) -> Result<Vec<Holder>> {
        let key = key.cloned();
        let rows = self
            .blocking(move |c, boot| {
                let now = boot::now_ns()?;
                let mut st = c
                    .prepare_cached(
                        "SELECT key, owner, fence, expires_ns, info FROM leasehold_leases
                         WHERE boot_id = ?1 AND expires_ns > ?2 AND (?3 IS NULL OR key = ?3)
                         ORDER BY key",
                    )
                    .sql()?;
                let rows = st
                    .query_map(params![boot, now, key.as_ref().map(Key::as_str)], |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, i64>(2)?,
                            r.get::<_, i64>(3)?,
                            r.get::<_, Option<String>>(4)?,
                        ))
                    })
                    .sql()?
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .sql()?;
                let mut rows: Vec<shared::Row> = rows
                    .into_iter()
                    .map(|(k, o, f, e, i)| (k, o, f, e, i, crate::Mode::Exclusive))
                    .collect();
                rows.extend(shared::readers(c, key.as_ref(), boot, now)?);
                rows.sort_by(|a, b| a.0.cmp(&b.0));
                Ok((rows, now))
            })
            .await?;
        let (rows, now) = rows;
        rows.into_iter()
            .map(|(k, o, f, exp, info, mode)| {
                Ok(Holder::new(
                    Key::new(k)?,
                    parse_owner(&o)?,
                    Some(fence(f)),
                    Some(remaining(exp, now)),
                )
                .with_info(info.as_deref().and_then(HolderInfo::decode))
                .with_mode(mode))
            })
            .collect()
    }
}

/// `sqlite://PATH[?horizon=DUR&sync=full]`.
pub(crate) const STORE: super::Descriptor = super::Descriptor {
    form: "sqlite://PATH[?horizon=DUR&sync=full]",
    usage: "sqlite://PATH[?horizon=DUR&sync=full]",
    summary: "embedded lease table (the default)",
    parse: |url| super::parsed(SqliteUrl::parse(url)),
};

impl super::StoreConfig for SqliteUrl {
    fn open(&self, limits: Limits) -> super::Boxed<'_, Result<Arc<dyn Store>>> {
        super::opened(SqliteStore::open_within(&self.path, limits, self.horizon, self.full_sync))
    }

    fn probe<'a>(
        &'a self,
        p: &'a mut crate::probe::findings::Probe,
    ) -> super::Boxed<'a, std::result::Result<(), String>> {
        self.describe(p);
        Box::pin(std::future::ready(Ok(())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error of a write lock held past the op timeout reads as one sentence (it had a
    /// run of spaces in the middle, printed as such by `leasehold`).
    #[test]
    fn a_busy_database_is_unavailable_in_one_sentence() {
        let busy = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
            Some("database is locked".into()),
        );
        let e = Err::<(), _>(busy).sql().unwrap_err();
        let Error::Unavailable { message, .. } = e else { panic!("not unavailable: {e:?}") };
        assert_eq!(
            message,
            "another process held the SQLite database's write lock for longer than the op timeout"
        );
    }

    /// A reboot frees every lease: a grant recorded under another boot id is dead, even with
    /// an expiry far in the future, and the fence still grows past it.
    #[tokio::test]
    async fn grants_of_another_boot_are_dead() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("s.db")).await.unwrap();
        let stale = OwnerToken::generate().unwrap().to_string();
        store
            .blocking(move |c, _| {
                c.execute_batch(&format!(
                    "INSERT INTO leasehold_fences VALUES ('k', 7);
                     INSERT INTO leasehold_leases (key, owner, fence, boot_id, expires_ns)
                       VALUES ('k', '{stale}', 7, 'another-boot', {});",
                    i64::MAX
                ))
                .sql()
            })
            .await
            .unwrap();
        assert!(store.holders(None).await.unwrap().is_empty());
        let key = Key::new("k").unwrap();
        let owner = OwnerToken::generate().unwrap();
        let req = AcquireRequest {
            key: &key,
            owner: &owner,
            ttl: Duration::from_secs(30),
            op_timeout: Duration::from_secs(5),
            info: None,
            mode: Default::default(),
            slot: None,
        };
        match store.try_acquire(&req).await.unwrap() {
            Attempt::Granted(g) => assert!(g.fence.get() > 7, "{:?}", g.fence),
            Attempt::Busy { .. } => panic!("a previous boot's grant blocked the key"),
        }
    }

    /// A file made by a version without `leasehold_leases.info` (nor the queue's
    /// `boot_id`, `alive_ns`) gets the columns when opened, keeping its rows, and then keeps
    /// holder info.
    #[tokio::test]
    async fn an_older_file_gets_the_info_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(
                "CREATE TABLE leasehold_leases (key TEXT PRIMARY KEY NOT NULL, owner TEXT NOT NULL,
                   fence INTEGER NOT NULL, boot_id TEXT NOT NULL, expires_ns INTEGER NOT NULL);
                 CREATE TABLE leasehold_fences (key TEXT PRIMARY KEY NOT NULL, fence INTEGER NOT NULL);
                 INSERT INTO leasehold_fences VALUES ('k', 41);
                 CREATE TABLE leasehold_queue (key TEXT PRIMARY KEY NOT NULL,
                   tickets INTEGER NOT NULL, turn INTEGER NOT NULL);
                 INSERT INTO leasehold_queue VALUES ('q', 2, 1);",
            )
            .unwrap();
        }
        let store = SqliteStore::open(&path).await.unwrap();
        let key = Key::new("k").unwrap();
        let owner = OwnerToken::generate().unwrap();
        let info = HolderInfo::this_process().with_command("old file");
        let req = AcquireRequest {
            key: &key,
            owner: &owner,
            ttl: Duration::from_secs(30),
            op_timeout: Duration::from_secs(5),
            info: Some(&info),
            mode: Default::default(),
            slot: None,
        };
        match store.try_acquire(&req).await.unwrap() {
            Attempt::Granted(g) => assert!(g.fence.get() > 41),
            Attempt::Busy { .. } => panic!("busy"),
        }
        let h = store.holders(Some(&key)).await.unwrap();
        assert_eq!(h[0].info.as_ref(), Some(&info));
        // The queue got its waiters' columns, its row kept (NULL: written by the old version).
        let q = store
            .blocking(|c, _| {
                c.query_row(
                    "SELECT tickets, turn, boot_id, alive_ns FROM leasehold_queue WHERE key = 'q'",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
                .sql()
            })
            .await
            .unwrap();
        assert_eq!(q, (2i64, 1i64, None::<String>, None::<i64>));
        // A second open finds the column there.
        drop(store);
        SqliteStore::open(&path).await.unwrap();
    }

    /// The durability `docs/design.md` §4.2 argues for: WAL, commits written but not fsynced
    /// (`synchronous=NORMAL`: a process crash loses nothing; a power loss ends the boot whose
    /// leases the lost commits held, and fences restart from the clock); `sync=full` fsyncs
    /// every commit, and says so in its guarantees; another value is refused.
    #[tokio::test]
    async fn commits_are_wal_and_fsynced_only_with_sync_full() {
        let dir = tempfile::tempdir().unwrap();
        for (full, want) in [(false, 1), (true, 2)] {
            let path = dir.path().join(format!("s{full}.db"));
            let h = crate::horizon::DEFAULT_HORIZON;
            let store = SqliteStore::open_within(&path, Limits::default(), h, full).await.unwrap();
            let (mode, sync) = store
                .blocking(|c, _| {
                    let mode: String =
                        c.query_row("PRAGMA journal_mode", [], |r| r.get(0)).sql()?;
                    let sync: i64 = c.query_row("PRAGMA synchronous", [], |r| r.get(0)).sql()?;
                    Ok((mode, sync))
                })
                .await
                .unwrap();
            assert_eq!((mode.as_str(), sync), ("wal", want), "journal_mode, synchronous");
            let says = store.guarantees().store_failure;
            assert_eq!(says.contains("sync=full"), full, "{says}");
        }
        // A file once opened with sync=full keeps it for every later opener.
        let path = dir.path().join("strue.db");
        let h = crate::horizon::DEFAULT_HORIZON;
        let later = SqliteStore::open_within(&path, Limits::default(), h, false).await.unwrap();
        let sync = later
            .blocking(|c, _| c.query_row("PRAGMA synchronous", [], |r| r.get::<_, i64>(0)).sql())
            .await
            .unwrap();
        assert_eq!(sync, 2, "a later opener without sync=full still fsyncs");
        assert!(later.guarantees().store_failure.contains("sync=full"));
        let url = |q: &str| format!("sqlite://{}/u.db{q}", dir.path().display());
        assert!(SqliteUrl::parse(&url("?sync=full")).unwrap().full_sync);
        assert!(!SqliteUrl::parse(&url("?sync=normal")).unwrap().full_sync);
        assert!(!SqliteUrl::parse(&url("")).unwrap().full_sync);
        let e = SqliteUrl::parse(&url("?sync=off")).unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{e:?}");
    }
}
