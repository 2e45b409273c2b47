//! The database file: opening it (what the OS says is wrong with a path, WAL mode,
//! `synchronous=NORMAL` as `docs/design.md` §4.2 argues), its tables, bringing a file made by
//! an older version up to date, and dropping the rows of earlier boots.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension};

use super::path::usable;
use super::{SqlExt, boot, shared};
use crate::backends::Limits;
use crate::{Error, Result};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS leasehold_fences (
    key   TEXT PRIMARY KEY NOT NULL,
    fence INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS leasehold_leases (
    key        TEXT PRIMARY KEY NOT NULL,
    owner      TEXT NOT NULL,
    fence      INTEGER NOT NULL,
    boot_id    TEXT NOT NULL,
    expires_ns INTEGER NOT NULL,
    info       TEXT
);
CREATE TABLE IF NOT EXISTS leasehold_queue (
    key      TEXT PRIMARY KEY NOT NULL,
    tickets  INTEGER NOT NULL,
    turn     INTEGER NOT NULL,
    boot_id  TEXT,
    alive_ns INTEGER
);
CREATE TABLE IF NOT EXISTS leasehold_settings (
    name  TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);";

/// Opens (creating if needed) the database at `path` with its tables, within
/// `limits.connect`, its busy timeout then set to `limits.op`; and this boot's id, the rows of
/// earlier boots deleted. `full_sync` (`sync=full`): every commit fsynced
/// (`synchronous=FULL`), and the file records it (`leasehold_settings`), so that every
/// connection that opens it later fsyncs too, whatever its URL says; else `NORMAL` unless the
/// file has that record. Returns whether this connection fsyncs every commit. Errors as
/// [`super::SqliteStore::open`] says.
pub(super) fn database(
    path: &Path,
    limits: Limits,
    full_sync: bool,
) -> Result<(Connection, String, bool)> {
    if path.as_os_str().is_empty() {
        return Err(Error::invalid("sqlite:// URL has an empty path"));
    }
    let cannot = |what: &str, e: Error| match e {
        Error::Config { message, source } => Error::Config {
            message: format!("cannot {what} SQLite store {}: {message}", path.display()),
            source,
        },
        Error::Unavailable { message, source } => Error::Unavailable {
            message: format!("cannot {what} SQLite store {}: {message}", path.display()),
            source,
        },
        other => other,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            Error::local_io(format!("cannot create the directory of {}", path.display()), e)
        })?;
    }
    // The OS says exactly what is wrong with a path (a directory, no permission, a
    // read-only file system) where SQLite only says "unable to open database file". Asked
    // with stat and access(2), never by opening the file: closing any descriptor of it
    // would drop every POSIX lock this process holds on it, those of another store open
    // on the same file included (SQLite's own locks), and let other processes past them.
    usable(path).map_err(|e| Error::local_io(format!("cannot open {}", path.display()), e))?;
    let conn = Connection::open(path).sql().map_err(|e| cannot("open", e))?;
    let setup = || -> rusqlite::Result<bool> {
        conn.busy_timeout(limits.connect)?;
        let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(rusqlite::Error::InvalidQuery);
        }
        conn.execute_batch(SCHEMA)?;
        conn.execute_batch(shared::SCHEMA)?;
        add_column(&conn, "leasehold_leases", "info TEXT")?;
        add_column(&conn, "leasehold_queue", "boot_id TEXT")?;
        add_column(&conn, "leasehold_queue", "alive_ns INTEGER")?;
        // `sync=full` is the file's, not one connection's: a process that opens it without
        // saying so must not grant with unsynced commits beside one that counts on them.
        let full = if full_sync {
            conn.execute(
                "INSERT INTO leasehold_settings (name, value) VALUES ('sync', 'full')
                 ON CONFLICT (name) DO UPDATE SET value = 'full'",
                [],
            )?;
            true
        } else {
            let v: Option<String> = conn
                .query_row("SELECT value FROM leasehold_settings WHERE name = 'sync'", [], |r| {
                    r.get(0)
                })
                .optional()?;
            v.as_deref() == Some("full")
        };
        conn.pragma_update(None, "synchronous", if full { "FULL" } else { "NORMAL" })?;
        Ok(full)
    };
    // Two processes setting up one new file can both hold a read lock and both ask to
    // write (WAL mode, the schema): SQLite answers one of them "busy" at once, without
    // its busy handler, to break that deadlock. Try again until the connect bound.
    let until = std::time::Instant::now() + limits.connect;
    let full = loop {
        match setup() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) && std::time::Instant::now() < until =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            r => break r.sql().map_err(|e| cannot("initialise", e))?,
        }
    };
    let boot = boot::boot_id()?;
    // Rows from earlier boots are dead; dropping them keeps `status` cheap.
    conn.execute_batch(&format!(
        "DELETE FROM leasehold_leases WHERE boot_id <> '{b}';
         DELETE FROM leasehold_readers WHERE boot_id <> '{b}';
         DELETE FROM leasehold_intents WHERE boot_id <> '{b}';
         DELETE FROM leasehold_queue WHERE boot_id <> '{b}';",
        b = boot.replace('\'', "")
    ))
    .sql()
    .map_err(|e| cannot("write to", e))?;
    conn.busy_timeout(limits.op).sql()?;
    Ok((conn, boot, full))
}

/// Adds `column` (`"name TYPE"`) to `table` in a file made by a version without it
/// (`leasehold_leases.info`; `leasehold_queue.boot_id` and `alive_ns`), under the write lock,
/// so two processes opening an old file at once do not both add it.
fn add_column(conn: &Connection, table: &str, column: &str) -> rusqlite::Result<()> {
    let name = column.split(' ').next().unwrap_or(column);
    let has = |c: &Connection| -> rusqlite::Result<bool> {
        let n: i64 = c.query_row(
            "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2",
            [table, name],
            |r| r.get(0),
        )?;
        Ok(n > 0)
    };
    if has(conn)? {
        return Ok(());
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let r = (|| {
        if !has(conn)? {
            conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column}"))?;
        }
        conn.execute_batch("COMMIT")
    })();
    if r.is_err() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    r
}
