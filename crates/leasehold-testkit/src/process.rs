//! Scenarios across OS processes, driven through the `lh-worker` binary.
//!
//! Children are started by the scenario, killed when their handle drops (also when stopped),
//! and only ever signalled by the scenario that started them.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use leasehold::fence::Fencing;
use leasehold::fence::sqlite::rusqlite::{Connection, OptionalExtension, TransactionBehavior};
use leasehold::{Error, Locker, Wait};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::conformance::unique_key;

/// A child process, SIGKILLed on drop.
pub struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Option<Lines<BufReader<ChildStdout>>>,
}

impl Proc {
    /// Starts `program args…` with piped stdin/stdout.
    pub fn spawn(program: &Path, args: &[&str]) -> Proc {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().map(|o| BufReader::new(o).lines());
        Proc { child, stdin, stdout }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id().expect("child still running") as i32)
    }

    /// Freezes the process (a GC pause, a VM migration).
    pub fn stop(&self) {
        kill(self.pid(), Signal::SIGSTOP).expect("SIGSTOP");
    }

    /// Resumes it.
    pub fn cont(&self) {
        kill(self.pid(), Signal::SIGCONT).expect("SIGCONT");
    }

    /// Kills it outright.
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    /// Next line of its stdout (bounded wait).
    pub async fn line(&mut self) -> String {
        let out = self.stdout.as_mut().expect("stdout piped");
        tokio::time::timeout(Duration::from_secs(60), out.next_line())
            .await
            .expect("worker said nothing for 60 s")
            .expect("read worker stdout")
            .expect("worker closed stdout")
    }

    /// Sends a line to its stdin.
    pub async fn send(&mut self, line: &str) {
        let i = self.stdin.as_mut().expect("stdin piped");
        i.write_all(format!("{line}\n").as_bytes()).await.expect("write worker stdin");
        i.flush().await.expect("flush worker stdin");
    }

    /// Waits for exit (bounded) and returns the exit code.
    pub async fn wait(&mut self) -> i32 {
        let st = tokio::time::timeout(Duration::from_secs(180), self.child.wait())
            .await
            .expect("worker did not exit within 180 s")
            .expect("wait for worker");
        st.code().unwrap_or(-1)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(id) = self.child.id() {
            let _ = kill(Pid::from_raw(id as i32), Signal::SIGCONT);
        }
    }
}

/// The protected resource of the stalled-holder scenario: one value, in a SQLite table
/// (`sqlite:PATH`) or a Redis key (`redis://…`), with leasehold's fence table or fence hash
/// beside it.
pub mod resource {
    use super::*;
    use leasehold::fence::redis::RedisFence;

    /// The resource's name in the fence table / hash.
    pub const NAME: &str = "row-1";
    const REDIS_KEY: &str = "{row-1}:value";

    /// An open resource.
    pub enum Resource {
        /// A SQLite database.
        Sqlite(Connection),
        /// A Redis server.
        Redis(RedisFence, leasehold::fence::redis::redis::aio::ConnectionManager),
        /// A PostgreSQL schema (the one `search_path` names).
        Postgres(leasehold::fence::postgres::tokio_postgres::Client),
        /// A MySQL/MariaDB database.
        Mysql(leasehold::fence::mysql::mysql_async::Conn),
        /// An etcd cluster, fenced by the lock keys themselves (no claim step).
        Etcd(Box<(leasehold::fence::etcd::EtcdFence, leasehold::backends::etcd::EtcdStore)>),
    }

    const ETCD_KEY: &str = "leasehold-test/row-1";

    const DATA: &str =
        "CREATE TABLE IF NOT EXISTS data (id VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL)";

