//! A private PostgreSQL server, or a streaming standby of one, killed on drop.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::failure::{FailingStore, Plan, query};
use crate::spawn::{client_output, free_port, kill9_child, need, on_free_port, respawn, until_up};

/// A private PostgreSQL server (the machine's PostgreSQL binaries) on a free loopback port,
/// trust authentication, database `postgres`; or a streaming standby of one. Run as the
/// `postgres` user when this process is root, since PostgreSQL refuses to run as root.
pub struct PgServer {
    port: u16,
    dir: tempfile::TempDir,
    extra: Vec<String>,
    owner: Option<(nix::unistd::Uid, nix::unistd::Gid)>,
    child: Option<Child>,
}

/// The newest PostgreSQL server binaries on the machine (Debian's layout).
fn pg_bin(name: &str) -> std::path::PathBuf {
    let mut dirs: Vec<_> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("postgres").is_file())
        .collect();
    dirs.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    match dirs.pop() {
        Some(d) => d.join(name),
        None => panic!("no PostgreSQL server under /usr/lib/postgresql: install postgresql"),
    }
}

impl PgServer {
    /// initdb, then starts it and waits until it takes connections.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// As [`PgServer::start`], with extra `postgres` arguments (e.g. `["-c",
    /// "shared_preload_libraries=pg_stat_statements"]`).
    pub fn start_with(extra: &[&str]) -> Self {
        let mut s = Self::new_dir();
        s.extra = extra.iter().map(|a| a.to_string()).collect();
        let data = s.data();
        let out = s
            .command(pg_bin("initdb"))
            .args(["-D"])
            .arg(&data)
            .args(["-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"])
            .output()
            .expect("run initdb");
        assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
        on_free_port(5, "postgres", |port| {
            s.port = port;
            s.spawn()
        });
        s
    }

    /// A streaming standby of `primary` (`pg_basebackup -R`), started and replicating.
    pub fn standby_of(primary: &PgServer) -> Self {
        Self::standby_of_with(primary, &[])
    }

