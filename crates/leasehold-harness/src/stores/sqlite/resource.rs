//! The fenced resource in a SQLite file (`sqlite:PATH`): a `data` table beside leasehold's
//! fence table, each write a `BEGIN IMMEDIATE` transaction (it holds the file's write lock).

use std::time::Duration;

use leasehold::fence::Fencing;
use leasehold::fence::sqlite::rusqlite::{
    Connection, OptionalExtension, Transaction, TransactionBehavior,
};

use crate::resource::{Open, Resource};
use crate::row::{NAME, backend};

/// The spec's prefix: `sqlite:PATH`.
pub const PREFIX: &str = "sqlite:";

/// The resource in one SQLite file.
pub struct SqliteResource(Connection);

fn sql(e: leasehold::fence::sqlite::rusqlite::Error) -> leasehold::Error {
    backend("sqlite", e)
}

impl SqliteResource {
    /// Opens `sqlite:PATH` (creating the file and its tables); `None` for another spec.
    pub fn open(spec: &str) -> Option<Self> {
        let path = spec.strip_prefix(PREFIX)?;
        let db = Connection::open(path).expect("open resource db");
        db.busy_timeout(Duration::from_secs(10)).unwrap();
        leasehold::fence::sqlite::install(&db).expect("fence table");
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS data (id TEXT PRIMARY KEY, value TEXT NOT NULL)",
        )
        .unwrap();
        Some(SqliteResource(db))
    }

    /// Applies the write in an open transaction, checked against `fencing` when given.
    fn begin(
        &mut self,
        fencing: Option<&Fencing>,
        value: &str,
    ) -> leasehold::Result<Transaction<'_>> {
        let tx = self.0.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
        if let Some(f) = fencing {
            leasehold::fence::sqlite::check(&tx, NAME, f)?;
        }
        tx.execute("INSERT OR REPLACE INTO data (id, value) VALUES ('row-1', ?1)", [value])
            .map_err(sql)?;
        Ok(tx)
    }
}

/// Commits a write: with `fencing`, through the fence module's `commit`, which refuses (and
/// rolls back) once the lease's time is up; without, plainly.
fn commit(tx: Transaction<'_>, fencing: Option<&Fencing>) -> leasehold::Result<()> {
    match fencing {
        Some(f) => leasehold::fence::sqlite::commit(tx, f),
        None => tx.commit().map_err(sql),
    }
}

/// A write whose `BEGIN IMMEDIATE` transaction is still open.
struct SqliteOpen<'a>(Transaction<'a>);

#[async_trait::async_trait(?Send)]
impl Open for SqliteOpen<'_> {
    async fn commit(self: Box<Self>, fencing: Option<&Fencing>) -> leasehold::Result<()> {
        commit(self.0, fencing)
    }
}

#[async_trait::async_trait]
impl Resource for SqliteResource {
    async fn claim(&mut self, fencing: &Fencing) -> leasehold::Result<()> {
        let tx = self.0.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
        leasehold::fence::sqlite::claim(&tx, NAME, fencing)?;
        leasehold::fence::sqlite::commit(tx, fencing)
    }

    async fn write(&mut self, fencing: Option<&Fencing>, value: &str) -> leasehold::Result<()> {
        let tx = self.begin(fencing, value)?;
        commit(tx, fencing)
    }

    async fn begin_write<'a>(
        &'a mut self,
        fencing: Option<&Fencing>,
        value: &str,
    ) -> leasehold::Result<Box<dyn Open + 'a>> {
        Ok(Box::new(SqliteOpen(self.begin(fencing, value)?)))
    }

    async fn read(&mut self) -> Option<String> {
        self.0
            .query_row("SELECT value FROM data WHERE id = 'row-1'", [], |r| r.get(0))
            .optional()
            .unwrap()
    }

    /// Nothing: the tool's own file, kept (a run starts it fresh).
    async fn remove(&mut self) -> Result<(), String> {
        Ok(())
    }
}