    /// Opens `sqlite:PATH`, `redis://HOST:PORT`, `postgres://…?options=-csearch_path%3DS`,
    /// `mysql://…/DB` or `etcd://…` (the lock store's own URL), setting up the fence table if
    /// needed.
    pub async fn open(spec: &str) -> Resource {
        if spec.starts_with("etcd://") {
            let store =
                leasehold::backends::etcd::EtcdStore::connect(spec).await.expect("resource etcd");
            return Resource::Etcd(Box::new((
                leasehold::fence::etcd::EtcdFence::for_store(&store),
                store,
            )));
        }
        if spec.starts_with("postgres") {
            use leasehold::fence::postgres::tokio_postgres;
            let (db, conn) =
                tokio_postgres::connect(spec, tokio_postgres::NoTls).await.expect("resource pg");
            tokio::spawn(conn);
            let path: String = db.query_one("SHOW search_path", &[]).await.unwrap().get(0);
            db.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {path}")).await.unwrap();
            leasehold::fence::postgres::install(&db).await.expect("fence table");
            db.batch_execute(DATA).await.unwrap();
            return Resource::Postgres(db);
        }
        if spec.starts_with("mysql") {
            use leasehold::fence::mysql::mysql_async::{self, prelude::Queryable};
            let mut db = mysql_async::Conn::from_url(spec).await.expect("resource mysql");
            leasehold::fence::mysql::install(&mut db).await.expect("fence table");
            db.query_drop(DATA).await.unwrap();
            return Resource::Mysql(db);
        }
        if let Some(path) = spec.strip_prefix("sqlite:") {
            let db = Connection::open(path).expect("open resource db");
            db.busy_timeout(Duration::from_secs(10)).unwrap();
            leasehold::fence::sqlite::install(&db).expect("fence table");
            db.execute_batch(
                "CREATE TABLE IF NOT EXISTS data (id TEXT PRIMARY KEY, value TEXT NOT NULL)",
            )
            .unwrap();
            Resource::Sqlite(db)
        } else {
            let client = leasehold::fence::redis::redis::Client::open(spec).expect("redis url");
            let conn = client.get_connection_manager().await.expect("connect resource redis");
            Resource::Redis(RedisFence::new(conn.clone()), conn)
        }
    }

    impl Resource {
        /// Claims the resource for `fencing` (before the first effect).
        pub async fn claim(&mut self, fencing: &Fencing) -> leasehold::Result<()> {
            match self {
                Resource::Sqlite(db) => {
                    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
                    leasehold::fence::sqlite::claim(&tx, NAME, fencing)?;
                    tx.commit().unwrap();
                    Ok(())
                }
                Resource::Redis(f, _) => f.claim(NAME, fencing).await,
                // The lock key is the fence: nothing to install.
                Resource::Etcd(..) => Ok(()),
                Resource::Postgres(db) => {
                    let tx = db.transaction().await.unwrap();
                    leasehold::fence::postgres::claim(&tx, NAME, fencing).await?;
                    tx.commit().await.unwrap();
                    Ok(())
                }
                Resource::Mysql(db) => {
                    let mut tx = db.start_transaction(Default::default()).await.unwrap();
                    leasehold::fence::mysql::claim(&mut tx, NAME, fencing).await?;
                    tx.commit().await.unwrap();
                    Ok(())
                }
            }
        }

        /// Writes `value`; with `fencing`, only if its fence is still the installed one,
        /// checked atomically with the write.
        pub async fn write(
            &mut self,
            fencing: Option<&Fencing>,
            value: &str,
        ) -> leasehold::Result<()> {
            match (self, fencing) {
                (Resource::Sqlite(db), fencing) => {
                    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
                    if let Some(f) = fencing {
                        leasehold::fence::sqlite::check(&tx, NAME, f)?;
                    }
                    tx.execute(
                        "INSERT OR REPLACE INTO data (id, value) VALUES ('row-1', ?1)",
                        [value],
                    )
                    .unwrap();
                    tx.commit().unwrap();
                    Ok(())
                }
                (Resource::Redis(f, _), Some(fencing)) => {
                    f.set(NAME, fencing, REDIS_KEY, value).await
                }
                (Resource::Postgres(db), fencing) => {
                    let tx = db.transaction().await.unwrap();
                    if let Some(f) = fencing {
                        leasehold::fence::postgres::check(&tx, NAME, f).await?;
                    }
                    tx.execute(
                        "INSERT INTO data (id, value) VALUES ('row-1', $1)
                         ON CONFLICT (id) DO UPDATE SET value = excluded.value",
                        &[&value],
                    )
                    .await
                    .unwrap();
                    tx.commit().await.unwrap();
                    Ok(())
                }
                (Resource::Mysql(db), fencing) => {
                    use leasehold::fence::mysql::mysql_async::prelude::Queryable;
                    let mut tx = db.start_transaction(Default::default()).await.unwrap();
                    if let Some(f) = fencing {
                        leasehold::fence::mysql::check(&mut tx, NAME, f).await?;
                    }
                    tx.exec_drop("REPLACE INTO data (id, value) VALUES ('row-1', ?)", (value,))
                        .await
                        .unwrap();
                    tx.commit().await.unwrap();
                    Ok(())
                }
                (Resource::Etcd(r), Some(fencing)) => r.0.put(fencing, ETCD_KEY, value).await,
                (Resource::Etcd(r), None) => {
                    let put = leasehold::backends::etcd::rpc::PutRequest {
                        key: ETCD_KEY.into(),
                        value: value.into(),
                        ..Default::default()
                    };
                    r.1.client().put(put).await.expect("plain PUT");
                    Ok(())
                }
                (Resource::Redis(_, conn), None) => {
                    let _: () = leasehold::fence::redis::redis::cmd("SET")
                        .arg(REDIS_KEY)
                        .arg(value)
                        .query_async(conn)
                        .await
                        .expect("plain SET");
                    Ok(())
                }
            }
        }

