//! A private MariaDB server, killed on drop.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::failure::{FailingStore, Plan, query};
use crate::spawn::{
    client_output, kill9_child, need, on_free_port, respawn, sbin, until_up, whoami,
};

/// A private MariaDB server (the machine's `mariadbd`) on a free loopback port, root without
/// a password, with a database `test`.
pub struct MyServer {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl MyServer {
    /// `mariadb-install-db`, then starts it and waits until it takes connections.
    pub fn start() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let user = whoami();
        let out = Command::new(sbin("mariadb-install-db"))
            .arg("--no-defaults")
            .arg(format!("--datadir={}", dir.path().join("data").display()))
            .arg(format!("--user={user}"))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .stdin(Stdio::null())
            .output()
            .expect("run mariadb-install-db");
        assert!(
            out.status.success(),
            "mariadb-install-db: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut s = MyServer { port: 0, dir, child: None };
        on_free_port(5, "mariadbd", |port| {
            s.port = port;
            s.spawn()
        });
        assert_eq!(s.sql("CREATE DATABASE test; SELECT 1"), "1", "CREATE DATABASE test");
        s
    }

    fn spawn(&mut self) -> bool {
        let d = self.dir.path();
        let child = Command::new(sbin("mariadbd"))
            .arg("--no-defaults")
            .arg(format!("--datadir={}", d.join("data").display()))
            .arg(format!("--user={}", whoami()))
            .arg(format!("--port={}", self.port))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--socket={}", d.join("my.sock").display()))
            .arg(format!("--pid-file={}", d.join("my.pid").display()))
            .arg(format!("--log-error={}", d.join("my.log").display()))
            .args(["--innodb-buffer-pool-size=16M", "--skip-log-bin"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mariadbd");
        let mut child = Some(child);
        let up = until_up(&mut child, Duration::from_secs(60), || self.sql("SELECT 1") == "1");
        self.child = child;
        up
    }

    /// The loopback port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `mysql://root@127.0.0.1:PORT/test` plus `suffix` (e.g. `?mode=session`).
    pub fn url(&self, suffix: &str) -> String {
        format!("mysql://root@127.0.0.1:{}/test{suffix}", self.port)
    }

    /// Runs SQL with the `mariadb` client (bounded); its output, trimmed, or "" on failure.
    pub fn sql(&self, sql: &str) -> String {
        client_output(
            Command::new(need("timeout"))
                .args(["10", &need("mariadb"), "-uroot", "-h127.0.0.1", "-N", "-B"])
                .arg(format!("-P{}", self.port))
                .args(["-e", sql]),
        )
    }

    /// `kill -9`.
    pub fn kill9(&mut self) {
        kill9_child(&mut self.child);
    }

    /// Kills it (if running) and starts it again on its port and data directory (InnoDB
    /// recovers what was committed).
    pub fn restart(&mut self) {
        self.kill9();
        let port = self.port;
        respawn(Duration::from_secs(60), &format!("mariadbd on {port}"), || self.spawn());
    }
}

impl Drop for MyServer {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// `store-kill` on a private MariaDB; no `failover` (`None`).
pub(super) fn plan(failover: bool) -> Option<Plan> {
    (!failover).then_some(Plan {
        start: || Box::new(MyServer::start()),
        setup: "a private MariaDB (the machine's mariadbd, defaults: InnoDB flushes its log at \
                every commit) on a free loopback port, fresh for each trial; killed (-9) during \
                the hold and restarted on its data directory",
    })
}

impl FailingStore for MyServer {
    fn url(&self, suffix: &str) -> String {
        MyServer::url(self, query(suffix))
    }
    fn kill9(&mut self) {
        MyServer::kill9(self);
    }
    fn restart(&mut self) {
        MyServer::restart(self);
    }
}
