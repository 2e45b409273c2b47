//! A batch worker that starts an item only while `lease.admit()` says it can finish it.
//!
//! Each round takes a short lease on the batch (no auto-renew: a fixed time budget per
//! holder) and works through pending items one by one. Before each item it asks
//! `lease.admit()`, which turns false `margin` (here: one item's time) before the lease's
//! local deadline (and, with auto-renew, as soon as a renewal is overdue): an item started
//! later might still be running when another holder is granted the batch. So the round
//! stops starting items, releases, and the next round (here the same process; in production
//! the next cron run, or another host) picks up where it stopped. `admit()` is liveness; the
//! fence check written with each item is what keeps a holder that stalled *inside* an item
//! from marking it after its lease ended.
//!
//!     cargo run -p leasehold-examples --bin batch-admit
//!
//! `LEASEHOLD_STORE` picks the lock store (an SQLite file in a temporary directory by
//! default); the items live in an SQLite file of their own.

use std::time::Duration;

use leasehold::Locker;
use leasehold::fence::Fencing;
use leasehold::fence::sqlite::rusqlite::{Connection, OptionalExtension, TransactionBehavior};

type JobResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const ITEMS: i64 = 12;
/// How long one item takes.
const ITEM: Duration = Duration::from_millis(250);
/// The lease each round takes: room for about six items.
const TTL: Duration = Duration::from_secs(2);

fn open_items(path: &std::path::Path) -> JobResult<Connection> {
    let db = Connection::open(path)?;
    db.busy_timeout(Duration::from_secs(5))?;
    leasehold::fence::sqlite::install(&db)?;
    db.execute_batch("CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, done_by INTEGER)")?;
    for id in 1..=ITEMS {
        db.execute("INSERT OR IGNORE INTO items (id) VALUES (?1)", [id])?;
    }
    Ok(db)
}

/// The next item nobody finished, if any.
fn next_item(db: &Connection) -> JobResult<Option<i64>> {
    Ok(db
        .query_row("SELECT id FROM items WHERE done_by IS NULL ORDER BY id LIMIT 1", [], |r| {
            r.get(0)
        })
        .optional()?)
}

/// Marks `id` done, checked against the batch's fence in the same transaction.
fn finish(db: &mut Connection, fencing: &Fencing, id: i64) -> JobResult<()> {
    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
    leasehold::fence::sqlite::check(&tx, "batch", fencing)?;
    tx.execute("UPDATE items SET done_by = ?1 WHERE id = ?2", (fencing.token().as_i64(), id))?;
    tx.commit()?;
    Ok(())
}

/// One holder's round: items until `admit()` says stop, or none are left. Answers how many
/// it did.
async fn round(locker: &Locker, db: &mut Connection, n: u32) -> JobResult<u32> {
    // The margin is what admit() keeps in hand: at least one item, so an item it admits
    // ends before the local deadline (the default, ttl/10, is shorter than an item here).
    let lease = locker.acquire("batch", TTL).auto_renew(false).margin(ITEM).await?;
    let fencing = lease.fencing();
    {
        let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
        leasehold::fence::sqlite::claim(&tx, "batch", &fencing)?;
        tx.commit()?;
    }
    let mut done = 0;
    while let Some(id) = next_item(db)? {
        if !lease.admit() {
            let left = lease.time_left().unwrap_or_default();
            println!(
                "round {n}: not starting item {id}: {left:?} left on the lease, an item takes \
                 {ITEM:?}; leaving it to the next holder"
            );
            break;
        }
        // The work itself, cancelled if the lease is lost meanwhile.
        lease.guard(tokio::time::sleep(ITEM)).await?;
        finish(db, &fencing, id)?;
        done += 1;
    }
    if lease.release().await?.may_have_overlapped() {
        eprintln!("round {n}: warning: the lease had lapsed before the release");
    }
    Ok(done)
}

#[tokio::main]
async fn main() -> JobResult<()> {
    let dir = tempfile::tempdir()?;
    let store = std::env::var("LEASEHOLD_STORE")
        .unwrap_or_else(|_| format!("sqlite://{}/leases.db", dir.path().display()));
    let locker = Locker::connect(&store).await?;
    let mut db = open_items(&dir.path().join("items.db"))?;
    let mut n = 1;
    while next_item(&db)?.is_some() {
        let done = round(&locker, &mut db, n).await?;
        println!("round {n}: finished {done} item(s)");
        n += 1;
    }
    println!("all {ITEMS} items done in {} rounds", n - 1);
    Ok(())
}