        /// The current value.
        pub async fn read(&mut self) -> Option<String> {
            match self {
                Resource::Sqlite(db) => db
                    .query_row("SELECT value FROM data WHERE id = 'row-1'", [], |r| r.get(0))
                    .optional()
                    .unwrap(),
                Resource::Postgres(db) => db
                    .query_opt("SELECT value FROM data WHERE id = 'row-1'", &[])
                    .await
                    .unwrap()
                    .map(|r| r.get(0)),
                Resource::Mysql(db) => {
                    use leasehold::fence::mysql::mysql_async::prelude::Queryable;
                    db.query_first("SELECT value FROM data WHERE id = 'row-1'").await.unwrap()
                }
                Resource::Etcd(r) => {
                    let get = leasehold::backends::etcd::rpc::RangeRequest::key(ETCD_KEY);
                    r.1.client()
                        .range(get)
                        .await
                        .expect("GET")
                        .kvs
                        .first()
                        .map(|kv| String::from_utf8_lossy(&kv.value).into_owned())
                }
                Resource::Redis(_, conn) => leasehold::fence::redis::redis::cmd("GET")
                    .arg(REDIS_KEY)
                    .query_async(conn)
                    .await
                    .expect("GET"),
            }
        }
    }
}

/// Starts an `lh-worker hold` process: it acquires `key`, claims and writes the resource, says
/// `ready FENCE`, and on `write` writes again and says `accepted` or `rejected: …`.
fn spawn_holder(
    worker: &Path,
    url: &str,
    key: &str,
    ttl_ms: u64,
    resource: &str,
    fenced: bool,
) -> Proc {
    let ttl = ttl_ms.to_string();
    let fenced = if fenced { "1" } else { "0" };
    Proc::spawn(
        worker,
        &[
            "hold",
            "--store",
            url,
            "--key",
            key,
            "--ttl-ms",
            &ttl,
            "--resource",
            resource,
            "--fenced",
            fenced,
        ],
    )
}

/// Asserts the fenced run's outcome: the resumed holder's write was refused and the
/// successor's value stands.
#[track_caller]
pub fn assert_stale_write_rejected(r: &StallReport) {
    assert!(r.fences.1 > r.fences.0, "{r:?}");
    assert!(!r.stale_write_accepted, "the resumed holder's stale write got through: {r:?}");
    assert!(r.holder_said.starts_with("rejected: stale fence"), "{r:?}");
    assert_eq!(r.final_value.as_deref(), Some("successor"), "{r:?}");
}

/// Asserts the control's outcome: without fencing the stale write landed over the
/// successor's, so the fenced assertion above is able to fail.
#[track_caller]
pub fn assert_stale_write_accepted(r: &StallReport) {
    assert!(r.stale_write_accepted, "{r:?}");
    assert_eq!(r.final_value.as_deref(), Some("holder-stale"), "{r:?}");
}

/// `procs` worker processes × `iters` critical sections on one key: the recorded history must
/// show no overlap, fences increasing in time order, and no lost update on a shared counter.
pub async fn multi_process_mutex(url: &str, worker: &Path, procs: usize, iters: usize) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("multi-process");
    let counter = dir.path().join("counter");
    let iters_s = iters.to_string();
    let mut children: Vec<Proc> = (0..procs)
        .map(|i| {
            let hist = dir.path().join(format!("p{i}.hist"));
            Proc::spawn(
                worker,
                &[
                    "mutex",
                    "--store",
                    url,
                    "--key",
                    &key,
                    "--iters",
                    &iters_s,
                    "--history",
                    hist.to_str().unwrap(),
                    "--counter",
                    counter.to_str().unwrap(),
                ],
            )
        })
        .collect();
    for (i, c) in children.iter_mut().enumerate() {
        assert_eq!(c.wait().await, 0, "worker {i} failed");
    }
    let report = crate::history::check_dir(dir.path()).unwrap();
    assert_eq!(report.intervals, procs * iters, "{report:?}");
    assert!(report.ok(), "mutual exclusion violated across processes: {report:#?}");
    let n: usize = std::fs::read_to_string(&counter).unwrap().trim().parse().unwrap();
    assert_eq!(n, procs * iters, "lost updates on the shared counter");
}

