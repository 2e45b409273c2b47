//! A private Redis Cluster of three masters and three replicas on loopback, killed on drop:
//! the master of a key's slot found, killed, and its replica's promotion awaited; `CLUSTER
//! FAILOVER` on demand.

use super::*;

/// How long a cluster gets to come up (every slot covered, every replica linked).
const UP: Duration = Duration::from_secs(60);

/// One node: its port (its bus is port + 10000), its directory, its process.
struct Node {
    port: u16,
    dir: std::path::PathBuf,
    child: Option<Child>,
}

/// A private Redis Cluster (`--cluster-enabled yes`, `cluster-node-timeout` 1000 ms, no
/// persistence) of 3 masters and 3 replicas, made with `redis-cli --cluster create
/// --cluster-replicas 1`.
pub struct RedisCluster {
    _dir: tempfile::TempDir,
    nodes: Vec<Node>,
}

/// A free loopback port below 55535 whose cluster bus port (port + 10000) is free too.
pub fn cluster_port() -> u16 {
    for _ in 0..200 {
        let p = free_port();
        if p < 55535 && TcpListener::bind(("127.0.0.1", p + 10000)).is_ok() {
            return p;
        }
    }
    panic!("no free loopback port below 55535 with a free bus port (port + 10000)")
}

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone)]
pub struct ClusterNode {
    /// The node id.
    pub id: String,
    /// Its client port.
    pub port: u16,
    /// Whether it is a master (else a replica).
    pub master: bool,
    /// The id of its master, for a replica.
    pub master_id: Option<String>,
    /// Whether it is flagged failing (`fail`, `fail?`).
    pub failing: bool,
    /// Its slot ranges (inclusive).
    pub slots: Vec<(u16, u16)>,
}

impl RedisCluster {
    /// Starts six nodes, creates the cluster, and waits until `cluster_state:ok` on every
    /// node, all 16384 slots covered and each master has its replica.
    pub fn start() -> Self {
        for _ in 0..3 {
            if let Some(c) = Self::try_start() {
                return c;
            }
        }
        panic!("could not start a private Redis Cluster (3 masters, 3 replicas)");
    }

    fn try_start() -> Option<Self> {
        let dir = tempfile::tempdir().expect("temp dir");
        let nodes = (0..6)
            .map(|i| {
                let d = dir.path().join(format!("node{i}"));
                std::fs::create_dir_all(&d).unwrap();
                Node { port: cluster_port(), dir: d, child: None }
            })
            .collect();
        let mut c = RedisCluster { _dir: dir, nodes };
        for i in 0..6 {
            if !c.spawn(i) {
                return None;
            }
        }
        let addrs: Vec<String> = c.nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
        let out = Command::new(need("timeout"))
            .arg("60")
            .arg(need("redis-cli"))
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster create");
        if !out.status.success() {
            return None;
        }
        c.wait_ok(UP).then_some(c)
    }

