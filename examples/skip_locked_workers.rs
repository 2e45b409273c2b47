//! A worker pool that needs no lock at all: rows claimed with `FOR UPDATE SKIP LOCKED`.
//!
//!     DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
//!         cargo run -p leasehold-examples --bin skip-locked-workers
//!
//! When the work items are rows, the database that holds them can hand each row to exactly one
//! worker: a worker takes the next unclaimed row inside a transaction, the row lock keeps the
//! others off it, `SKIP LOCKED` lets them move on to other rows instead of queueing, and the
//! "done" update commits with the work's own writes. If the worker dies, its transaction
//! rolls back and the row is free again. There is no lease to expire and no fence to check:
//! the effect and the claim are one transaction. (See the guide: a lock service is for work
//! whose effects land somewhere else.) Works in a schema of its own and drops it.

use leasehold::fence::postgres::tokio_postgres::{self, NoTls};

#[tokio::main]
async fn main() {
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let schema = format!(
        "leasehold_example_{}",
        &leasehold::OwnerToken::generate().unwrap().to_string()[..8]
    );
    let connect = || async {
        let (c, conn) = tokio_postgres::connect(&url, NoTls).await.expect("connect");
        tokio::spawn(conn);
        c.batch_execute(&format!("SET search_path = {schema}")).await.ok();
        c
    };
    let admin = connect().await;
    admin
        .batch_execute(&format!(
            "CREATE SCHEMA {schema}; SET search_path = {schema};
             CREATE TABLE jobs (id int PRIMARY KEY, done_by int, done_at timestamptz);
             INSERT INTO jobs (id) SELECT generate_series(1, 200);"
        ))
        .await
        .unwrap();

    let mut workers = Vec::new();
    for w in 0..4 {
        let mut c = connect().await;
        c.batch_execute(&format!("SET search_path = {schema}")).await.unwrap();
        workers.push(tokio::spawn(async move {
            let mut n = 0;
            loop {
                let tx = c.transaction().await.unwrap();
                let row = tx
                    .query_opt(
                        "SELECT id FROM jobs WHERE done_by IS NULL ORDER BY id
                         LIMIT 1 FOR UPDATE SKIP LOCKED",
                        &[],
                    )
                    .await
                    .unwrap();
                let Some(row) = row else { break };
                let id: i32 = row.get(0);
                // … the job's own writes go here, in the same transaction …
                tx.execute(
                    "UPDATE jobs SET done_by = $1, done_at = now() WHERE id = $2",
                    &[&w, &id],
                )
                .await
                .unwrap();
                tx.commit().await.unwrap();
                n += 1;
            }
            n
        }));
    }
    let counts: Vec<i32> = {
        let mut v = Vec::new();
        for h in workers {
            v.push(h.await.unwrap());
        }
        v
    };
    let row = admin
        .query_one("SELECT count(*), count(DISTINCT id) FROM jobs WHERE done_by IS NOT NULL", &[])
        .await
        .unwrap();
    let (done, distinct): (i64, i64) = (row.get(0), row.get(1));
    println!("jobs done per worker: {counts:?}; {done} jobs done, each once ({distinct} distinct)");
    assert_eq!(done, 200);
    assert_eq!(counts.iter().sum::<i32>(), 200);
    admin.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).await.unwrap();
}
