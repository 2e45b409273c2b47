//! The protected resource of `chaos` and the process-level tests: one value, in a SQLite
//! table (`sqlite:PATH`), a Redis key (`redis://…`), a PostgreSQL schema, a MySQL database or
//! etcd, with leasehold's fence table, fence hash or fenced transaction beside it. Each store's
//! variant is behind the cargo feature of that store.

use std::time::Duration;

use leasehold::fence::Fencing;
#[cfg(feature = "redis")]
use leasehold::fence::redis::RedisFence;
use leasehold::fence::sqlite::rusqlite::{Connection, OptionalExtension, TransactionBehavior};

/// The resource's name in the fence table / hash.
pub const NAME: &str = "row-1";
#[cfg(feature = "redis")]
/// The Redis resource's value key, under the store URL's prefix.
fn redis_key(prefix: &str) -> String {
    format!("{prefix}{{row-1}}:value")
}

/// An open resource.
pub enum Resource {
    /// A SQLite database.
    Sqlite(Connection),
    /// A Redis server: the fence, a plain connection, and the value key (under the
    /// store URL's prefix, as the fence hash).
    #[cfg(feature = "redis")]
    Redis(RedisFence, leasehold::fence::redis::redis::aio::ConnectionManager, String),
    /// A PostgreSQL schema (the one `search_path` names).
    #[cfg(feature = "postgres")]
    Postgres(leasehold::fence::postgres::tokio_postgres::Client),
    /// A MySQL/MariaDB database.
    #[cfg(feature = "mysql")]
    Mysql(leasehold::fence::mysql::mysql_async::Conn),
    /// An etcd cluster, fenced by the lock keys themselves (no claim step).
    #[cfg(feature = "etcd")]
    Etcd(Box<(leasehold::fence::etcd::EtcdFence, leasehold::backends::etcd::EtcdStore)>),
}

#[cfg(feature = "etcd")]
const ETCD_KEY: &str = "leasehold-test/row-1";

#[cfg(any(feature = "postgres", feature = "mysql"))]
const DATA: &str =
    "CREATE TABLE IF NOT EXISTS data (id VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL)";

/// Opens `sqlite:PATH` (a file of the tool's own), or the store a store URL names (the lock
/// store's own: `redis://…`, `postgres://…` with the `search_path` its tables go in, e.g.
/// `options=-csearch_path%3DS`, `mysql://…/DB`, `etcd://…`), connecting as the URL's parsed
/// configuration says, and sets up the fence table if needed.
pub async fn open(spec: &str) -> Resource {
    if let Some(path) = spec.strip_prefix("sqlite:") {
        let db = Connection::open(path).expect("open resource db");
        db.busy_timeout(Duration::from_secs(10)).unwrap();
        leasehold::fence::sqlite::install(&db).expect("fence table");
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS data (id TEXT PRIMARY KEY, value TEXT NOT NULL)",
        )
        .unwrap();
        return Resource::Sqlite(db);
    }
    let url = leasehold::StoreUrl::parse(spec).expect("resource store URL");
    #[allow(unused_imports)]
    use leasehold::Scheme;
    match url.scheme() {
        #[cfg(feature = "etcd")]
        Scheme::Etcd => {
            let store =
                leasehold::backends::etcd::tools::connect(&url).await.expect("resource etcd");
            Resource::Etcd(Box::new((leasehold::fence::etcd::EtcdFence::for_store(&store), store)))
        }
        #[cfg(feature = "postgres")]
        Scheme::Postgres => {
            use leasehold::fence::postgres::tokio_postgres;
            let cfg = leasehold::backends::postgres::tools::client_config(&url).expect("pg URL");
            let (db, conn) = cfg.connect(tokio_postgres::NoTls).await.expect("resource pg");
            tokio::spawn(conn);
            let path: String = db.query_one("SHOW search_path", &[]).await.unwrap().get(0);
            db.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {path}")).await.unwrap();
            leasehold::fence::postgres::install(&db).await.expect("fence table");
            db.batch_execute(DATA).await.unwrap();
            Resource::Postgres(db)
        }
        #[cfg(feature = "mysql")]
        Scheme::Mysql => {
            use leasehold::fence::mysql::mysql_async::{self, prelude::Queryable};
            let opts = leasehold::backends::mysql::tools::client_opts(&url).expect("mysql URL");
            let mut db = mysql_async::Conn::new(opts).await.expect("resource mysql");
            leasehold::fence::mysql::install(&mut db).await.expect("fence table");
            db.query_drop(DATA).await.unwrap();
            Resource::Mysql(db)
        }
        #[cfg(feature = "redis")]
        Scheme::Redis | Scheme::Rediss => {
            // The store URL's prefix option names the fence hash and the value key.
            use leasehold::backends::redis::tools;
            let fence = tools::fence(&url).await.expect("connect resource redis");
            let key = redis_key(fence.prefix());
            let client = tools::client(&url).expect("redis url");
            let conn = client.get_connection_manager().await.expect("connect resource redis");
            Resource::Redis(fence, conn, key)
        }
        _ => panic!("no resource on {url} in this build (its store's feature is off)"),
    }
}