    fn spawn(&mut self, i: usize) -> bool {
        let n = &mut self.nodes[i];
        let child = Command::new(need("redis-server"))
            .args(["--port", &n.port.to_string(), "--bind", "127.0.0.1", "--protected-mode", "no"])
            .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "1000"])
            .arg("--cluster-config-file")
            .arg(n.dir.join("nodes.conf"))
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--repl-diskless-sync-delay", "0"])
            .arg("--dir")
            .arg(&n.dir)
            .arg("--logfile")
            .arg(n.dir.join("redis.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let port = n.port;
        let mut child = Some(child);
        let up = until_up(&mut child, Duration::from_secs(10), || cli(port, &["PING"]) == "PONG");
        self.nodes[i].child = child;
        up
    }

    /// Waits until every running node says `cluster_state:ok`, every slot is covered by a
    /// master that is not failing, and every master of a slot range has a linked replica
    /// (after a failover: the survivors agree, the old master's slots moved).
    fn wait_ok(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.healthy() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    fn healthy(&self) -> bool {
        let running: Vec<u16> =
            self.nodes.iter().filter(|n| n.child.is_some()).map(|n| n.port).collect();
        let all_ok = running.iter().all(|&p| {
            let info = cli(p, &["CLUSTER", "INFO"]);
            info.contains("cluster_state:ok") && info.contains("cluster_slots_ok:16384")
        });
        if !all_ok {
            return false;
        }
        let nodes = self.cluster_nodes();
        let covered: u32 = nodes
            .iter()
            .filter(|n| n.master && !n.failing)
            .flat_map(|n| n.slots.iter())
            .map(|(a, b)| u32::from(b - a) + 1)
            .sum();
        let replicas = |id: &str| {
            nodes.iter().any(|r| {
                r.master_id.as_deref() == Some(id) && !r.failing && running.contains(&r.port)
            })
        };
        covered == 16384
            && nodes.iter().filter(|n| n.master && !n.slots.is_empty()).all(|m| replicas(&m.id))
    }

    /// `CLUSTER NODES` as read from the first running node.
    pub fn cluster_nodes(&self) -> Vec<ClusterNode> {
        let Some(p) = self.nodes.iter().find(|n| n.child.is_some()).map(|n| n.port) else {
            return Vec::new();
        };
        cli(p, &["CLUSTER", "NODES"]).lines().filter_map(parse_node).collect()
    }

    /// The ports of the six nodes.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// `redis-cluster://127.0.0.1:P1,…` over every node (the seeds), plus `suffix`.
    pub fn url(&self, suffix: &str) -> String {
        let hosts: Vec<String> = self.ports().iter().map(|p| format!("127.0.0.1:{p}")).collect();
        format!("redis-cluster://{}{suffix}", hosts.join(","))
    }

    /// Runs `redis-cli -p PORT ARGS…` (bounded) against node `port`; stdout, trimmed.
    pub fn cli(&self, port: u16, args: &[&str]) -> String {
        cli(port, args)
    }

    /// The slot of `key` (`CLUSTER KEYSLOT`).
    pub fn slot_of(&self, key: &str) -> Option<u16> {
        let p = self.nodes.iter().find(|n| n.child.is_some())?.port;
        cli(p, &["CLUSTER", "KEYSLOT", key]).parse().ok()
    }

    /// The master serving `key`'s slot now.
    pub fn master_of(&self, key: &str) -> Option<ClusterNode> {
        let slot = self.slot_of(key)?;
        self.cluster_nodes().into_iter().find(|n| {
            n.master && !n.failing && n.slots.iter().any(|&(a, b)| a <= slot && slot <= b)
        })
    }

    /// Kills (-9) the master of `key`'s slot; its port.
    pub fn kill_master_of(&mut self, key: &str) -> Result<u16, String> {
        let m = self.master_of(key).ok_or_else(|| format!("no master serves {key:?}"))?;
        let i = self.index(m.port)?;
        kill9_child(&mut self.nodes[i].child);
        Ok(m.port)
    }

    /// Waits (bounded by `limit`) until a node other than `old` masters `key`'s slot and the
    /// cluster is `ok` again on the survivors; the new master's port.
    pub fn wait_promoted(&self, key: &str, old: u16, limit: Duration) -> Result<u16, String> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(m) = self.master_of(key).filter(|m| m.port != old) {
                let info = cli(m.port, &["CLUSTER", "INFO"]);
                if info.contains("cluster_state:ok") {
                    return Ok(m.port);
                }
            }
            if Instant::now() > deadline {
                return Err(format!("no replica took over {key:?}'s slot within {limit:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `CLUSTER FAILOVER` on a replica of `key`'s master, waiting (bounded) until it is the
    /// master of the slot; the new master's port.
    pub fn failover(&self, key: &str) -> Result<u16, String> {
        let m = self.master_of(key).ok_or_else(|| format!("no master serves {key:?}"))?;
        let r = self
            .cluster_nodes()
            .into_iter()
            .find(|r| r.master_id.as_deref() == Some(m.id.as_str()) && !r.failing)
            .ok_or("the master has no replica")?;
        let said = cli(r.port, &["CLUSTER", "FAILOVER"]);
        if said != "OK" {
            return Err(format!("CLUSTER FAILOVER said {said:?}"));
        }
        self.wait_promoted(key, m.port, Duration::from_secs(30))
    }

    /// Starts a killed node again on its port (empty: no persistence, but its `nodes.conf`
    /// brings it back into the cluster, as a replica once its slots moved).
    pub fn restart(&mut self, port: u16) -> Result<(), String> {
        let i = self.index(port)?;
        kill9_child(&mut self.nodes[i].child);
        if !self.spawn(i) {
            return Err(format!("node :{port} did not come back"));
        }
        Ok(())
    }

    fn index(&self, port: u16) -> Result<usize, String> {
        self.nodes.iter().position(|n| n.port == port).ok_or_else(|| format!("no node :{port}"))
    }
}

/// One `CLUSTER NODES` line: `id ip:port@bus flags master ping pong epoch link slot…`.
fn parse_node(line: &str) -> Option<ClusterNode> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 8 {
        return None;
    }
    let port = f[1].split('@').next()?.rsplit(':').next()?.parse().ok()?;
    let flags = f[2];
    let slots = f[8..]
        .iter()
        .filter(|s| !s.starts_with('['))
        .filter_map(|s| match s.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => s.parse().ok().map(|v| (v, v)),
        })
        .collect();
    Some(ClusterNode {
        id: f[0].to_owned(),
        port,
        master: flags.contains("master"),
        master_id: (f[3] != "-").then(|| f[3].to_owned()),
        failing: flags.contains("fail"),
        slots,
    })
}

/// `redis-cli -p PORT ARGS…`, bounded by 10 s; stdout, trimmed ("" on failure).
fn cli(port: u16, args: &[&str]) -> String {
    client_output(
        Command::new(need("timeout"))
            .arg("10")
            .arg(need("redis-cli"))
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(args),
    )
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            kill9_child(&mut n.child);
        }
    }
}
