//! MySQL / MariaDB fence table: `claim` and `check` inside the caller's transaction.
//!
//! ```no_run
//! # async fn demo(fencing: leasehold::fence::Fencing) -> leasehold::Result<()> {
//! use leasehold::fence::mysql::{self as fence, mysql_async};
//! use mysql_async::prelude::Queryable;
//! let mut db = mysql_async::Conn::from_url("mysql://app@db/app").await.unwrap();
//! fence::install(&mut db).await?;
//! let mut tx = db.start_transaction(Default::default()).await.unwrap();
//! fence::claim(&mut tx, "invoices/2026-11", &fencing).await?;   // before the first effect
//! fence::check(&mut tx, "invoices/2026-11", &fencing).await?;   // with every effect
//! tx.query_drop("UPDATE invoices SET sent = 1 WHERE month = '2026-11'").await.unwrap();
//! tx.commit().await.unwrap();
//! # Ok(()) }
//! ```
//!
//! `claim` reads the fence row `FOR UPDATE` and `check` reads it `LOCK IN SHARE MODE`, so a
//! check and its effect commit before any successor's claim can land. InnoDB only.

pub use mysql_async;
use mysql_async::prelude::Queryable;

use crate::fence::{Fencing, Installed, may_claim, stale};
use crate::{Error, Result};

/// The fence table: one row per protected resource.
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS leasehold_fence (
    resource VARBINARY(512) NOT NULL PRIMARY KEY,
    lock_key VARBINARY(512) NOT NULL,
    fence    BIGINT UNSIGNED NOT NULL,
    owner    VARBINARY(64) NOT NULL
) ENGINE = InnoDB";

fn err(what: &str, e: mysql_async::Error) -> Error {
    Error::Backend {
        backend: "mysql",
        message: format!("fence {what}: {e}"),
        source: Some(e.into()),
    }
}

/// Creates the fence table if it is missing.
pub async fn install<Q: Queryable>(q: &mut Q) -> Result<()> {
    q.query_drop(SCHEMA).await.map_err(|e| err("install", e))
}

async fn installed<Q: Queryable>(
    q: &mut Q,
    resource: &str,
    lock: &str,
) -> Result<Option<Installed>> {
    let row: Option<(Vec<u8>, u64, Vec<u8>)> = q
        .exec_first(
            format!("SELECT lock_key, fence, owner FROM leasehold_fence WHERE resource = ? {lock}"),
            (resource.as_bytes(),),
        )
        .await
        .map_err(|e| err("read", e))?;
    Ok(row.map(|(k, t, o)| Installed {
        key: String::from_utf8_lossy(&k).into_owned(),
        token: t,
        owner: String::from_utf8_lossy(&o).into_owned(),
    }))
}

/// Installs `fencing` on `resource`: succeeds iff its fence is greater than the installed one,
/// or equal with the same owner, and the resource is unclaimed or guarded by the same key.
/// Otherwise [`Error::StaleFence`]. Call inside the caller's transaction.
pub async fn claim<Q: Queryable>(q: &mut Q, resource: &str, fencing: &Fencing) -> Result<()> {
    crate::fence::require_token(resource, fencing)?;
    let current = installed(q, resource, "FOR UPDATE").await?;
    if !may_claim(current.as_ref(), fencing) {
        return Err(stale(resource, fencing, current));
    }
    q.exec_drop(
        "INSERT INTO leasehold_fence (resource, lock_key, fence, owner) VALUES (?, ?, ?, ?)
         ON DUPLICATE KEY UPDATE fence = VALUES(fence), owner = VALUES(owner)",
        (
            resource.as_bytes(),
            fencing.key().as_str().as_bytes(),
            fencing.token().get(),
            fencing.owner().to_string(),
        ),
    )
    .await
    .map_err(|e| err("claim", e))
}

/// Succeeds iff `fencing` is exactly what `resource` has installed, and keeps it so until the
/// transaction ends (`LOCK IN SHARE MODE`); otherwise [`Error::StaleFence`].
pub async fn check<Q: Queryable>(q: &mut Q, resource: &str, fencing: &Fencing) -> Result<()> {
    crate::fence::verify(resource, fencing, installed(q, resource, "LOCK IN SHARE MODE").await?)
}
