//! Test support for leasehold stores.
//!
//! - [`conformance`]: scenarios every store must pass, as plain `async fn`s taking a
//!   [`leasehold::Locker`]; [`conformance_suite!`] turns them into one `#[tokio::test]` each.
//! - [`primitives`]: scenarios for semaphores, readers and writers, several keys at once;
//!   [`primitives_suite!`] turns them into one `#[tokio::test]` each.
//! - [`counted`]: scenarios that count the requests reaching the store (the auto-renew rate).
//! - [`process`]: scenarios that need several OS processes (mutual exclusion across
//!   processes, the stalled holder) driven through the `lh-worker` binary, with
//!   SIGSTOP/SIGCONT fault injection.
//! - [`torture`]: several worker processes loop acquire → fenced effect → release while the
//!   test fails the store over, and the history is checked (the resource's commit order).
//! - [`history`], [`proxy`], [`servers`]: re-exported from `leasehold-harness`, the
//!   publishable crate the CLI's tools use (the recorder and checker, the TCP fault proxy,
//!   private store servers).
#![deny(missing_docs)]

pub mod conformance;
pub mod counted;
pub mod primitives;
pub mod process;
pub mod torture;

pub use leasehold_harness::{history, proxy, servers};

/// A store under test plus whatever must live as long as it (a temp dir, a server).
pub struct Fixture {
    /// The locker over the store.
    pub locker: leasehold::Locker,
    /// The store's URL, for scenarios that start other processes.
    pub url: String,
    /// Dropped with the fixture.
    pub guard: Box<dyn std::any::Any + Send>,
}

async fn fixture(url: String, guard: impl std::any::Any + Send) -> Fixture {
    let locker = leasehold::Locker::connect(&url)
        .await
        .unwrap_or_else(|e| panic!("cannot open the store at {url}: {e}"));
    Fixture { locker, url, guard: Box::new(guard) }
}

/// A fixture over a fresh SQLite file in a temp dir.
pub async fn sqlite_fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    fixture(format!("sqlite://{}/leases.db", dir.path().display()), dir).await
}

/// A fixture over a fresh `flock` directory in a temp dir.
pub async fn file_fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    fixture(format!("file://{}/locks", dir.path().display()), dir).await
}

/// A fixture over a private `redis-server` started for this test.
pub async fn redis_fixture() -> Fixture {
    let server = servers::RedisServer::start();
    fixture(server.url(), server).await
}

/// A fixture over a private Redis Cluster (3 masters, 3 replicas) started for this test.
pub async fn redis_cluster_fixture() -> Fixture {
    let cluster = tokio::task::spawn_blocking(servers::RedisCluster::start).await.expect("start");
    fixture(cluster.url(""), cluster).await
}

/// A fixture over a private Sentinel deployment (primary, replica, 3 sentinels).
pub async fn redis_sentinel_fixture() -> Fixture {
    let set = tokio::task::spawn_blocking(servers::SentinelSet::start).await.expect("start");
    fixture(set.url(""), set).await
}

/// A fixture over a private TLS-only `redis-server`, reached with `rediss://…?tls_ca=`.
pub async fn redis_tls_fixture() -> Fixture {
    let server = servers::RedisServer::start_tls();
    fixture(server.url(), server).await
}

/// A fixture over a private single-member etcd cluster (session TTL 2 s, so a frozen
/// holder's lease ends quickly).
pub async fn etcd_fixture() -> Fixture {
    let cluster = servers::EtcdCluster::single();
    fixture(cluster.url("?ttl=2s"), cluster).await
}

/// A fixture over a private ZooKeeper server (session timeout 2 s).
pub async fn zk_fixture() -> Fixture {
    let server = servers::ZkServer::start();
    fixture(server.url("?session=2s"), server).await
}

