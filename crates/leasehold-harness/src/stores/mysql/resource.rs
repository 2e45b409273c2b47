//! The fenced resource in a MySQL/MariaDB database (the spec's): a `data` table beside
//! leasehold's fence table.

use leasehold::StoreUrl;
use leasehold::fence::Fencing;
use leasehold::fence::mysql::mysql_async::{self, Conn, Transaction, prelude::Queryable};

use crate::resource::{Open, Resource};
use crate::row::{DATA, NAME, backend};

/// The resource in one MySQL/MariaDB database.
pub struct MyResource(Conn);

fn my(e: mysql_async::Error) -> leasehold::Error {
    backend("mysql", e)
}

impl MyResource {
    /// Opens a MySQL URL's database (creating the tables).
    pub async fn open(url: &StoreUrl) -> Self {
        let opts = leasehold::backends::mysql::tools::client_opts(url).expect("mysql URL");
        let mut db = Conn::new(opts).await.expect("resource mysql");
        leasehold::fence::mysql::install(&mut db).await.expect("fence table");
        db.query_drop(DATA).await.unwrap();
        MyResource(db)
    }

    /// Applies the write in an open transaction, checked against `fencing` when given.
    async fn begin(
        &mut self,
        fencing: Option<&Fencing>,
        value: &str,
    ) -> leasehold::Result<Transaction<'_>> {
        let mut tx = self.0.start_transaction(Default::default()).await.map_err(my)?;
        if let Some(f) = fencing
            && let Err(e) = leasehold::fence::mysql::check(&mut tx, NAME, f).await
        {
            let _ = leasehold::fence::mysql::rollback(tx).await;
            return Err(e);
        }
        tx.exec_drop("REPLACE INTO data (id, value) VALUES ('row-1', ?)", (value,))
            .await
            .map_err(my)?;
        Ok(tx)
    }
}

/// Commits a write: with `fencing`, through the fence module's `commit`, which refuses (and
/// rolls back) once the lease's time is up; without, plainly.
async fn commit(tx: Transaction<'_>, fencing: Option<&Fencing>) -> leasehold::Result<()> {
    match fencing {
        Some(f) => leasehold::fence::mysql::commit(tx, f).await,
        None => tx.commit().await.map_err(my),
    }
}

/// A write whose transaction is still open.
struct MyOpen<'a>(Transaction<'a>);

#[async_trait::async_trait(?Send)]
impl Open for MyOpen<'_> {
    async fn commit(self: Box<Self>, fencing: Option<&Fencing>) -> leasehold::Result<()> {
        commit(self.0, fencing).await
    }
}

#[async_trait::async_trait]
impl Resource for MyResource {
    async fn claim(&mut self, fencing: &Fencing) -> leasehold::Result<()> {
        let mut tx = self.0.start_transaction(Default::default()).await.map_err(my)?;
        // A refused claim still puts the connection's timeouts back.
        match leasehold::fence::mysql::claim(&mut tx, NAME, fencing).await {
            Ok(()) => leasehold::fence::mysql::commit(tx, fencing).await,
            Err(e) => {
                let _ = leasehold::fence::mysql::rollback(tx).await;
                Err(e)
            }
        }
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
        Ok(Box::new(MyOpen(self.begin(fencing, value).await?)))
    }

    async fn read(&mut self) -> Option<String> {
        self.0.query_first("SELECT value FROM data WHERE id = 'row-1'").await.unwrap()
    }

    /// The value and its fence row, and each table left empty.
    async fn remove(&mut self) -> Result<(), String> {
        let db = &mut self.0;
        let e = |e: mysql_async::Error| e.to_string();
        db.query_drop("DELETE FROM data WHERE id = 'row-1'").await.map_err(e)?;
        db.query_drop("DELETE FROM leasehold_fence WHERE resource = 'row-1'").await.map_err(e)?;
        for table in ["data", "leasehold_fence"] {
            let left: Option<i64> =
                db.query_first(format!("SELECT count(*) FROM {table}")).await.map_err(e)?;
            if left == Some(0) {
                db.query_drop(format!("DROP TABLE {table}")).await.map_err(e)?;
            }
        }
        Ok(())
    }
}
