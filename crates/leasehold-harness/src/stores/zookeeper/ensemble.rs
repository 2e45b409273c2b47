//! A private three-node ZooKeeper ensemble (quorum 2), killed on drop; its leader found with
//! the `srvr` four-letter word and killed or restarted on demand.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::failure::{FailingStore, Plan};
use crate::spawn::{free_port, kill9_child, need};

/// One member: its client, quorum and election ports, its data directory, its process.
struct Member {
    client: u16,
    quorum: u16,
    election: u16,
    dir: std::path::PathBuf,
    child: Option<Child>,
}

/// A private ZooKeeper ensemble of three members on loopback (Debian's `zookeeper` package,
/// the machine's Java), 100 ms ticks so sessions can be short; `4lw` `ruok,srvr,mntr,stat`.
pub struct ZkEnsemble {
    _dir: tempfile::TempDir,
    nodes: Vec<Member>,
}

/// Where Debian's `zookeeper` package puts its jar and configuration.
const ZK_CLASSPATH: &str = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar";

/// How long an ensemble gets to elect a leader and serve, from its start.
const UP: Duration = Duration::from_secs(60);

impl ZkEnsemble {
    /// Starts three members and waits until each serves (one leader, two followers).
    pub fn start() -> Self {
        assert!(
            std::path::Path::new("/usr/share/java/zookeeper.jar").exists(),
            "zookeeper is not installed: run `bash scripts/test`, which installs it"
        );
        for _ in 0..3 {
            if let Some(e) = Self::try_start() {
                return e;
            }
        }
        panic!("could not start a three-node ZooKeeper ensemble on free loopback ports");
    }

    fn try_start() -> Option<Self> {
        let dir = tempfile::tempdir().expect("temp dir");
        let nodes = (1..=3)
            .map(|i| {
                let d = dir.path().join(format!("zk{i}"));
                std::fs::create_dir_all(d.join("data")).unwrap();
                std::fs::write(d.join("data").join("myid"), format!("{i}\n")).unwrap();
                Member {
                    client: free_port(),
                    quorum: free_port(),
                    election: free_port(),
                    dir: d,
                    child: None,
                }
            })
            .collect();
        let mut e = ZkEnsemble { _dir: dir, nodes };
        for i in 0..3 {
            e.write_config(i);
        }
        for i in 0..3 {
            e.spawn(i);
        }
        e.wait_serving(UP).then_some(e)
    }

    fn write_config(&self, i: usize) {
        let m = &self.nodes[i];
        let mut cfg = format!(
            "tickTime=100\ninitLimit=50\nsyncLimit=20\ndataDir={}\nclientPort={}\n\
             clientPortAddress=127.0.0.1\nminSessionTimeout=200\nmaxSessionTimeout=60000\n\
             admin.enableServer=false\n4lw.commands.whitelist=ruok,srvr,mntr,stat\n\
             cnxTimeout=500\n",
            m.dir.join("data").display(),
            m.client
        );
        for (n, o) in self.nodes.iter().enumerate() {
            cfg.push_str(&format!("server.{}=127.0.0.1:{}:{}\n", n + 1, o.quorum, o.election));
        }
        std::fs::write(m.dir.join("zoo.cfg"), cfg).unwrap();
    }

    fn spawn(&mut self, i: usize) {
        let m = &mut self.nodes[i];
        let log = std::fs::File::create(m.dir.join("zk.log")).expect("zk log");
        let child = Command::new(need("java"))
            .args(["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx128m"])
            .args(["-cp", ZK_CLASSPATH])
            .arg(format!("-Dzookeeper.log.dir={}", m.dir.display()))
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(m.dir.join("zoo.cfg"))
            .current_dir(&m.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn zookeeper");
        m.child = Some(child);
    }

    /// Waits until every running member serves and exactly one is the leader; `false` when a
    /// member exited (a port taken, most likely) or `limit` passed.
    fn wait_serving(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self
                .nodes
                .iter_mut()
                .any(|m| m.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(Some(_)))))
            {
                return false;
            }
            let modes: Vec<Option<String>> =
                (0..3).filter(|&i| self.nodes[i].child.is_some()).map(|i| self.mode(i)).collect();
            let leaders = modes.iter().filter(|m| m.as_deref() == Some("leader")).count();
            if leaders == 1 && modes.iter().all(Option::is_some) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// Sends a four-letter word to member `i`; its answer ("" when it does not answer).
    pub fn four(&self, i: usize, cmd: &str) -> String {
        let port = self.nodes[i].client;
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return String::new() };
        let _ = s.set_read_timeout(Some(Duration::from_millis(1000)));
        if s.write_all(cmd.as_bytes()).is_err() {
            return String::new();
        }
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    /// Member `i`'s `Mode:` from `srvr` (`leader`, `follower`), `None` while it does not serve.
    pub fn mode(&self, i: usize) -> Option<String> {
        self.four(i, "srvr")
            .lines()
            .find_map(|l| l.strip_prefix("Mode: "))
            .map(|m| m.trim().to_owned())
    }