/// The PostgreSQL the SQL tests use: `$LEASEHOLD_TEST_POSTGRES`, else the machine's server
/// (`postgres://postgres@127.0.0.1:5432/test`). Each fixture works in a schema of its own.
pub fn postgres_base() -> String {
    std::env::var("LEASEHOLD_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// A schema created for one test, dropped (with everything in it) when this is dropped.
pub struct PgSchema {
    /// Its name.
    pub name: String,
}

impl PgSchema {
    /// A fresh, unique schema name (created by the store on first use).
    pub fn new() -> PgSchema {
        let t = leasehold::OwnerToken::generate().expect("random").to_string();
        PgSchema { name: format!("lh_test_{}", &t[..12]) }
    }
}

impl Default for PgSchema {
    fn default() -> Self {
        PgSchema::new()
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        let _ = std::process::Command::new("psql")
            .arg(postgres_base())
            .args(["-q", "-c", &format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name)])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// A fixture over a lease table in a fresh schema of [`postgres_base`].
pub async fn postgres_fixture() -> Fixture {
    let schema = PgSchema::new();
    fixture(format!("{}?schema={}", postgres_base(), schema.name), schema).await
}

/// A fixture over session advisory locks on [`postgres_base`] (fence sequence in a fresh
/// schema).
pub async fn postgres_session_fixture() -> Fixture {
    let schema = PgSchema::new();
    fixture(format!("{}?mode=session&schema={}", postgres_base(), schema.name), schema).await
}

/// The MySQL/MariaDB server the SQL tests use: `$LEASEHOLD_TEST_MYSQL` (a URL without the
/// database), else the machine's server (`mysql://root@127.0.0.1:3306`).
pub fn mysql_server() -> String {
    std::env::var("LEASEHOLD_TEST_MYSQL").unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".into())
}

fn mysql_cli(sql: &str) -> std::io::Result<std::process::ExitStatus> {
    // Host and port from the URL; the machine's server takes root without a password.
    let rest = mysql_server();
    let rest = rest.trim_start_matches("mysql://");
    let (user, hostport) = rest.split_once('@').unwrap_or(("root", rest));
    let (host, port) = hostport.split_once(':').unwrap_or((hostport, "3306"));
    std::process::Command::new("mariadb")
        .args(["-u", user, "-h", host, "-P", port.trim_end_matches('/'), "-e", sql])
        .stdout(std::process::Stdio::null())
        .status()
}

/// A database created for one test, dropped when this is dropped.
pub struct MyDatabase {
    /// Its name.
    pub name: String,
}

impl MyDatabase {
    /// Creates a fresh, unique database.
    pub fn new() -> MyDatabase {
        let t = leasehold::OwnerToken::generate().expect("random").to_string();
        let name = format!("lh_test_{}", &t[..12]);
        let st = mysql_cli(&format!("CREATE DATABASE {name}")).expect("run the mariadb client");
        assert!(st.success(), "cannot create database {name} on {}", mysql_server());
        MyDatabase { name }
    }

    /// The store URL for this database, with `query` appended.
    pub fn url(&self, query: &str) -> String {
        format!("{}/{}{query}", mysql_server(), self.name)
    }
}

impl Default for MyDatabase {
    fn default() -> Self {
        MyDatabase::new()
    }
}

impl Drop for MyDatabase {
    fn drop(&mut self) {
        let _ = mysql_cli(&format!("DROP DATABASE IF EXISTS {}", self.name));
    }
}

/// A fixture over a lease table in a fresh database of [`mysql_server`].
pub async fn mysql_fixture() -> Fixture {
    let db = MyDatabase::new();
    fixture(db.url(""), db).await
}

/// A fixture over `GET_LOCK` session locks (fence table in a fresh database).
pub async fn mysql_session_fixture() -> Fixture {
    let db = MyDatabase::new();
    fixture(db.url("?mode=session"), db).await
}

/// A fence source for tests: an in-process counter, so strictly increasing only within one
/// process. Real deployments use a shared, durable source.
#[derive(Debug, Default)]
pub struct LocalFenceSource(std::sync::atomic::AtomicU64);

#[async_trait::async_trait]
impl leasehold::backends::redis::redlock::FenceSource for LocalFenceSource {
    async fn next(&self, _key: &leasehold::Key) -> leasehold::Result<leasehold::FenceToken> {
        Ok(leasehold::FenceToken::new(self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1))
    }
    fn promise(&self) -> leasehold::FenceRepeat {
        // Within one process it never goes back; a restart would reset it.
        leasehold::FenceRepeat::ClockBacked
    }
}

/// `redlock://` URL over these servers.
pub fn redlock_url(servers: &[servers::RedisServer]) -> String {
    let hosts: Vec<String> = servers.iter().map(|s| format!("127.0.0.1:{}", s.port())).collect();
    format!("redlock://{}", hosts.join(","))
}

/// A fixture over `n` private Redis servers combined by Redlock, with a [`LocalFenceSource`]
/// when `fenced`.
pub async fn redlock_fixture(n: usize, fenced: bool) -> Fixture {
    let servers: Vec<servers::RedisServer> =
        (0..n).map(|_| servers::RedisServer::start()).collect();
    let url = redlock_url(&servers);
    let mut store = leasehold::backends::redis::redlock::RedlockStore::connect(&url)
        .await
        .expect("connect redlock");
    if fenced {
        store = store.with_fence_source(std::sync::Arc::new(LocalFenceSource::default()));
    }
    Fixture { locker: leasehold::Locker::new(store), url, guard: Box::new(servers) }
}

/// Generates one `#[tokio::test]` per conformance scenario, each on a fresh fixture made by
/// `$fixture` (an expression evaluating to a future of [`Fixture`]).
#[macro_export]
macro_rules! conformance_suite {
    ($fixture:expr) => {
        $crate::conformance_suite!(@tests $fixture;
            rejects_bad_input, busy_when_held, abandoned_wait_does_not_block_others, mutual_exclusion_tasks, fences_increase,
            owner_checked_renew_and_release, renew_answered_not_owner_marks_lost, renew_extends,
            auto_renew_keeps_lease, many_leases_auto_renew, lost_fires_by_local_deadline,
            guard_cancels_on_loss, waiter_gets_lease_after_release,
            waiter_gets_lease_after_expiry, dropped_lease_is_released,
            cancelled_acquire_leaves_no_orphan, holders_lists_grant, holders_show_who_holds, no_self_wait, no_self_wait_in_join,
            no_self_wait_in_join_one_shot, release_is_not_a_loss,
            acquire_right_after_drop, cancelled_release_still_frees);
    };
    (@tests $fixture:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let fx: $crate::Fixture = $fixture.await;
                $crate::conformance::$name(&fx.locker).await;
            }
        )*
    };
}

/// A fresh SQLite file in a temporary directory as a fenced resource, for `process_suite!`'s
/// stalled-holder tests of a store with no resource of its own: the directory (removed on drop)
/// and the resource spec.
pub fn sqlite_resource(_store_url: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let spec = format!("sqlite:{}", dir.path().join("resource.db").display());
    (dir, spec)
}

/// The process-level tests of one store, beside [`conformance_suite!`]: `lh-worker`
/// processes excluding each other on one key (`mutex`, one test per fixture); four processes
/// sharing three permits of a semaphore, each slot exclusive and never more than three holders
/// at once by the history checker (`permits`, for a store that holds semaphores); a holder frozen
/// past its lease, whose late write a fenced resource refuses, and the control whose
/// unfenced write lands on the successor's (`stalled`, with the resource to write to:
/// `resource` makes `(guard, spec)` from the store URL, `after` cleans up after it); a frozen session holder
/// keeping its lock (`session`).
///
/// ```ignore
/// process_suite! {
///     mutex { multi_process_mutual_exclusion: redis_fixture() }
///     permits { multi_process_permits: redis_fixture() }
///     stalled redis_fixture(), resource |_| { let r = RedisServer::start(); let u = r.url(); (r, u) };
/// }
/// ```
#[macro_export]
macro_rules! process_suite {
    (
        $(mutex { $($mname:ident: $mfx:expr),* $(,)? })?
        $(permits { $($pname:ident: $pfx:expr),* $(,)? })?
        $(stalled $sfx:expr, resource $res:expr $(, after $after:expr)?;)?
        $(session { $($sname:ident: $ssfx:expr),* $(,)? })?
    ) => {
        fn worker() -> &'static ::std::path::Path {
            ::std::path::Path::new(env!("CARGO_BIN_EXE_lh-worker"))
        }

        $($(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $mname() {
                let fx: $crate::Fixture = $mfx.await;
                $crate::process::multi_process_mutex(&fx.url, worker(), 4, 40).await;
            }
        )*)?

        $($(
            /// Four processes, three permits: each slot exclusive, never more than three at
            /// once.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $pname() {
                let fx: $crate::Fixture = $pfx.await;
                $crate::process::multi_process_permits(&fx.url, worker(), 4, 30, 3).await;
            }
        )*)?

        $(
            /// A frozen holder outlives its lease; a successor gets the key, and the resumed
            /// holder's write is refused by the fenced resource.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn stalled_holder_is_fenced_off() {
                let fx: $crate::Fixture = $sfx.await;
                let (res, spec) = ($res)(fx.url.as_str());
                let r = $crate::process::stalled_holder(&fx.locker, &fx.url, worker(), &spec, true)
                    .await;
                $crate::process::assert_stale_write_rejected(&r);
                $crate::process::assert_release_said_not_ours(&r);
                $(($after)(&res).await;)?
                drop(res);
            }

            /// The control: the resumed holder's unfenced write lands on top of the
            /// successor's.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn stalled_holder_without_fencing_overwrites_successor() {
                let fx: $crate::Fixture = $sfx.await;
                let (res, spec) = ($res)(fx.url.as_str());
                let r =
                    $crate::process::stalled_holder(&fx.locker, &fx.url, worker(), &spec, false)
                        .await;
                $crate::process::assert_stale_write_accepted(&r);
                $(($after)(&res).await;)?
                drop(res);
            }
        )?

        $($(
            /// A frozen session holder keeps its lock until it dies.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $sname() {
                let fx: $crate::Fixture = $ssfx.await;
                $crate::process::stalled_session_holder_keeps_lock(&fx.locker, &fx.url, worker())
                    .await;
            }
        )*)?
    };
}