/// What the stalled-holder scenario observed.
#[derive(Debug)]
pub struct StallReport {
    /// Whether the resumed holder's write was applied.
    pub stale_write_accepted: bool,
    /// What the holder printed about it.
    pub holder_said: String,
    /// The resource's final value.
    pub final_value: Option<String>,
    /// The holder's and the successor's fences.
    pub fences: (u64, u64),
}

/// DESIGN §8: a holder (a separate process) takes the lease with auto-renew, claims the
/// resource and writes; it is SIGSTOPped past its TTL; a successor acquires, claims and
/// writes; the holder is resumed and writes again. With `fenced`, every write is checked
/// against the fence table; without, none is (the control).
pub async fn stalled_holder(
    locker: &Locker,
    url: &str,
    worker: &Path,
    resource_spec: &str,
    fenced: bool,
) -> StallReport {
    let mut res = resource::open(resource_spec).await;
    let key = unique_key("stalled");
    let ttl = Duration::from_millis(1000);
    let mut holder = spawn_holder(worker, url, &key, ttl.as_millis() as u64, resource_spec, fenced);
    let ready = holder.line().await;
    let holder_fence: u64 = ready
        .strip_prefix("ready ")
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| panic!("holder said {ready:?}"));
    holder.stop();

    // The successor gets the key only once the store has expired the frozen holder's lease.
    let lease = locker
        .acquire(&key, Duration::from_secs(30))
        .wait(Wait::For(Duration::from_secs(30)))
        .await
        .expect("successor acquires after the frozen holder's lease expired");
    assert!(lease.fence().get() > holder_fence);
    let fencing = lease.fencing();
    if fenced {
        res.claim(&fencing).await.expect("successor claims");
    }
    res.write(fenced.then_some(&fencing), "successor").await.expect("successor writes");

    holder.cont();
    holder.send("write").await;
    let said = holder.line().await;
    assert_eq!(holder.wait().await, 0, "holder worker failed");
    let final_value = res.read().await;
    assert!(lease.release().await.unwrap());
    StallReport {
        stale_write_accepted: said == "accepted",
        holder_said: said,
        final_value,
        fences: (holder_fence, fencing.token().get()),
    }
}

/// A stale release (the old holder's, retried after a successor acquired), sent through the
/// same store and through a second store as another process would, answers not-owner and
/// leaves the successor's grant in place.
pub async fn stale_release_keeps_successor(locker: &Locker, url: &str) {
    let key = unique_key("stale-release");
    let a = locker.acquire(&key, Duration::from_secs(30)).await.unwrap();
    let a_owner = a.owner();
    assert!(a.release().await.unwrap());
    let b = locker.acquire(&key, Duration::from_secs(30)).await.unwrap();
    assert!(!locker.release_by_owner(&key, &a_owner).await.unwrap());
    let other = Locker::connect(url).await.unwrap();
    assert!(!other.release_by_owner(&key, &a_owner).await.unwrap());
    let h = locker.holders(Some(&key)).await.unwrap();
    assert_eq!(h.iter().map(|h| h.owner).collect::<Vec<_>>(), vec![b.owner()]);
    assert_eq!(h[0].fence, Some(b.fence()));
    assert!(b.release().await.unwrap());
}

/// Session stores: a frozen holder keeps its lock (nothing expires while the process lives),
/// and its death hands the lock over promptly.
pub async fn stalled_session_holder_keeps_lock(locker: &Locker, url: &str, worker: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let spec = format!("sqlite:{}", dir.path().join("resource.db").display());
    let key = unique_key("stalled-session");
    let mut holder = spawn_holder(worker, url, &key, 500, &spec, true);
    let ready = holder.line().await;
    assert!(ready.starts_with("ready "), "holder said {ready:?}");
    holder.stop();
    let r =
        locker.acquire(&key, Duration::from_secs(30)).wait(Wait::For(Duration::from_secs(2))).await;
    assert!(matches!(r, Err(Error::Busy { .. })), "a frozen session holder lost its lock: {r:?}");
    holder.kill().await;
    let lease = locker
        .acquire(&key, Duration::from_secs(30))
        .wait(Wait::For(Duration::from_secs(10)))
        .await
        .expect("the holder's death releases the lock");
    assert!(lease.release().await.unwrap());
}
