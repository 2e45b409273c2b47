//! A private standalone ZooKeeper server, killed on drop.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::failure::{FailingStore, Plan};
use crate::spawn::{kill9_child, need, on_free_port, until_up};

/// A private standalone ZooKeeper server (Debian's `zookeeper` package, run with the
/// machine's Java) on a free loopback port, with a 100 ms tick so sessions can be short.
pub struct ZkServer {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

/// Where Debian's `zookeeper` package puts its jar and configuration.
const ZK_CLASSPATH: &str = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar";

impl ZkServer {
    /// Starts one and waits until it answers `ruok`.
    pub fn start() -> Self {
        assert!(
            std::path::Path::new("/usr/share/java/zookeeper.jar").exists(),
            "zookeeper is not installed: run `bash scripts/test`, which installs it"
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let mut s = ZkServer { port: 0, dir, child: None };
        on_free_port(5, "zookeeper", |port| {
            s.port = port;
            s.spawn()
        });
        s
    }

    fn spawn(&mut self) -> bool {
        let d = self.dir.path();
        std::fs::create_dir_all(d.join("data")).unwrap();
        std::fs::write(
            d.join("zoo.cfg"),
            format!(
                "tickTime=100\ndataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\n\
                 minSessionTimeout=200\nmaxSessionTimeout=60000\nadmin.enableServer=false\n\
                 4lw.commands.whitelist=ruok,srvr,mntr,wchp,wchs\n",
                d.join("data").display(),
                self.port
            ),
        )
        .unwrap();
        let log = std::fs::File::create(d.join("zk.log")).expect("zk log");
        let child = Command::new(need("java"))
            .args(["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m"])
            .args(["-cp", ZK_CLASSPATH])
            .arg(format!("-Dzookeeper.log.dir={}", d.display()))
            .arg("org.apache.zookeeper.server.ZooKeeperServerMain")
            .arg(d.join("zoo.cfg"))
            .current_dir(d)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn zookeeper");
        let mut child = Some(child);
        let up = until_up(&mut child, Duration::from_secs(30), || self.four("ruok") == "imok");
        self.child = child;
        if !up {
            self.kill9();
        }
        up
    }

    /// Sends a four-letter command (`ruok`, `srvr`, `mntr`) and returns the answer.
    pub fn four(&self, cmd: &str) -> String {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else { return String::new() };
        let _ = s.set_read_timeout(Some(Duration::from_millis(1000)));
        if s.write_all(cmd.as_bytes()).is_err() {
            return String::new();
        }
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `zk://127.0.0.1:PORT` plus `suffix` (e.g. `/chroot?session=2s`).
    pub fn url(&self, suffix: &str) -> String {
        format!("zk://127.0.0.1:{}{suffix}", self.port)
    }

    /// Runs `zkCli.sh -server 127.0.0.1:PORT CMD…` (bounded); stdout, trimmed.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new(need("timeout"))
            .arg("30")
            .arg("/usr/share/zookeeper/bin/zkCli.sh")
            .args(["-server", &format!("127.0.0.1:{}", self.port)])
            .args(args)
            .output()
            .expect("run zkCli.sh");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.as_ref().expect("server running").id() as i32)
    }

    /// `kill -9`.
    pub fn kill9(&mut self) {
        kill9_child(&mut self.child);
    }

    /// Kills it and starts it again on the same port and data (sessions survive on disk).
    pub fn restart(&mut self) {
        self.kill9();
        assert!(self.spawn(), "zookeeper did not come back on port {}", self.port);
    }

    /// Freezes it (SIGSTOP).
    pub fn stop(&self) {
        kill(self.pid(), Signal::SIGSTOP).expect("SIGSTOP");
    }

    /// Resumes it (SIGCONT).
    pub fn cont(&self) {
        kill(self.pid(), Signal::SIGCONT).expect("SIGCONT");
    }
}

impl Drop for ZkServer {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// `store-kill` on a private standalone ZooKeeper; no `failover` (`None`).
pub(super) fn plan(failover: bool) -> Option<Plan> {
    (!failover).then_some(Plan {
        start: || Box::new(ZkServer::start()),
        setup: "a private standalone ZooKeeper, fresh for each trial, killed (-9) during the \
                hold and restarted on its data directory",
    })
}

impl FailingStore for ZkServer {
    fn url(&self, suffix: &str) -> String {
        ZkServer::url(self, suffix)
    }
    fn kill9(&mut self) {
        ZkServer::kill9(self);
    }
    fn restart(&mut self) {
        ZkServer::restart(self);
    }
}
