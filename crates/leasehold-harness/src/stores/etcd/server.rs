//! A private etcd cluster of 1 or 3 members, killed on drop.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::failure::{FailingStore, Plan};
use crate::spawn::{free_port, kill9_child, need};

/// One member of a private etcd cluster.
struct EtcdNode {
    name: String,
    client_port: u16,
    peer_port: u16,
    dir: std::path::PathBuf,
    child: Option<Child>,
}

/// A private etcd cluster (1 or 3 members) on free loopback ports, with short Raft timers so
/// elections take a fraction of a second.
pub struct EtcdCluster {
    nodes: Vec<EtcdNode>,
    initial: String,
    _dir: tempfile::TempDir,
}

impl EtcdCluster {
    /// Starts a single-member cluster.
    pub fn single() -> Self {
        Self::start(1)
    }

    /// Starts an `n`-member cluster and waits until it has a leader.
    pub fn start(n: usize) -> Self {
        for _ in 0..5 {
            let dir = tempfile::tempdir().expect("temp dir");
            let nodes: Vec<EtcdNode> = (0..n)
                .map(|i| EtcdNode {
                    name: format!("n{i}"),
                    client_port: free_port(),
                    peer_port: free_port(),
                    dir: dir.path().join(format!("n{i}")),
                    child: None,
                })
                .collect();
            let initial = nodes
                .iter()
                .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
                .collect::<Vec<_>>()
                .join(",");
            let mut c = EtcdCluster { nodes, initial, _dir: dir };
            for i in 0..n {
                c.spawn(i);
            }
            if c.wait_healthy(Duration::from_secs(30)) {
                return c;
            }
        }
        panic!("could not start an etcd cluster of {n} on free ports");
    }

    fn spawn(&mut self, i: usize) {
        let initial = self.initial.clone();
        let m = &mut self.nodes[i];
        let client = format!("http://127.0.0.1:{}", m.client_port);
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let log = std::fs::File::create(format!("{}.log", m.dir.display())).expect("etcd log");
        let child = Command::new(need("etcd"))
            .args(["--name", &m.name])
            .arg("--data-dir")
            .arg(&m.dir)
            .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &initial, "--initial-cluster-state", "new"])
            .args(["--heartbeat-interval", "25", "--election-timeout", "250"])
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn etcd");
        m.child = Some(child);
    }

    fn wait_healthy(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self
                .nodes
                .iter_mut()
                .any(|m| m.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(Some(_)))))
            {
                return false; // a member exited: a port was taken, most likely
            }
            if self.leader().is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// `etcd://127.0.0.1:P1,127.0.0.1:P2,…` (plus `suffix`, e.g. `/prefix?ttl=2s`).
    pub fn url(&self, suffix: &str) -> String {
        let hosts: Vec<String> =
            self.nodes.iter().map(|m| format!("127.0.0.1:{}", m.client_port)).collect();
        format!("etcd://{}{suffix}", hosts.join(","))
    }

    /// The client endpoints, `http://127.0.0.1:P,…`, as etcdctl takes them.
    pub fn endpoints(&self) -> String {
        self.nodes
            .iter()
            .filter(|m| m.child.is_some())
            .map(|m| format!("http://127.0.0.1:{}", m.client_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Runs `etcdctl --endpoints … ARGS…` (bounded by `timeout 20`); stdout, trimmed.
    pub fn ctl(&self, args: &[&str]) -> String {
        let out = Command::new(need("timeout"))
            .arg("20")
            .arg(need("etcdctl"))
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.endpoints()))
            .args(args)
            .output()
            .expect("run etcdctl");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Index of the current leader, if the running members agree on one.
    pub fn leader(&self) -> Option<usize> {
        for (i, m) in self.nodes.iter().enumerate() {
            if m.child.is_none() {
                continue;
            }
            let out = Command::new(need("timeout"))
                .arg("5")
                .arg(need("etcdctl"))
                .env("ETCDCTL_API", "3")
                .arg(format!("--endpoints=http://127.0.0.1:{}", m.client_port))
                .args(["endpoint", "status", "-w", "fields"])
                .output()
                .ok()?;
            let text = String::from_utf8_lossy(&out.stdout);
            let field = |name: &str| {
                text.lines()
                    .find(|l| l.starts_with(&format!("\"{name}\"")))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|v| v.trim().trim_end_matches(',').to_string())
            };
            if let (Some(leader), Some(me)) = (field("Leader"), field("MemberID"))
                && leader != "0"
                && leader == me
            {
                return Some(i);
            }
        }
        None
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether it has no members (never, once started).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    fn pid(&self, i: usize) -> Pid {
        Pid::from_raw(self.nodes[i].child.as_ref().expect("member running").id() as i32)
    }

    /// `kill -9` member `i`.
    pub fn kill9(&mut self, i: usize) {
        kill9_child(&mut self.nodes[i].child);
    }

    /// Starts member `i` again on its ports and data dir, and waits for a leader.
    pub fn restart(&mut self, i: usize) {
        self.kill9(i);
        // Rejoining: the cluster exists already.
        self.spawn(i);
        assert!(self.wait_healthy(Duration::from_secs(30)), "etcd member {i} did not come back");
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

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill9(i);
        }
    }
}

/// `store-kill` on a private one-member etcd, `failover` on three members.
pub(super) fn plan(failover: bool) -> Plan {
    if failover {
        Plan {
            start: || Box::new(EtcdCluster::start(3)),
            setup: "a private three-member etcd cluster, fresh for each trial; the leader was \
                    killed (-9) during the hold; holder and successor know all three members",
        }
    } else {
        Plan {
            start: || Box::new(EtcdCluster::single()),
            setup: "a private one-member etcd, fresh for each trial, killed (-9) during the hold \
                    and restarted on its data directory",
        }
    }
}

/// Kills and restarts the first member; fails over by killing the leader.
impl FailingStore for EtcdCluster {
    fn url(&self, suffix: &str) -> String {
        EtcdCluster::url(self, suffix)
    }
    fn kill9(&mut self) {
        EtcdCluster::kill9(self, 0);
    }
    fn restart(&mut self) {
        EtcdCluster::restart(self, 0);
    }
    fn fail_over(&mut self, suffix: &str) -> (String, String) {
        match self.leader() {
            Some(i) => {
                EtcdCluster::kill9(self, i);
                (format!("leader (member {i}) killed"), self.url(suffix))
            }
            None => ("no leader found; nothing killed".into(), self.url(suffix)),
        }
    }
}
