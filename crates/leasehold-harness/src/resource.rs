//! The protected resource of `chaos` and the process-level tests: one value, with leasehold's
//! fence beside it, on the store that holds it. Each store's resource lives in its folder
//! under [`crate::stores`] (behind that store's feature); this is the one list of them and
//! what is common: opening a spec, and reading and writing it fenced or not.

use leasehold::fence::Fencing;

#[cfg(feature = "etcd")]
use crate::stores::etcd::resource::EtcdResource;
#[cfg(feature = "mysql")]
use crate::stores::mysql::resource::MyResource;
#[cfg(feature = "postgres")]
use crate::stores::postgres::resource::PgResource;
#[cfg(feature = "redis")]
use crate::stores::redis::resource::RedisResource;
use crate::stores::sqlite::resource::SqliteResource;

pub use crate::row::NAME;

/// An open resource, one variant per store that can hold one.
pub enum Resource {
    /// A SQLite database.
    Sqlite(SqliteResource),
    /// A Redis server.
    #[cfg(feature = "redis")]
    Redis(RedisResource),
    /// A PostgreSQL schema (the one `search_path` names).
    #[cfg(feature = "postgres")]
    Postgres(PgResource),
    /// A MySQL/MariaDB database.
    #[cfg(feature = "mysql")]
    Mysql(MyResource),
    /// An etcd cluster, fenced by the lock keys themselves (no claim step).
    #[cfg(feature = "etcd")]
    Etcd(EtcdResource),
}

/// Opens a resource spec, as [`crate::stores::resource_spec`] makes them: `sqlite:PATH` (a
/// file of the tool's own), or a store URL (the lock store's own: `redis://…`, `postgres://…`
/// with the `search_path` its tables go in, `mysql://…/DB`, `etcd://…`), dispatched on its
/// [`leasehold::Scheme`] and connecting as its parsed configuration says; sets up the fence
/// table if needed. Panics on a spec no store of this build opens (its feature is off).
pub async fn open(spec: &str) -> Resource {
    if let Some(r) = SqliteResource::open(spec) {
        return Resource::Sqlite(r);
    }
    let url = leasehold::StoreUrl::parse(spec).expect("resource store URL");
    #[allow(unused_imports)]
    use leasehold::Scheme;
    match url.scheme() {
        #[cfg(feature = "redis")]
        Scheme::Redis | Scheme::Rediss => Resource::Redis(RedisResource::open(&url).await),
        #[cfg(feature = "postgres")]
        Scheme::Postgres => Resource::Postgres(PgResource::open(&url).await),
        #[cfg(feature = "mysql")]
        Scheme::Mysql => Resource::Mysql(MyResource::open(&url).await),
        #[cfg(feature = "etcd")]
        Scheme::Etcd => Resource::Etcd(EtcdResource::open(&url).await),
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
        match self {
            Open::Sqlite(tx) => SqliteResource::commit(tx, fencing),
            #[cfg(feature = "postgres")]
            Open::Postgres(tx) => PgResource::commit(tx, fencing).await,
            #[cfg(feature = "mysql")]
            Open::Mysql(tx) => MyResource::commit(tx, fencing).await,
        }
    }
}

impl Resource {
    /// Claims the resource for `fencing` (before the first effect).
    pub async fn claim(&mut self, fencing: &Fencing) -> leasehold::Result<()> {
        match self {
            Resource::Sqlite(r) => r.claim(fencing),
            #[cfg(feature = "redis")]
            Resource::Redis(r) => r.claim(fencing).await,
            // The lock key is the fence: nothing to install.
            #[cfg(feature = "etcd")]
            Resource::Etcd(_) => Ok(()),
            #[cfg(feature = "postgres")]
            Resource::Postgres(r) => r.claim(fencing).await,
            #[cfg(feature = "mysql")]
            Resource::Mysql(r) => r.claim(fencing).await,
        }
    }

    /// Writes `value`; with `fencing`, only if its fence is still the installed one,
    /// checked atomically with the write (on the SQL resources, committed with the fence
    /// module's `commit`, which refuses once the lease's time is up).
    pub async fn write(&mut self, fencing: Option<&Fencing>, value: &str) -> leasehold::Result<()> {
        match self {
            #[cfg(feature = "redis")]
            Resource::Redis(r) => r.write(fencing, value).await,
            #[cfg(feature = "etcd")]
            Resource::Etcd(r) => r.write(fencing, value).await,
            sql => sql.begin_write(fencing, value).await?.commit(fencing).await,
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
            Resource::Sqlite(r) => r.begin_write(fencing, value).map(Open::Sqlite),
            #[cfg(feature = "postgres")]
            Resource::Postgres(r) => r.begin_write(fencing, value).await.map(Open::Postgres),
            #[cfg(feature = "mysql")]
            Resource::Mysql(r) => r.begin_write(fencing, value).await.map(Open::Mysql),
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
            Resource::Sqlite(r) => r.read(),
            #[cfg(feature = "postgres")]
            Resource::Postgres(r) => r.read().await,
            #[cfg(feature = "mysql")]
            Resource::Mysql(r) => r.read().await,
            #[cfg(feature = "etcd")]
            Resource::Etcd(r) => r.read().await,
            #[cfg(feature = "redis")]
            Resource::Redis(r) => r.read().await,
        }
    }

    /// Removes what this resource wrote to the store: the value and its fence row or hash,
    /// and the `data` and `leasehold_fence` tables when nothing else is left in them (a
    /// table that holds other rows stays). The SQLite variant is a file of its own: kept.
    pub async fn remove(&mut self) -> Result<(), String> {
        match self {
            Resource::Sqlite(_) => Ok(()),
            #[cfg(feature = "redis")]
            Resource::Redis(r) => r.remove().await,
            #[cfg(feature = "postgres")]
            Resource::Postgres(r) => r.remove().await,
            #[cfg(feature = "mysql")]
            Resource::Mysql(r) => r.remove().await,
            #[cfg(feature = "etcd")]
            Resource::Etcd(r) => r.remove().await,
        }
    }
}
