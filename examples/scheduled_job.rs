//! A scheduled job that runs once per cluster per period.
//!
//! Start it from cron (or a systemd timer) on every node. One node takes the lease for the
//! period and does the work; the others find the key busy, or the period already done, and
//! exit 0. The "done" mark is written under the grant's fence, so a holder that stalled past
//! its lease cannot mark (or redo) a period its successor owns.
//!
//!     LEASEHOLD_STORE=postgres://app@db/app cargo run -p leasehold-examples --bin scheduled-job
//!
//! Without `LEASEHOLD_STORE` it uses an SQLite file in a temporary directory and runs three
//! "nodes" as tasks, so the output shows one doing the work.

use std::time::Duration;

use leasehold::Locker;
use leasehold::fence::Fencing;
use leasehold::fence::sqlite::rusqlite::{Connection, OptionalExtension, TransactionBehavior};

const PERIOD: &str = "2026-11-30";

/// The job's errors: leasehold's and the database driver's, both through `?`. (An enum of
/// your own with `#[from] leasehold::Error` works the same; match leasehold's with
/// `e.downcast_ref::<leasehold::Error>()` here.)
type JobResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The job's own database: a done-mark per period, and the fence table guarding it.
fn open_marks(path: &std::path::Path) -> JobResult<Connection> {
    let db = Connection::open(path)?;
    db.busy_timeout(Duration::from_secs(5))?;
    leasehold::fence::sqlite::install(&db)?;
    db.execute_batch(
        "CREATE TABLE IF NOT EXISTS done (period TEXT PRIMARY KEY, node TEXT NOT NULL)",
    )?;
    Ok(db)
}

/// Claims the resource with this grant; answers who did the period, if anyone.
fn claim(marks: &std::path::Path, fencing: &Fencing) -> JobResult<Option<String>> {
    let mut db = open_marks(marks)?;
    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
    leasehold::fence::sqlite::claim(&tx, "nightly-report", fencing)?;
    let done = tx
        .query_row("SELECT node FROM done WHERE period = ?1", [PERIOD], |r| r.get(0))
        .optional()?;
    tx.commit()?;
    Ok(done)
}

/// Marks the period done, checked against the fence in the same transaction.
fn mark_done(marks: &std::path::Path, fencing: &Fencing, node: &str) -> JobResult<()> {
    let mut db = open_marks(marks)?;
    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
    leasehold::fence::sqlite::check(&tx, "nightly-report", fencing)?;
    tx.execute("INSERT INTO done (period, node) VALUES (?1, ?2)", [PERIOD, node])?;
    tx.commit()?;
    Ok(())
}

async fn node(name: &str, locker: Locker, marks: std::path::PathBuf) -> JobResult<()> {
    let key = format!("nightly-report:{PERIOD}");
    // Renewed in the background (the default) while the work runs.
    let lease = match locker.acquire(&key, Duration::from_secs(30)).await {
        Ok(lease) => lease,
        // Busy: another node holds it. HeldByThisLocker: in this demo the "nodes" are tasks
        // sharing one locker, so another of them holds it.
        Err(e) if e.is_busy() || matches!(e, leasehold::Error::HeldByThisLocker { .. }) => {
            println!("{name}: another node is running {key}; nothing to do");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let fencing = lease.fencing();
    if let Some(by) = claim(&marks, &fencing)? {
        println!("{name}: {PERIOD} was already done by {by}");
        let _ = lease.release().await?; // nothing was written: either answer is fine
        return Ok(());
    }
    // The work, cancelled if the lease is lost.
    lease
        .guard(async {
            println!("{name}: building the report for {PERIOD} under fence {}", fencing.token());
            tokio::time::sleep(Duration::from_millis(300)).await;
        })
        .await?;
    mark_done(&marks, &fencing, name)?;
    println!("{name}: done");
    if lease.release().await?.may_have_overlapped() {
        // The mark was written under the fence, so it is safe; but the lease lapsed while we
        // worked: the TTL is too short for this job (see "Sizing a lease" in the guide).
        eprintln!("{name}: warning: the lease had lapsed before the release");
    }
    Ok(())
}

#[tokio::main]
async fn main() -> JobResult<()> {
    let dir = tempfile::tempdir()?;
    let store = std::env::var("LEASEHOLD_STORE")
        .unwrap_or_else(|_| format!("sqlite://{}/leases.db", dir.path().display()));
    let marks = dir.path().join("marks.db");
    let locker = Locker::connect(&store).await?;
    // Three nodes start at the same moment, then one more comes late.
    let nodes: Vec<_> = ["node-a", "node-b", "node-c"]
        .into_iter()
        .map(|n| tokio::spawn(node(n, locker.clone(), marks.clone())))
        .collect();
    for n in nodes {
        n.await??;
    }
    node("node-late", locker, marks).await
}