    /// As [`PgServer::standby_of`], with extra `postgres` arguments (e.g. `["-c",
    /// "cluster_name=standby1"]`, the name a primary's `synchronous_standby_names` lists).
    pub fn standby_of_with(primary: &PgServer, extra: &[&str]) -> Self {
        let mut s = Self::new_dir();
        s.extra = extra.iter().map(|a| a.to_string()).collect();
        let out = s
            .command(pg_bin("pg_basebackup"))
            .args(["-h", "127.0.0.1", "-p", &primary.port.to_string(), "-U", "postgres"])
            .arg("-D")
            .arg(s.data())
            .args(["-R", "-X", "stream", "-c", "fast", "--no-sync"])
            .output()
            .expect("run pg_basebackup");
        assert!(out.status.success(), "pg_basebackup: {}", String::from_utf8_lossy(&out.stderr));
        on_free_port(5, "a postgres standby", |port| {
            s.port = port;
            s.spawn()
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        while primary.sql("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")
            != "1"
        {
            assert!(Instant::now() < deadline, "the standby never streamed");
            std::thread::sleep(Duration::from_millis(50));
        }
        s
    }

    fn new_dir() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let owner = nix::unistd::geteuid().is_root().then(|| {
            let u = nix::unistd::User::from_name("postgres")
                .ok()
                .flatten()
                .expect("running as root, PostgreSQL needs the postgres user");
            (u.uid, u.gid)
        });
        // The postgres user must reach its data directory inside this temp dir.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir(dir.path().join("data")).unwrap();
        std::fs::set_permissions(dir.path().join("data"), std::fs::Permissions::from_mode(0o700))
            .unwrap();
        if let Some((uid, gid)) = owner {
            nix::unistd::chown(dir.path(), Some(uid), Some(gid)).unwrap();
            nix::unistd::chown(&dir.path().join("data"), Some(uid), Some(gid)).unwrap();
        }
        PgServer { port: 0, dir, extra: Vec::new(), owner, child: None }
    }

    fn data(&self) -> std::path::PathBuf {
        self.dir.path().join("data")
    }

    fn command(&self, bin: std::path::PathBuf) -> Command {
        use std::os::unix::process::CommandExt;
        let mut c = Command::new(bin);
        if let Some((uid, gid)) = self.owner {
            c.uid(uid.as_raw()).gid(gid.as_raw());
        }
        c.env("LC_ALL", "C").stdin(Stdio::null());
        c
    }

    fn spawn(&mut self) -> bool {
        let log = std::fs::File::create(self.dir.path().join("postgres.log")).unwrap();
        let child = self
            .command(pg_bin("postgres"))
            .arg("-D")
            .arg(self.data())
            .args(["-p", &self.port.to_string(), "-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!("unix_socket_directories={}", self.dir.path().display()))
            .args(["-c", "fsync=off", "-c", "shared_buffers=16MB", "-c", "max_connections=50"])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start postgres");
        let mut child = Some(child);
        let up = until_up(&mut child, Duration::from_secs(30), || self.sql("SELECT 1") == "1");
        self.child = child;
        up
    }

    /// The loopback port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres` plus `suffix` (e.g. `?mode=session`).
    pub fn url(&self, suffix: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres{suffix}", self.port)
    }

    /// Runs one SQL statement with psql (bounded); its output, trimmed, or "" on failure.
    pub fn sql(&self, sql: &str) -> String {
        client_output(
            Command::new(need("timeout"))
                .args(["10", &need("psql"), "-X", "-Atq", "-h", "127.0.0.1", "-U", "postgres"])
                .args(["-p", &self.port.to_string(), "-d", "postgres", "-c", sql]),
        )
    }

    /// `kill -9` the postmaster, and waits until its backends are gone too.
    pub fn kill9(&mut self) {
        kill9_child(&mut self.child);
    }

    /// Kills it (if running) and starts it again on its port and data directory.
    pub fn restart(&mut self) {
        self.kill9();
        // The killed postmaster's children leave within moments; until then the data
        // directory's shared memory is in use and a new postmaster refuses to start.
        let port = self.port;
        respawn(Duration::from_secs(30), &format!("postgres on {port}"), || self.spawn());
    }

    /// Waits until this standby has replayed everything `primary` wrote so far.
    pub fn catch_up(&self, primary: &PgServer) {
        let lsn = primary.sql("SELECT pg_current_wal_lsn()");
        let q = format!("SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn");
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.sql(&q) != "t" {
            assert!(Instant::now() < deadline, "the standby never replayed up to {lsn}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Cuts this standby off its primary (its WAL receiver is pointed at a port where nothing
    /// listens), as a partition or replication lag would: what the primary commits from now on
    /// never arrives.
    pub fn detach(&self) {
        let dead = free_port();
        self.sql(&format!(
            "ALTER SYSTEM SET primary_conninfo = 'host=127.0.0.1 port={dead} user=postgres'"
        ));
        self.sql("SELECT pg_reload_conf()");
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.sql("SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming'")
            != "0"
        {
            assert!(Instant::now() < deadline, "the standby kept streaming");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Promotes this standby (`pg_promote`), waiting until it takes writes.
    pub fn promote(&self) {
        assert_eq!(self.sql("SELECT pg_promote(true, 30)"), "t", "pg_promote failed");
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A private PostgreSQL for the store-failure scenarios: a primary, and for `failover` an
/// asynchronous streaming standby.
struct Failing {
    primary: PgServer,
    standby: Option<PgServer>,
}

pub(super) fn plan(failover: bool) -> Plan {
    if failover {
        Plan {
            start: || {
                let primary = PgServer::start();
                let standby = PgServer::standby_of(&primary);
                Box::new(Failing { primary, standby: Some(standby) })
            },
            setup: "a private PostgreSQL primary and asynchronous streaming standby, fresh for each \
                    trial; an earlier grant replayed on the standby, then the standby was cut off \
                    from the primary just before the holder's grant (the lag asynchronous \
                    replication allows), the primary was killed (-9) and the standby promoted \
                    (pg_promote); the successor uses the promoted standby, the holder keeps its \
                    connection to the dead primary",
        }
    } else {
        Plan {
            start: || Box::new(Failing { primary: PgServer::start(), standby: None }),
            setup: "a private PostgreSQL (the machine's binaries, fsync off: the process is killed, \
                    not the machine) on a free loopback port, fresh for each trial; killed (-9) \
                    during the hold and restarted on its data directory",
        }
    }
}

impl FailingStore for Failing {
    fn url(&self, suffix: &str) -> String {
        self.primary.url(query(suffix))
    }
    fn kill9(&mut self) {
        self.primary.kill9();
    }
    fn restart(&mut self) {
        self.primary.restart();
    }
    fn replicated(&self) -> bool {
        self.standby.is_some()
    }
    fn cut_replica(&mut self, _suffix: &str) -> Result<(), String> {
        if let Some(standby) = &self.standby {
            standby.catch_up(&self.primary);
            standby.detach();
        }
        Ok(())
    }
    fn fail_over(&mut self, suffix: &str) -> (String, String) {
        let Some(standby) = &self.standby else {
            return ("no failover for this store".into(), self.url(suffix));
        };
        self.primary.kill9();
        standby.promote();
        (
            format!(
                "primary :{} killed, standby :{} promoted",
                self.primary.port(),
                standby.port()
            ),
            standby.url(query(suffix)),
        )
    }
}
