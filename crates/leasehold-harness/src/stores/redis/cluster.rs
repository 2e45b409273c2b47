//! A private Redis Cluster of three masters and three replicas on loopback, killed on drop:
//! the master of a key's slot found, killed, and its replica's promotion awaited; `CLUSTER
//! FAILOVER` (or `TAKEOVER`) on demand; a replica frozen and cut off its master.

use super::server::{caught_up, lease_names, promoted_read, read_keys};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::failure::{FailingStore, Plan, query};
use crate::spawn::{client_output, free_port, kill9_child, need, until_up};

/// How long a cluster gets to come up (every slot covered, every replica linked).
const UP: Duration = Duration::from_secs(60);

/// One node: its port (its bus is port + 10000), its directory, its process, whether it is
/// frozen (SIGSTOP: asked nothing until resumed, a request would wait for it).
struct Node {
    port: u16,
    dir: std::path::PathBuf,
    child: Option<Child>,
    stopped: bool,
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
                Node { port: cluster_port(), dir: d, child: None, stopped: false }
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
        let running: Vec<u16> = self.live().map(|n| n.port).collect();
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

    /// The nodes running and not frozen.
    fn live(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| n.child.is_some() && !n.stopped)
    }

    /// `CLUSTER NODES` as read from the first running node that is not frozen.
    pub fn cluster_nodes(&self) -> Vec<ClusterNode> {
        let Some(p) = self.live().next().map(|n| n.port) else {
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
        let p = self.live().next()?.port;
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
        let (m, r) = self.master_and_replica(key)?;
        let said = cli(r, &["CLUSTER", "FAILOVER"]);
        if said != "OK" {
            return Err(format!("CLUSTER FAILOVER said {said:?}"));
        }
        self.wait_promoted(key, m, Duration::from_secs(30))
    }

    /// The ports of the master of `key`'s slot and of its replica (linked, not failing).
    pub fn master_and_replica(&self, key: &str) -> Result<(u16, u16), String> {
        let m = self.master_of(key).ok_or_else(|| format!("no master serves {key:?}"))?;
        let r = self
            .cluster_nodes()
            .into_iter()
            .find(|r| r.master_id.as_deref() == Some(m.id.as_str()) && !r.failing)
            .ok_or("the master has no replica")?;
        Ok((m.port, r.port))
    }

    /// Freezes the replica `replica` (SIGSTOP), then closes the replication link of its master
    /// `master` (`CLIENT KILL TYPE replica`): nothing the master takes from now on reaches
    /// the replica, since the link is gone before anything more is sent and a frozen replica
    /// cannot open another. Resume it ([`RedisCluster::resume`]) only once the master is
    /// dead, or it reconnects and catches up. An error (the replica resumed) when no link was
    /// closed. While it is frozen this handle asks it nothing; a cluster client that connects
    /// meanwhile would wait for it.
    pub fn freeze_and_cut(&mut self, master: u16, replica: u16) -> Result<(), String> {
        let i = self.index(replica)?;
        self.signal(i, Signal::SIGSTOP)?;
        self.nodes[i].stopped = true;
        let said = cli(master, &["CLIENT", "KILL", "TYPE", "replica"]);
        if said.parse::<u32>().is_ok_and(|n| n >= 1) {
            return Ok(());
        }
        self.resume(replica)?;
        Err(format!("CLIENT KILL TYPE replica on :{master} said {said:?}"))
    }

    /// Resumes a node frozen by [`RedisCluster::freeze_and_cut`] (SIGCONT).
    pub fn resume(&mut self, port: u16) -> Result<(), String> {
        let i = self.index(port)?;
        self.signal(i, Signal::SIGCONT)?;
        self.nodes[i].stopped = false;
        Ok(())
    }

    fn signal(&self, i: usize, sig: Signal) -> Result<(), String> {
        let c = self.nodes[i].child.as_ref().ok_or("the node is not running")?;
        kill(Pid::from_raw(c.id() as i32), sig).map_err(|e| format!("{sig}: {e}"))
    }

    /// Kills (-9) the node on `port`.
    pub fn kill_node(&mut self, port: u16) -> Result<(), String> {
        let i = self.index(port)?;
        kill9_child(&mut self.nodes[i].child);
        self.nodes[i].stopped = false;
        Ok(())
    }

    /// Moves the slot of `key` (a key name, e.g. `leasehold:{k}`) to another master by hand,
    /// as `redis-cli --cluster reshard` does for each slot: `IMPORTING` on the target,
    /// `MIGRATING` on the source, `MIGRATE` of its keys, then `SETSLOT NODE` on every master.
    /// `between` runs while the slot is half-moved (keys on the target, the source answering
    /// `ASK`). Returns the (source, target) ports.
    pub fn migrate_slot(&self, key: &str, between: impl FnOnce()) -> Result<(u16, u16), String> {
        let slot = self.slot_of(key).ok_or("no slot")?.to_string();
        let src = self.master_of(key).ok_or_else(|| format!("no master serves {key:?}"))?;
        let nodes = self.cluster_nodes();
        let dst = nodes
            .iter()
            .find(|n| n.master && !n.failing && n.id != src.id && !n.slots.is_empty())
            .ok_or("no other master")?
            .clone();
        let ok = |port: u16, args: &[&str]| {
            let said = cli(port, args);
            if said == "OK" { Ok(()) } else { Err(format!("{args:?} on :{port} said {said:?}")) }
        };
        ok(dst.port, &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &src.id])?;
        ok(src.port, &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &dst.id])?;
        loop {
            let keys = cli(src.port, &["CLUSTER", "GETKEYSINSLOT", &slot, "100"]);
            let keys: Vec<&str> = keys.lines().filter(|l| !l.is_empty()).collect();
            if keys.is_empty() {
                break;
            }
            let mut args = vec!["MIGRATE", "127.0.0.1"];
            let port = dst.port.to_string();
            args.extend([port.as_str(), "", "0", "5000", "KEYS"]);
            args.extend(keys);
            ok(src.port, &args)?;
        }
        between();
        for n in nodes.iter().filter(|n| n.master && !n.failing) {
            ok(n.port, &["CLUSTER", "SETSLOT", &slot, "NODE", &dst.id])?;
        }
        Ok((src.port, dst.port))
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

