//! A fenced PostgreSQL write: the stalled holder's late write is refused by the database.
//!
//!     DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
//!         cargo run -p leasehold-examples --bin fenced-postgres-write
//!
//! Holder A takes a short lease and writes; it then "stalls" (sleeps past its lease without
//! renewing, as a GC pause or a frozen VM would). B gets the key, claims the resource with its
//! larger fence and writes. A wakes up and writes again: the check refuses at once, since A's
//! own lease ran out (a `Fencing` from `lease.fencing()` carries the lease's local deadline).
//! The same token presented without that deadline, as a process that only has
//! `LEASEHOLD_FENCE` would, is refused by the fence table inside the same transaction as the
//! write, so the row keeps B's value. The example then shows the one-statement fence column
//! on a table of your own. It works in a schema of its own and drops it at the end. The
//! leases are on an SQLite file (any store works the same).

use std::time::Duration;

use leasehold::fence::postgres::{self as fence, tokio_postgres};
use leasehold::{Error, Locker, Wait};

async fn write(
    db: &mut tokio_postgres::Client,
    fencing: &leasehold::fence::Fencing,
    value: &str,
) -> Result<(), Error> {
    let tx = db.transaction().await.unwrap();
    fence::check(&tx, "report", fencing).await?;
    tx.execute("UPDATE report SET body = $1 WHERE id = 1", &[&value]).await.unwrap();
    fence::commit(tx, fencing).await // refused once the lease's time is up
}

/// Installs the grant on the resource, before its first effect.
async fn claim(
    db: &mut tokio_postgres::Client,
    fencing: &leasehold::fence::Fencing,
) -> Result<(), Error> {
    let tx = db.transaction().await.unwrap();
    fence::claim(&tx, "report", fencing).await?;
    fence::commit(tx, fencing).await
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let schema =
        format!("leasehold_example_{}", &leasehold::OwnerToken::generate()?.to_string()[..8]);
    let (mut db, conn) =
        tokio_postgres::connect(&url, tokio_postgres::NoTls).await.map_err(|e| {
            Error::Unavailable { message: format!("cannot reach {url}: {e}"), source: None }
        })?;
    tokio::spawn(conn);
    db.batch_execute(&format!(
        "CREATE SCHEMA {schema}; SET search_path = {schema};
         CREATE TABLE report (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
         INSERT INTO report VALUES (1, 'empty', 0);"
    ))
    .await
    .unwrap();
    fence::install(&db).await?;

    let dir = tempfile::tempdir().unwrap();
    let locker = Locker::connect(&format!("sqlite://{}/leases.db", dir.path().display())).await?;

    // A: a 1 s lease, claim, first write.
    let a = locker.acquire("report", Duration::from_secs(1)).await?;
    let fa = a.fencing();
    claim(&mut db, &fa).await?;
    write(&mut db, &fa, "written by A").await?;
    println!("A (fence {}) wrote", fa.token());

    // A stalls past its lease; B takes over (it waits for the store to expire A's lease).
    let a = a.detach(); // A stops renewing and releasing: it is frozen
    let b = locker
        .acquire("report", Duration::from_secs(30))
        .wait(Wait::For(Duration::from_secs(10)))
        .await?;
    let fb = b.fencing();
    claim(&mut db, &fb).await?;
    write(&mut db, &fb, "written by B").await?;
    println!("B (fence {}) claimed and wrote", fb.token());

    // A wakes up and writes, believing it still holds the lock. Its own lease says no.
    match write(&mut db, &fa, "late write by A").await {
        Err(Error::Lost { .. }) => println!("A's late write was refused: A's lease had run out"),
        other => panic!("the late write was not refused by A's own deadline: {other:?}"),
    }
    // The same token without the lease's deadline (as LEASEHOLD_FENCE carries it): the fence
    // table refuses it.
    let token_only = leasehold::fence::Fencing::new(fa.key().clone(), fa.token(), fa.owner());
    match write(&mut db, &token_only, "late write by A").await {
        Err(Error::StaleFence { presented, installed: Some(installed), reason, .. }) => {
            assert_eq!(installed, fb.token(), "B's grant is what the resource holds");
            println!(
                "A's late write was refused: fence {presented} < installed {installed} ({reason})"
            )
        }
        other => panic!("the stale write was not refused: {other:?}"),
    }
    let body: String =
        db.query_one("SELECT body FROM report WHERE id = 1", &[]).await.unwrap().get(0);
    println!("the row says: {body:?}");
    assert_eq!(body, "written by B");

    // The fence column on your own table: one statement, safe when fences never repeat.
    let late = fa.token().as_i64();
    let cur = fb.token().as_i64();
    let n = db
        .execute(
            "UPDATE report SET body = 'B again', fence = $1 WHERE id = 1 AND fence <= $1",
            &[&cur],
        )
        .await
        .unwrap();
    let stale = db
        .execute(
            "UPDATE report SET body = 'A again', fence = $1 WHERE id = 1 AND fence <= $1",
            &[&late],
        )
        .await
        .unwrap();
    println!("fence column: B's update touched {n} row, A's stale one {stale}");
    assert_eq!((n, stale), (1, 0));

    drop(a);
    assert!(b.release().await?.is_clean(), "B held its lease throughout");
    db.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).await.unwrap();
    Ok(())
}
