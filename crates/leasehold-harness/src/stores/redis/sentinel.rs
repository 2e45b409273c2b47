//! A private Sentinel deployment, killed on drop: a primary, a replica and three sentinels
//! (quorum 2, `down-after-milliseconds` 500, `failover-timeout` 2000); the primary killed and
//! the sentinels' promotion awaited, or `SENTINEL FAILOVER` on demand.

use super::server::{caught_up, db_of, lease_names, promoted_read, read_keys};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::failure::{FailingStore, Plan, query};
use crate::spawn::{client_output, free_port, kill9_child, need, until_up};
use crate::stores::redis::server::RedisServer;

/// The service name the sentinels monitor.
pub const SERVICE: &str = "leasehold";

/// One sentinel process (`redis-server CONF --sentinel`).
struct Sentinel {
    port: u16,
    child: Option<Child>,
}

/// A primary, its replica and three sentinels, on free loopback ports.
pub struct SentinelSet {
    /// The primary it started with.
    pub primary: RedisServer,
    /// The replica it started with.
    pub replica: RedisServer,
    sentinels: Vec<Sentinel>,
    dir: tempfile::TempDir,
}

impl SentinelSet {
    /// Starts the primary, the replica (linked), three sentinels, and waits (bounded) until
    /// every sentinel lists the replica in `SENTINEL REPLICAS` and knows the two other
    /// sentinels, so a failover can be authorized and has a replica to promote.
    pub fn start() -> Self {
        let primary = RedisServer::start();
        let replica = RedisServer::start();
        replica.replicate(&primary);
        let dir = tempfile::tempdir().expect("temp dir");
        let mut set = SentinelSet { primary, replica, sentinels: Vec::new(), dir };
        for i in 0..3 {
            let mut started = false;
            for _ in 0..5 {
                if set.spawn_sentinel(i, free_port()) {
                    started = true;
                    break;
                }
            }
            assert!(started, "could not start sentinel {} on a free port", i + 1);
        }
        set.wait_discovered(Duration::from_secs(60));
        set
    }

