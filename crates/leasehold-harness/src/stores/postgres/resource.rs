//! The fenced resource in a PostgreSQL schema (the one the spec's `search_path` names): a
//! `data` table beside leasehold's fence table.

use leasehold::StoreUrl;
use leasehold::fence::Fencing;
use leasehold::fence::postgres::tokio_postgres::{self, Client, Transaction};

use crate::resource::{Open, Resource};
use crate::row::{DATA, NAME, backend};

/// The resource in one PostgreSQL schema.
pub struct PgResource(Client);

fn pg(e: tokio_postgres::Error) -> leasehold::Error {
    backend("postgres", e)
}

impl PgResource {
    /// Opens the schema a PostgreSQL URL's `search_path` names (creating it and its tables).
    pub async fn open(url: &StoreUrl) -> Self {
        let cfg = leasehold::backends::postgres::tools::client_config(url).expect("pg URL");
        let (db, conn) = cfg.connect(tokio_postgres::NoTls).await.expect("resource pg");
        tokio::spawn(conn);
        let path: String = db.query_one("SHOW search_path", &[]).await.unwrap().get(0);
        db.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {path}")).await.unwrap();
        leasehold::fence::postgres::install(&db).await.expect("fence table");
        db.batch_execute(DATA).await.unwrap();
        PgResource(db)
    }

    /// Applies the write in an open transaction, checked against `fencing` when given.
    async fn begin(
        &mut self,
        fencing: Option<&Fencing>,
        value: &str,
    ) -> leasehold::Result<Transaction<'_>> {
        let tx = self.0.transaction().await.map_err(pg)?;
        if let Some(f) = fencing {
            leasehold::fence::postgres::check(&tx, NAME, f).await?;
        }
        tx.execute(
            "INSERT INTO data (id, value) VALUES ('row-1', $1)
             ON CONFLICT (id) DO UPDATE SET value = excluded.value",
            &[&value],
        )
        .await
        .map_err(pg)?;
        Ok(tx)
    }
}

/// Commits a write: with `fencing`, through the fence module's `commit`, which refuses (and
/// rolls back) once the lease's time is up; without, plainly.
async fn commit(tx: Transaction<'_>, fencing: Option<&Fencing>) -> leasehold::Result<()> {
    match fencing {
        Some(f) => leasehold::fence::postgres::commit(tx, f).await,
        None => tx.commit().await.map_err(pg),
    }
}

/// A write whose transaction is still open.
struct PgOpen<'a>(Transaction<'a>);

#[async_trait::async_trait(?Send)]
impl Open for PgOpen<'_> {
    async fn commit(self: Box<Self>, fencing: Option<&Fencing>) -> leasehold::Result<()> {
        commit(self.0, fencing).await
    }
}

#[async_trait::async_trait]
impl Resource for PgResource {
    async fn claim(&mut self, fencing: &Fencing) -> leasehold::Result<()> {
        let tx = self.0.transaction().await.map_err(pg)?;
        leasehold::fence::postgres::claim(&tx, NAME, fencing).await?;
        leasehold::fence::postgres::commit(tx, fencing).await
    }

    async fn write(&mut self, fencing: Option<&Fencing>, value: &str) -> leasehold::Result<()> {
        let tx = self.begin(fencing, value).await?;
        commit(tx, fencing).await
    }

    async fn begin_write<'a>(
        &'a mut self,
        fencing: Option<&Fencing>,
        value: &str,
    ) -> leasehold::Result<Box<dyn Open + 'a>> {
        Ok(Box::new(PgOpen(self.begin(fencing, value).await?)))
    }

    async fn read(&mut self) -> Option<String> {
        self.0
            .query_opt("SELECT value FROM data WHERE id = 'row-1'", &[])
            .await
            .unwrap()
            .map(|r| r.get(0))
    }

    /// The value and its fence row, and each table left empty.
    async fn remove(&mut self) -> Result<(), String> {
        let db = &self.0;
        db.batch_execute(
            "DELETE FROM data WHERE id = 'row-1';
             DELETE FROM leasehold_fence WHERE resource = 'row-1'",
        )
        .await
        .map_err(|e| e.to_string())?;
        for table in ["data", "leasehold_fence"] {
            let left = db
                .query_one(&format!("SELECT count(*) FROM {table}"), &[])
                .await
                .map_err(|e| e.to_string())?;
            if left.get::<_, i64>(0) == 0 {
                db.batch_execute(&format!("DROP TABLE {table}"))
                    .await
                    .map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }
}