/// A write on a SQL resource whose transaction is still open: applied, not yet committed.
pub enum Open<'a> {
    /// On SQLite (`BEGIN IMMEDIATE`: it holds the file's write lock).
    Sqlite(leasehold::fence::sqlite::rusqlite::Transaction<'a>),
    /// On PostgreSQL.
    #[cfg(feature = "postgres")]
    Postgres(leasehold::fence::postgres::tokio_postgres::Transaction<'a>),
    /// On MySQL/MariaDB.
    #[cfg(feature = "mysql")]
    Mysql(leasehold::fence::mysql::mysql_async::Transaction<'a>),
}

impl Open<'_> {
    /// Commits: with `fencing`, through the fence module's `commit`, which refuses (and
    /// rolls back) once the lease's time is up; without, plainly.
    pub async fn commit(self, fencing: Option<&Fencing>) -> leasehold::Result<()> {
        match (self, fencing) {
            (Open::Sqlite(tx), Some(f)) => leasehold::fence::sqlite::commit(tx, f),
            (Open::Sqlite(tx), None) => tx.commit().map_err(sql),
            #[cfg(feature = "postgres")]
            (Open::Postgres(tx), Some(f)) => leasehold::fence::postgres::commit(tx, f).await,
            #[cfg(feature = "postgres")]
            (Open::Postgres(tx), None) => tx.commit().await.map_err(pg),
            #[cfg(feature = "mysql")]
            (Open::Mysql(tx), Some(f)) => leasehold::fence::mysql::commit(tx, f).await,
            #[cfg(feature = "mysql")]
            (Open::Mysql(tx), None) => tx.commit().await.map_err(my),
        }
    }
}

fn backend(
    backend: &'static str,
    e: impl std::error::Error + Send + Sync + 'static,
) -> leasehold::Error {
    leasehold::Error::Backend { backend, message: e.to_string(), source: Some(Box::new(e)) }
}

fn sql(e: leasehold::fence::sqlite::rusqlite::Error) -> leasehold::Error {
    backend("sqlite", e)
}

#[cfg(feature = "postgres")]
fn pg(e: leasehold::fence::postgres::tokio_postgres::Error) -> leasehold::Error {
    backend("postgres", e)
}

#[cfg(feature = "mysql")]
fn my(e: leasehold::fence::mysql::mysql_async::Error) -> leasehold::Error {
    backend("mysql", e)
}

impl Resource {
    /// Claims the resource for `fencing` (before the first effect).
    pub async fn claim(&mut self, fencing: &Fencing) -> leasehold::Result<()> {
        match self {
            Resource::Sqlite(db) => {
                let tx =
                    db.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
                leasehold::fence::sqlite::claim(&tx, NAME, fencing)?;
                leasehold::fence::sqlite::commit(tx, fencing)
            }
            #[cfg(feature = "redis")]
            Resource::Redis(f, ..) => f.claim(NAME, fencing).await,
            // The lock key is the fence: nothing to install.
            #[cfg(feature = "etcd")]
            Resource::Etcd(..) => Ok(()),
            #[cfg(feature = "postgres")]
            Resource::Postgres(db) => {
                let tx = db.transaction().await.map_err(pg)?;
                leasehold::fence::postgres::claim(&tx, NAME, fencing).await?;
                leasehold::fence::postgres::commit(tx, fencing).await
            }
            #[cfg(feature = "mysql")]
            Resource::Mysql(db) => {
                let mut tx = db.start_transaction(Default::default()).await.map_err(my)?;
                // A refused claim still puts the connection's timeouts back.
                match leasehold::fence::mysql::claim(&mut tx, NAME, fencing).await {
                    Ok(()) => leasehold::fence::mysql::commit(tx, fencing).await,
                    Err(e) => {
                        let _ = leasehold::fence::mysql::rollback(tx).await;
                        Err(e)
                    }
                }
            }
        }
    }

    /// Writes `value`; with `fencing`, only if its fence is still the installed one,
    /// checked atomically with the write (on the SQL resources, committed with the fence
    /// module's `commit`, which refuses once the lease's time is up).
    pub async fn write(&mut self, fencing: Option<&Fencing>, value: &str) -> leasehold::Result<()> {
        match (self, fencing) {
            #[cfg(feature = "redis")]
            (Resource::Redis(f, _, key), Some(fencing)) => f.set(NAME, fencing, key, value).await,
            #[cfg(feature = "etcd")]
            (Resource::Etcd(r), Some(fencing)) => r.0.put(fencing, ETCD_KEY, value).await,
            #[cfg(feature = "etcd")]
            (Resource::Etcd(r), None) => {
                let put = leasehold::backends::etcd::tools::rpc::PutRequest {
                    key: ETCD_KEY.into(),
                    value: value.into(),
                    ..Default::default()
                };
                leasehold::backends::etcd::tools::client(&r.1).put(put).await.expect("plain PUT");
                Ok(())
            }
            #[cfg(feature = "redis")]
            (Resource::Redis(_, conn, key), None) => {
                let _: () = leasehold::fence::redis::redis::cmd("SET")
                    .arg(&*key)
                    .arg(value)
                    .query_async(conn)
                    .await
                    .expect("plain SET");
                Ok(())
            }
            (sql, fencing) => sql.begin_write(fencing, value).await?.commit(fencing).await,
        }
    }

    /// Opens a transaction on a SQL resource, checks `fencing` in it (if given) and applies
    /// the write, without committing: [`Open::commit`] does. [`leasehold::Error::InvalidInput`]
    /// on Redis and etcd, whose fenced writes are one atomic step.
    pub async fn begin_write(
        &mut self,
        fencing: Option<&Fencing>,
        value: &str,
    ) -> leasehold::Result<Open<'_>> {
        match self {
            Resource::Sqlite(db) => {
                let tx =
                    db.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
                if let Some(f) = fencing {
                    leasehold::fence::sqlite::check(&tx, NAME, f)?;
                }
                tx.execute("INSERT OR REPLACE INTO data (id, value) VALUES ('row-1', ?1)", [value])
                    .map_err(sql)?;
                Ok(Open::Sqlite(tx))
            }
            #[cfg(feature = "postgres")]
            Resource::Postgres(db) => {
                let tx = db.transaction().await.map_err(pg)?;
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
                Ok(Open::Postgres(tx))
            }
            #[cfg(feature = "mysql")]
            Resource::Mysql(db) => {
                use leasehold::fence::mysql::mysql_async::prelude::Queryable;
                let mut tx = db.start_transaction(Default::default()).await.map_err(my)?;
                if let Some(f) = fencing
                    && let Err(e) = leasehold::fence::mysql::check(&mut tx, NAME, f).await
                {
                    let _ = leasehold::fence::mysql::rollback(tx).await;
                    return Err(e);
                }
                tx.exec_drop("REPLACE INTO data (id, value) VALUES ('row-1', ?)", (value,))
                    .await
                    .map_err(my)?;
                Ok(Open::Mysql(tx))
            }
            #[allow(unreachable_patterns)]
            _ => Err(leasehold::Error::InvalidInput(
                "this resource has no transaction to hold open (its fenced write is one atomic \
                 step)"
                    .into(),
            )),
        }
    }

    /// The current value.
    pub async fn read(&mut self) -> Option<String> {
        match self {
            Resource::Sqlite(db) => db
                .query_row("SELECT value FROM data WHERE id = 'row-1'", [], |r| r.get(0))
                .optional()
                .unwrap(),
            #[cfg(feature = "postgres")]
            Resource::Postgres(db) => db
                .query_opt("SELECT value FROM data WHERE id = 'row-1'", &[])
                .await
                .unwrap()
                .map(|r| r.get(0)),
            #[cfg(feature = "mysql")]
            Resource::Mysql(db) => {
                use leasehold::fence::mysql::mysql_async::prelude::Queryable;
                db.query_first("SELECT value FROM data WHERE id = 'row-1'").await.unwrap()
            }
            #[cfg(feature = "etcd")]
            Resource::Etcd(r) => {
                let get = leasehold::backends::etcd::tools::rpc::RangeRequest::key(ETCD_KEY);
                leasehold::backends::etcd::tools::client(&r.1)
                    .range(get)
                    .await
                    .expect("GET")
                    .kvs
                    .first()
                    .map(|kv| String::from_utf8_lossy(&kv.value).into_owned())
            }
            #[cfg(feature = "redis")]
            Resource::Redis(_, conn, key) => leasehold::fence::redis::redis::cmd("GET")
                .arg(&*key)
                .query_async(conn)
                .await
                .expect("GET"),
        }
    }

    /// Removes what this resource wrote to the store: the value and its fence row or hash,
    /// and the `data` and `leasehold_fence` tables when nothing else is left in them (a
    /// table that holds other rows stays). The SQLite variant is a file of its own: kept.
    pub async fn remove(&mut self) -> Result<(), String> {
        match self {
            Resource::Sqlite(_) => Ok(()),
            #[cfg(feature = "redis")]
            Resource::Redis(f, conn, key) => {
                let fence = f.fence_key(NAME);
                leasehold::fence::redis::redis::cmd("DEL")
                    .arg(&*key)
                    .arg(fence)
                    .query_async::<i64>(conn)
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
            #[cfg(feature = "postgres")]
            Resource::Postgres(db) => {
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
            #[cfg(feature = "mysql")]
            Resource::Mysql(db) => {
                use leasehold::fence::mysql::mysql_async::prelude::Queryable;
                let e = |e: leasehold::fence::mysql::mysql_async::Error| e.to_string();
                db.query_drop("DELETE FROM data WHERE id = 'row-1'").await.map_err(e)?;
                db.query_drop("DELETE FROM leasehold_fence WHERE resource = 'row-1'")
                    .await
                    .map_err(e)?;
                for table in ["data", "leasehold_fence"] {
                    let left: Option<i64> =
                        db.query_first(format!("SELECT count(*) FROM {table}")).await.map_err(e)?;
                    if left == Some(0) {
                        db.query_drop(format!("DROP TABLE {table}")).await.map_err(e)?;
                    }
                }
                Ok(())
            }
            #[cfg(feature = "etcd")]
            Resource::Etcd(r) => {
                let del = leasehold::backends::etcd::tools::rpc::DeleteRangeRequest {
                    key: ETCD_KEY.into(),
                    ..Default::default()
                };
                leasehold::backends::etcd::tools::client(&r.1)
                    .delete_range(del)
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
        }
    }
}