    fn spawn_sentinel(&mut self, i: usize, port: u16) -> bool {
        let conf = self.dir.path().join(format!("sentinel{i}.conf"));
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {}\n\
                 sentinel monitor {SERVICE} 127.0.0.1 {} 2\n\
                 sentinel down-after-milliseconds {SERVICE} 500\n\
                 sentinel failover-timeout {SERVICE} 2000\n\
                 sentinel parallel-syncs {SERVICE} 1\n",
                self.dir.path().display(),
                self.primary.port()
            ),
        )
        .unwrap();
        let child = Command::new(need("redis-server"))
            .arg(&conf)
            .arg("--sentinel")
            .arg("--logfile")
            .arg(self.dir.path().join(format!("sentinel{i}.log")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server --sentinel");
        let mut child = Some(child);
        let up = until_up(&mut child, Duration::from_secs(10), || {
            sentinel_cli(port, &["PING"]) == "PONG"
        });
        if up {
            self.sentinels.push(Sentinel { port, child });
        } else {
            kill9_child(&mut child);
        }
        up
    }

    /// Waits until every sentinel lists the replica (not down) and the two other sentinels.
    fn wait_discovered(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let me = format!("{}", self.replica.port());
        loop {
            let ready = self.sentinels.iter().all(|s| {
                let replicas = sentinel_cli(s.port, &["SENTINEL", "REPLICAS", SERVICE]);
                let others = sentinel_cli(s.port, &["SENTINEL", "SENTINELS", SERVICE]);
                replicas.lines().any(|l| l == me)
                    && !replicas.contains("s_down")
                    && others.lines().filter(|l| *l == "name").count() == 2
            });
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the sentinels never all listed the replica :{me} and each other"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The sentinels' ports.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|s| s.port).collect()
    }

    /// `redis-sentinel://127.0.0.1:S1,…/leasehold` plus `suffix` (e.g. `?db=1`).
    pub fn url(&self, suffix: &str) -> String {
        let hosts: Vec<String> =
            self.sentinel_ports().iter().map(|p| format!("127.0.0.1:{p}")).collect();
        format!("redis-sentinel://{}/{SERVICE}{suffix}", hosts.join(","))
    }

    /// Runs `redis-cli` against sentinel `i` (bounded); stdout, trimmed.
    pub fn sentinel_cli(&self, i: usize, args: &[&str]) -> String {
        sentinel_cli(self.sentinels[i].port, args)
    }

    /// The primary's port as sentinel `i` reports it (`GET-MASTER-ADDR-BY-NAME`).
    pub fn primary_port(&self, i: usize) -> Option<u16> {
        let out =
            sentinel_cli(self.sentinels[i].port, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE]);
        out.lines().nth(1)?.trim().parse().ok()
    }

    /// Kills the primary (-9).
    pub fn kill_primary(&mut self) {
        self.primary.kill9();
    }

    /// Waits (bounded by `limit`) until every sentinel names the replica as the primary and
    /// the replica says `role:master`.
    pub fn wait_promoted(&self, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        let want = self.replica.port();
        loop {
            let named = (0..self.sentinels.len()).all(|i| self.primary_port(i) == Some(want));
            if named && self.replica.cli(&["INFO", "replication"]).contains("role:master") {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("the sentinels did not promote :{want} within {limit:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `SENTINEL FAILOVER` on sentinel 1, asked again while it refuses (a replica just
    /// resumed is still down in its eyes until it answers a ping: no replica fit to promote;
    /// or the sentinels' own failover is under way), until that sentinel names `to` (this
    /// set's primary or replica) and `to` says it is the master (the other sentinels learn of
    /// it later). Bounded by `limit`.
    pub fn force_failover(&self, to: &RedisServer, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        let want = to.port();
        let mut started = false;
        loop {
            let master = to.cli(&["ROLE"]).starts_with("master");
            if master && self.primary_port(0) == Some(want) {
                return Ok(());
            }
            if !started {
                started = self.sentinel_cli(0, &["SENTINEL", "FAILOVER", SERVICE]) == "OK";
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "sentinel 1 did not promote :{want} within {limit:?} (SENTINEL FAILOVER {})",
                    if started { "accepted" } else { "refused throughout" }
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (bounded by `limit`) until `replica` streams from `primary` (the primary lists it
    /// online) and every sentinel lists it as a replica that is not down: what a failover
    /// back to it needs, e.g. after the sentinels demoted an old primary.
    pub fn wait_replica(
        &self,
        replica: &RedisServer,
        primary: &RedisServer,
        limit: Duration,
    ) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        let online = format!("port={},state=online", replica.port());
        let me = replica.port().to_string();
        loop {
            let streams = primary.cli(&["INFO", "replication"]).contains(&online);
            let listed = self.sentinels.iter().all(|s| {
                let r = sentinel_cli(s.port, &["SENTINEL", "REPLICAS", SERVICE]);
                r.lines().any(|l| l == me) && !r.contains("s_down")
            });
            if streams && listed {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    ":{me} was not a replica of :{} in every sentinel's eyes within {limit:?}",
                    primary.port()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `SENTINEL FAILOVER` (no agreement needed), then waits for the promotion of the replica
    /// this set started with (so: once, from the starting roles).
    pub fn failover(&self) -> Result<(), String> {
        let said = self.sentinel_cli(0, &["SENTINEL", "FAILOVER", SERVICE]);
        if said != "OK" {
            return Err(format!("SENTINEL FAILOVER said {said:?}"));
        }
        self.wait_promoted(Duration::from_secs(30))
    }
}

/// The set as a failing store for chaos's `failover` on topology `redis-sentinel`: the
/// replica frozen and cut off just before the holder's grant, the primary killed (-9), the
/// replica resumed and promoted at once (`SENTINEL FAILOVER`), so the holder's grant is lost,
/// as asynchronous replication allows; holder and successor use the same
/// `redis-sentinel://` URL.
pub(super) struct Failing {
    set: SentinelSet,
    /// At the cut: the key's lease and fence-counter names, the database, the primary's
    /// counter.
    cut: Option<(String, String, String, String)>,
}

/// `failover` on a fresh primary, replica and three sentinels.
pub(crate) fn plan() -> Plan {
    Plan {
        start: || Box::new(Failing { set: SentinelSet::start(), cut: None }),
        setup: "a private Sentinel deployment (a primary, a replica, three sentinels: quorum 2, down-after 500 ms), fresh for each trial; an earlier grant replicated (the replica's offset reached the primary's), then, once the holder had connected and just before its grant, the replica was frozen (SIGSTOP) and its replication link closed (CLIENT KILL TYPE replica): the lag asynchronous replication allows, made certain; after the holder's first write the primary was killed (-9), the replica resumed and promoted at once (SENTINEL FAILOVER), and what it held of the key read before any successor; holder and successor use the same redis-sentinel:// URL, which finds the new primary",
    }
}

/// The key chaos holds (`leasehold chaos`'s `KEY`).
const CHAOS_KEY: &str = super::cluster::CHAOS_KEY;

impl FailingStore for Failing {
    fn url(&self, suffix: &str) -> String {
        self.set.url(query(suffix))
    }
    fn kill9(&mut self) {
        self.set.kill_primary();
    }
    fn restart(&mut self) {
        self.set.primary.restart();
    }
    fn replicated(&self) -> bool {
        true
    }
    fn cut_after_connect(&self) -> bool {
        true
    }
    fn cut_replica(&mut self, suffix: &str) -> Result<(), String> {
        let (lease, fence) = lease_names(query(suffix), CHAOS_KEY);
        let db = db_of(query(suffix)).to_owned();
        let p = &self.set.primary;
        caught_up(p.port(), self.set.replica.port(), Duration::from_secs(5))
            .map_err(|e| format!("the replica never applied the warm-up grant: {e}"))?;
        let at_cut = read_keys(p.port(), &db, &[&fence], Duration::from_secs(5))?;
        let at_cut = at_cut.into_iter().flatten().next().ok_or("no fence counter")?;
        p.freeze_and_cut(&self.set.replica)?;
        self.cut = Some((lease, fence, db, at_cut));
        Ok(())
    }
    fn fail_over(&mut self, suffix: &str) -> (String, String) {
        let (primary, replica) = (self.set.primary.port(), self.set.replica.port());
        let what = match self.cut.take() {
            Some((lease, fence, db, at_cut)) => {
                self.set.kill_primary();
                self.set.replica.cont();
                let start = Instant::now();
                match self.set.force_failover(&self.set.replica, Duration::from_secs(30)) {
                    Ok(()) => {
                        let took = start.elapsed().as_millis();
                        let port = self.set.replica.port();
                        let read = read_keys(port, &db, &[&lease, &fence], Duration::from_secs(10));
                        format!(
                            "replica :{replica} frozen and cut off just before the holder's \
                             grant; the primary :{primary} killed (-9), the replica resumed and \
                             promoted (SENTINEL FAILOVER; primary {took} ms later); {}",
                            promoted_read(read, &at_cut)
                        )
                    }
                    Err(e) => format!("primary :{primary} killed, replica :{replica}: {e}"),
                }
            }
            None => "no failover: the replica was never cut off".into(),
        };
        (what, self.url(suffix))
    }
}

/// `redis-cli -p PORT ARGS…`, bounded by 10 s; stdout, trimmed ("" on failure).
fn sentinel_cli(port: u16, args: &[&str]) -> String {
    client_output(
        Command::new(need("timeout"))
            .arg("10")
            .arg(need("redis-cli"))
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(args),
    )
}

impl Drop for SentinelSet {
    fn drop(&mut self) {
        for s in &mut self.sentinels {
            kill9_child(&mut s.child);
        }
    }
}