/// The cluster as a failing store for chaos's `failover` on topology `redis-cluster`: the
/// replica of the key's master frozen and cut off just before the holder's grant, the master
/// killed (-9), the replica resumed and promoted at once (`CLUSTER FAILOVER TAKEOVER`), so the
/// holder's grant is lost, as asynchronous replication allows; holder and successor know
/// every node as a seed.
pub(super) struct Failing {
    cluster: RedisCluster,
    killed: Option<u16>,
    cut: Option<Cut>,
}

/// A replica cut off its master by [`FailingStore::cut_replica`]: the two ports, the key's
/// lease and fence-counter names, and the master's counter at the cut.
struct Cut {
    master: u16,
    replica: u16,
    lease: String,
    fence: String,
    fence_at_cut: String,
}

/// `failover` on a fresh 3 + 3 cluster, for the lease of [`CHAOS_KEY`].
pub(crate) fn plan() -> Plan {
    Plan {
        start: || Box::new(Failing { cluster: RedisCluster::start(), killed: None, cut: None }),
        setup: "a private Redis Cluster (3 masters, 3 replicas, cluster-node-timeout 1000 ms, no persistence), fresh for each trial; an earlier grant replicated (the replica's offset reached the master's), then, once the holder had connected and just before its grant, the replica of the key's master was frozen (SIGSTOP) and its replication link closed (CLIENT KILL TYPE replica): the lag asynchronous replication allows, made certain; after the holder's first write the master was killed (-9), the replica resumed and promoted at once (CLUSTER FAILOVER TAKEOVER), and what it held of the key read before any successor; holder and successor know every node as a seed",
    }
}

/// The key chaos holds (`leasehold chaos`'s `KEY`).
pub const CHAOS_KEY: &str = "leasehold-chaos:stalled-holder";

impl FailingStore for Failing {
    fn url(&self, suffix: &str) -> String {
        self.cluster.url(query(suffix))
    }
    fn kill9(&mut self) {
        let (lease, _) = lease_names("", CHAOS_KEY);
        self.killed = self.cluster.kill_master_of(&lease).ok();
    }
    fn restart(&mut self) {
        if let Some(p) = self.killed.take() {
            let _ = self.cluster.restart(p);
        }
    }
    fn replicated(&self) -> bool {
        true
    }
    fn cut_after_connect(&self) -> bool {
        true
    }
    fn cut_replica(&mut self, suffix: &str) -> Result<(), String> {
        let (lease, fence) = lease_names(query(suffix), CHAOS_KEY);
        let (master, replica) = self.cluster.master_and_replica(&lease)?;
        caught_up(master, replica, Duration::from_secs(5))
            .map_err(|e| format!("the replica never applied the warm-up grant: {e}"))?;
        let at_cut = read_keys(master, "0", &[&fence], Duration::from_secs(5))?;
        let fence_at_cut = at_cut.into_iter().flatten().next().ok_or("no fence counter")?;
        self.cluster.freeze_and_cut(master, replica)?;
        self.cut = Some(Cut { master, replica, lease, fence, fence_at_cut });
        Ok(())
    }
    fn fail_over(&mut self, suffix: &str) -> (String, String) {
        let what = match self.cut.take() {
            Some(cut) => self.take_over(&cut).unwrap_or_else(|e| {
                format!("master :{} killed, replica :{}: {e}", cut.master, cut.replica)
            }),
            None => "no failover: the replica was never cut off".into(),
        };
        (what, self.url(suffix))
    }
}

impl Failing {
    /// Kills the cut-off replica's master, resumes the replica and promotes it; what it holds
    /// of the key once it masters the slot.
    fn take_over(&mut self, cut: &Cut) -> Result<String, String> {
        self.cluster.kill_node(cut.master)?;
        self.killed = Some(cut.master);
        self.cluster.resume(cut.replica)?;
        let start = Instant::now();
        let said = cli(cut.replica, &["CLUSTER", "FAILOVER", "TAKEOVER"]);
        if said != "OK" {
            return Err(format!("CLUSTER FAILOVER TAKEOVER said {said:?}"));
        }
        let new = self.cluster.wait_promoted(&cut.lease, cut.master, Duration::from_secs(30))?;
        let took = start.elapsed().as_millis();
        let read = read_keys(new, "0", &[&cut.lease, &cut.fence], Duration::from_secs(10));
        Ok(format!(
            "replica :{} of the key's master :{} frozen and cut off just before the holder's \
             grant; the master killed (-9), the replica resumed and promoted (CLUSTER FAILOVER \
             TAKEOVER; :{new} masters the slot {took} ms later); {}",
            cut.replica,
            cut.master,
            promoted_read(read, &cut.fence_at_cut)
        ))
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
