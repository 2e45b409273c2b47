//! Private store servers for tests: started on free loopback ports in temp dirs, killed on
//! drop, and only ever signalled by the test that started them. The machine's shared
//! services are never touched.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A free TCP port on 127.0.0.1 (bound and released; the caller retries if it is taken).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0").local_addr().unwrap().port()
}

/// Calls `start` with free ports until it reports a start (a port can be taken between
/// choosing and binding); panics naming `what` after `tries`.
fn on_free_port(tries: usize, what: &str, mut start: impl FnMut(u16) -> bool) {
    if !(0..tries).any(|_| start(free_port())) {
        panic!("could not start {what} on a free port");
    }
}

fn need(bin: &str) -> String {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(bin))
        .find(|p| p.is_file());
    match found {
        Some(p) => p.to_string_lossy().into_owned(),
        None => panic!("{bin} is not installed: run `bash scripts/test`, which installs it"),
    }
}

/// A private `redis-server`, no persistence unless asked.
pub struct RedisServer {
    port: u16,
    dir: tempfile::TempDir,
    extra: Vec<String>,
    tls: bool,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts one without persistence.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts one with extra `redis-server` arguments (e.g. `["--appendonly", "yes"]`).
    pub fn start_with(extra: &[&str]) -> Self {
        Self::start_inner(extra, false)
    }

    /// Starts one that speaks only TLS, with a certificate for 127.0.0.1 signed by a CA made
    /// for it (`ca.crt` in its directory; [`RedisServer::url`] names it with `tls_ca`).
    pub fn start_tls() -> Self {
        Self::start_inner(&[], true)
    }

