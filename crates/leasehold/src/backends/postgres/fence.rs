//! PostgreSQL fence table: `claim` and `check` inside the caller's transaction.
//!
//! ```no_run
//! # async fn demo(fencing: leasehold::fence::Fencing) -> leasehold::Result<()> {
//! use leasehold::fence::postgres::{self as fence, tokio_postgres};
//! let (mut db, conn) = tokio_postgres::connect("postgres://app@db/app", tokio_postgres::NoTls)
//!     .await.unwrap();
//! tokio::spawn(conn);
//! fence::install(&db).await?;
//! let tx = db.transaction().await.unwrap();
//! fence::claim(&tx, "invoices/2026-11", &fencing).await?;   // once, before the first effect
//! fence::check(&tx, "invoices/2026-11", &fencing).await?;   // with every effect, same transaction
//! tx.execute("UPDATE invoices SET sent = true WHERE month = '2026-11'", &[]).await.unwrap();
//! tx.commit().await.unwrap();
//! # Ok(()) }
//! ```
//!
//! `check` reads the fence row `FOR SHARE`, so a successor's `claim` waits until the checked
//! transaction ends: the check and the effect commit together or not at all.
//!
//! For a table of your own, one statement suffices: `UPDATE t SET …, fence = $tok WHERE id =
//! $id AND fence <= $tok`. It cannot tell two holders with the same token apart, so it relies
//! on fences that never go back: [`crate::FenceRepeat::Never`], or
//! [`crate::FenceRepeat::ClockBacked`] while its clock assumption holds (every store here).

pub use tokio_postgres;
use tokio_postgres::GenericClient;

use crate::fence::{Fencing, Installed, stale};
use crate::{Error, Result};

/// The fence table: one row per protected resource.
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS leasehold_fence (
    resource text PRIMARY KEY,
    lock_key text NOT NULL,
    fence    bigint NOT NULL,
    owner    text NOT NULL
)";

fn err(what: &str, e: tokio_postgres::Error) -> Error {
    Error::Backend {
        backend: "postgres",
        message: format!("fence {what}: {}", crate::backends::postgres::pg_text(&e)),
        source: Some(e.into()),
    }
}

fn token(f: &Fencing) -> i64 {
    i64::try_from(f.token().get()).unwrap_or(i64::MAX)
}

/// Creates the fence table (in the first schema of `search_path`) if it is missing.
pub async fn install<C: GenericClient + Sync>(c: &C) -> Result<()> {
    c.batch_execute(SCHEMA).await.map_err(|e| err("install", e))
}

async fn installed<C: GenericClient + Sync>(
    c: &C,
    resource: &str,
    lock: &str,
) -> Result<Option<Installed>> {
    let row = c
        .query_opt(
            &format!(
                "SELECT lock_key, fence, owner FROM leasehold_fence WHERE resource = $1 {lock}"
            ),
            &[&resource],
        )
        .await
        .map_err(|e| err("read", e))?;
    Ok(row.map(|r| Installed { key: r.get(0), token: r.get::<_, i64>(1) as u64, owner: r.get(2) }))
}

/// Installs `fencing` on `resource`: succeeds iff its fence is greater than the installed one,
/// or equal with the same owner, and the resource is unclaimed or guarded by the same key.
/// Otherwise [`Error::StaleFence`]. Call inside the caller's transaction.
pub async fn claim<C: GenericClient + Sync>(
    c: &C,
    resource: &str,
    fencing: &Fencing,
) -> Result<()> {
    crate::fence::require_token(resource, fencing)?;
    let n = c
        .execute(
            "INSERT INTO leasehold_fence AS f (resource, lock_key, fence, owner)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (resource) DO UPDATE SET fence = excluded.fence, owner = excluded.owner
             WHERE f.lock_key = excluded.lock_key
               AND (excluded.fence > f.fence
                    OR (excluded.fence = f.fence AND excluded.owner = f.owner))",
            &[&resource, &fencing.key().as_str(), &token(fencing), &fencing.owner().to_string()],
        )
        .await
        .map_err(|e| err("claim", e))?;
    if n == 1 { Ok(()) } else { Err(stale(resource, fencing, installed(c, resource, "").await?)) }
}

/// Succeeds iff `fencing` is exactly what `resource` has installed, and keeps it so until the
/// transaction ends (row lock `FOR SHARE`); otherwise [`Error::StaleFence`].
pub async fn check<C: GenericClient + Sync>(
    c: &C,
    resource: &str,
    fencing: &Fencing,
) -> Result<()> {
    crate::fence::verify(resource, fencing, installed(c, resource, "FOR SHARE").await?)
}