    /// The member that is the leader now, if one serves.
    pub fn leader(&self) -> Option<usize> {
        (0..3).find(|&i| self.nodes[i].child.is_some() && self.mode(i).as_deref() == Some("leader"))
    }

    /// Member `i`'s client port.
    pub fn port(&self, i: usize) -> u16 {
        self.nodes[i].client
    }

    /// `zk://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3` plus `suffix` (e.g. `?session=1s`).
    pub fn url(&self, suffix: &str) -> String {
        let hosts: Vec<String> =
            self.nodes.iter().map(|m| format!("127.0.0.1:{}", m.client)).collect();
        format!("zk://{}{suffix}", hosts.join(","))
    }

    /// `kill -9` of member `i`.
    pub fn kill9(&mut self, i: usize) {
        kill9_child(&mut self.nodes[i].child);
    }

    /// Kills the leader and waits (bounded) until the two others have elected a new one;
    /// the old leader's index, or an error when none served or none took over.
    pub fn kill_leader(&mut self) -> Result<usize, String> {
        let old = self.leader().ok_or("no member was the leader")?;
        self.kill9(old);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(new) = self.leader() {
                return if new == old {
                    Err("the killed leader still answers".into())
                } else {
                    Ok(old)
                };
            }
            if Instant::now() > deadline {
                return Err("no new leader within 30 s of killing the old one".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits (bounded) until the ensemble has a leader again: `Err` after `limit`.
    pub fn wait_leader(&self, limit: Duration) -> Result<usize, String> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(l) = self.leader() {
                return Ok(l);
            }
            if Instant::now() > deadline {
                return Err(format!("no ZooKeeper leader within {limit:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills member `i` (if running) and starts it again on its ports and data, waiting until
    /// it serves again.
    pub fn restart(&mut self, i: usize) {
        self.kill9(i);
        self.spawn(i);
        assert!(self.wait_serving(UP), "zookeeper member {} did not serve again", i + 1);
    }

    fn pid(&self, i: usize) -> Pid {
        Pid::from_raw(self.nodes[i].child.as_ref().expect("member running").id() as i32)
    }

    /// Freezes member `i` (SIGSTOP).
    pub fn stop(&self, i: usize) {
        kill(self.pid(i), Signal::SIGSTOP).expect("SIGSTOP");
    }

    /// Resumes member `i` (SIGCONT).
    pub fn cont(&self, i: usize) {
        kill(self.pid(i), Signal::SIGCONT).expect("SIGCONT");
    }
}

impl Drop for ZkEnsemble {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill9(i);
        }
    }
}

/// The ensemble as a failing store: `failover` and `store-kill` both kill the leader (the
/// latter restarts it on its data afterwards); holder and successor know all three members.
pub(super) struct Failing {
    zk: ZkEnsemble,
    killed: Option<usize>,
}

/// `failover` (and `store-kill`) on a fresh three-node ensemble.
pub(crate) fn plan() -> Plan {
    Plan {
        start: || Box::new(Failing { zk: ZkEnsemble::start(), killed: None }),
        setup: "a private three-node ZooKeeper ensemble (quorum 2, tick 100 ms), fresh for each \
                trial; the leader (srvr: Mode: leader) was killed (-9) during the hold and the \
                two others elected a new one (store-kill: the old leader was restarted on its \
                data afterwards); holder and successor know all three members",
    }
}

impl FailingStore for Failing {
    fn url(&self, suffix: &str) -> String {
        self.zk.url(suffix)
    }
    fn kill9(&mut self) {
        self.killed = self.zk.kill_leader().ok();
    }
    fn restart(&mut self) {
        if let Some(i) = self.killed.take() {
            self.zk.restart(i);
        }
    }
    fn fail_over(&mut self, suffix: &str) -> (String, String) {
        let what = match self.zk.kill_leader() {
            Ok(i) => format!("leader (member {}) killed; a new leader took over", i + 1),
            Err(e) => format!("leader failover failed: {e}"),
        };
        (what, self.zk.url(suffix))
    }
}