    fn start_inner(extra: &[&str], tls: bool) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        if tls {
            make_certs(dir.path());
        }
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let mut s = RedisServer { port: 0, dir, extra, tls, child: None };
        on_free_port(10, "redis-server", |port| {
            s.port = port;
            s.spawn()
        });
        s
    }

    fn spawn(&mut self) -> bool {
        let mut cmd = Command::new(need("redis-server"));
        if self.tls {
            let d = self.dir.path();
            cmd.args([
                "--port",
                "0",
                "--tls-port",
                &self.port.to_string(),
                "--tls-auth-clients",
                "no",
            ])
            .arg("--tls-cert-file")
            .arg(d.join("server.crt"))
            .arg("--tls-key-file")
            .arg(d.join("server.key"))
            .arg("--tls-ca-cert-file")
            .arg(d.join("ca.crt"));
        } else {
            cmd.args(["--port", &self.port.to_string()]);
        }
        cmd.args(["--bind", "127.0.0.1", "--protected-mode", "no"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--repl-diskless-sync-delay", "0"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(self.dir.path().join("redis.log"))
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // An early exit means the port was taken, most likely.
        let mut child = Some(cmd.spawn().expect("spawn redis-server"));
        let up = until_up(&mut child, Duration::from_secs(10), || self.ping());
        self.child = child;
        if !up {
            self.kill9();
        }
        up
    }

    fn ping(&self) -> bool {
        if self.tls {
            return self.cli(&["PING"]) == "PONG";
        }
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else { return false };
        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
        let mut buf = [0u8; 64];
        s.write_all(b"PING\r\n").is_ok()
            && s.read(&mut buf).map(|n| buf[..n].starts_with(b"+PONG")).unwrap_or(false)
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT`, or `rediss://127.0.0.1:PORT?tls_ca=…/ca.crt` for TLS.
    pub fn url(&self) -> String {
        if self.tls {
            format!("rediss://127.0.0.1:{}?tls_ca={}", self.port, self.ca().display())
        } else {
            format!("redis://127.0.0.1:{}", self.port)
        }
    }

    /// The CA certificate of a TLS server.
    pub fn ca(&self) -> std::path::PathBuf {
        self.dir.path().join("ca.crt")
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.as_ref().expect("server running").id() as i32)
    }

    /// `kill -9`: the process dies with whatever was not persisted.
    pub fn kill9(&mut self) {
        kill9_child(&mut self.child);
    }

    /// Freezes it (SIGSTOP).
    pub fn stop(&self) {
        kill(self.pid(), Signal::SIGSTOP).expect("SIGSTOP");
    }

    /// Resumes it (SIGCONT).
    pub fn cont(&self) {
        kill(self.pid(), Signal::SIGCONT).expect("SIGCONT");
    }

    /// Kills it and starts it again on the same port and directory.
    pub fn restart(&mut self) {
        self.kill9();
        assert!(self.spawn(), "redis-server did not come back on port {}", self.port);
    }

    /// Runs `redis-cli -p PORT ARGS…` and returns its stdout, trimmed.
    pub fn cli(&self, args: &[&str]) -> String {
        // Bounded: a client that never gets an answer must not hang the test.
        let mut cmd = Command::new(need("timeout"));
        cmd.arg("10").arg(need("redis-cli")).args([
            "-h",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
        ]);
        if self.tls {
            cmd.arg("--tls").arg("--cacert").arg(self.ca());
        }
        let out = cmd.args(args).output().expect("run redis-cli");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Makes this server a replica of `primary` and waits until the link is up.
    pub fn replicate(&self, primary: &RedisServer) {
        self.cli(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()]);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.cli(&["INFO", "replication"]).contains("master_link_status:up") {
            assert!(Instant::now() < deadline, "replica link never came up");
            std::thread::sleep(Duration::from_millis(20));
        }
        // And the primary counts it (its first ACK arrived), so WAIT can see it.
        let me = format!("port={},state=online", self.port);
        while !primary.cli(&["INFO", "replication"]).contains(&me) {
            assert!(Instant::now() < deadline, "the primary never saw the replica online");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Cuts this replica off its primary while keeping it a replica (it points at a free port
    /// where nothing listens), as a partition between them would.
    pub fn detach(&self) {
        self.cli(&["REPLICAOF", "127.0.0.1", &free_port().to_string()]);
    }

    /// Promotes this replica (`REPLICAOF NO ONE`).
    pub fn promote(&self) {
        self.cli(&["REPLICAOF", "NO", "ONE"]);
    }
}

/// A CA and a server certificate for 127.0.0.1 signed by it, made with `openssl`.
fn make_certs(dir: &std::path::Path) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let run = |args: &[&str]| {
        let out = Command::new(need("openssl"))
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run openssl");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    run(&[
        &["req", "-x509", "-new"][..],
        &ec,
        &["-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=leasehold test CA"],
    ]
    .concat());
    run(&[
        &["req", "-new"][..],
        &ec,
        &["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1"],
    ]
    .concat());
    std::fs::write(dir.join("ext"), "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
        .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-days",
        "2",
        "-extfile",
        "ext",
    ]);
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill9();
    }
}

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

/// Waits until `up()` says a just-spawned server answers, or its process exits (`false`, the
/// child slot emptied: a taken port, say), or `limit` passes.
fn until_up(child: &mut Option<Child>, limit: Duration, mut up: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(Some(_)))) {
            *child = None;
            return false;
        }
        if up() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Starts a killed server again on its port and data, retrying while the dead process's
/// leftovers (shared memory, a lingering socket) keep the new one from starting.
fn respawn(limit: Duration, what: &str, mut spawn: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !spawn() {
        assert!(Instant::now() < deadline, "{what} did not come back");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `kill -9` of a server process this test started (resumed first if it was stopped).
fn kill9_child(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGCONT);
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Runs a client command (bounded by `timeout`); its stdout, trimmed, or "" on failure.
fn client_output(cmd: &mut Command) -> String {
    match cmd.stdin(Stdio::null()).output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        _ => String::new(),
    }
}

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
        let mut s = Self::new_dir();
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

/// A server binary: on `PATH`, or in `/usr/sbin` (not on every user's `PATH`).
fn sbin(bin: &str) -> String {
    let p = std::path::Path::new("/usr/sbin").join(bin);
    if p.is_file() { p.to_string_lossy().into_owned() } else { need(bin) }
}

/// The user this process runs as (mariadbd needs `--user` when started by root).
fn whoami() -> String {
    nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map_or_else(|| "root".to_owned(), |u| u.name)
}
