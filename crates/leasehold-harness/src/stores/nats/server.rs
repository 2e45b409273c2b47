//! Private `nats-server`s with JetStream (one server, or a 3-node JetStream cluster), their
//! stores in a temp dir, killed on drop: stopped, killed and restarted on the same ports and
//! stores by the tests that fail them.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::spawn::{free_port, kill9_child, on_free_port, respawn, sbin, until_up};

/// A private `nats-server -js` on a free loopback port.
pub struct NatsServer {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl NatsServer {
    /// Starts one, JetStream on, its store (file-backed streams) in a fresh temp dir.
    pub fn start() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut s = NatsServer { port: 0, dir, child: None };
        on_free_port(10, "nats-server", |port| {
            s.port = port;
            s.spawn()
        });
        s
    }

    fn spawn(&mut self) -> bool {
        let store = self.dir.path().join("jetstream");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("nats.log"))
            .expect("nats log");
        let name = unique_name(self.dir.path(), "lh");
        let child = Command::new(sbin("nats-server"))
            .args(["-a", "127.0.0.1", "-p", &self.port.to_string(), "-js", "-n", &name])
            .arg("-sd")
            .arg(&store)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn nats-server");
        let mut child = Some(child);
        let port = self.port;
        let up = until_up(&mut child, Duration::from_secs(10), || jetstream_up(port, &name));
        self.child = child;
        if !up {
            kill9_child(&mut self.child);
        }
        up
    }

    /// `nats://127.0.0.1:PORT` plus `suffix` (e.g. `/bucket?storage=memory`).
    pub fn url(&self, suffix: &str) -> String {
        format!("nats://127.0.0.1:{}{suffix}", self.port)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `kill -9`: the server dies with whatever it had not written to its store.
    pub fn kill9(&mut self) {
        kill9_child(&mut self.child);
    }

    /// Starts it again on the same port and store (after [`NatsServer::kill9`]).
    pub fn restart(&mut self) {
        kill9_child(&mut self.child);
        respawn(Duration::from_secs(20), "nats-server", || self.spawn());
    }

    /// Kills it, removes its JetStream store (every stream and bucket, so every sequence
    /// starts again at 1) and starts it again on the same port.
    pub fn restart_empty(&mut self) {
        kill9_child(&mut self.child);
        let _ = std::fs::remove_dir_all(self.dir.path().join("jetstream"));
        respawn(Duration::from_secs(20), "nats-server", || self.spawn());
    }

    /// JetStream's JSON answer to the API request `subject` with the JSON `body` (empty for
    /// none), e.g. `$JS.API.STREAM.INFO.KV_leasehold`; `None` when it does not answer
    /// within 2 s. For tests that look at or make streams beside the store.
    pub fn js_api(&self, subject: &str, body: &str) -> Option<String> {
        js_request_with(self.port, subject, body)
    }

    /// SIGSTOP: the server holds its connections but answers nothing.
    pub fn stop(&self) {
        self.signal(Signal::SIGSTOP);
    }

    /// SIGCONT after [`NatsServer::stop`].
    pub fn cont(&self) {
        self.signal(Signal::SIGCONT);
    }

    fn signal(&self, sig: Signal) {
        if let Some(c) = &self.child {
            let _ = kill(Pid::from_raw(c.id() as i32), sig);
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        kill9_child(&mut self.child);
    }
}

/// A server name no other test's server has (`TAG-` and the temp dir's name), so that the
/// readiness check knows its own server from another test's that took the port first.
fn unique_name(dir: &std::path::Path, tag: &str) -> String {
    let unique = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    format!("{tag}-{}", unique.trim_start_matches('.'))
}

/// Whether the NATS server named `name` answers on `port` with JetStream on: its `INFO`
/// line says so.
fn jetstream_up(port: u16, name: &str) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let mut buf = [0u8; 4096];
    let n = s.read(&mut buf).unwrap_or(0);
    let info = String::from_utf8_lossy(&buf[..n]);
    let _ = s.write_all(b"QUIT\r\n");
    info.starts_with("INFO")
        && info.contains("\"jetstream\":true")
        && info.contains(&format!("\"server_name\":\"{name}\""))
}

/// One node of a [`NatsCluster`].
struct ClusterNode {
    port: u16,
    route_port: u16,
    child: Option<Child>,
}

/// A private JetStream cluster of `n` `nats-server`s (named `n0-…`, `n1-…`, …) on free
/// loopback ports, routed to each other.
pub struct NatsCluster {
    nodes: Vec<ClusterNode>,
    dir: tempfile::TempDir,
}

impl NatsCluster {
    /// Starts `n` nodes and waits until each answers with JetStream on (the meta leader may be
    /// elected a moment later: a client retries its first bucket).
    pub fn start(n: usize) -> Self {
        for _ in 0..5 {
            let dir = tempfile::tempdir().expect("temp dir");
            let nodes = (0..n)
                .map(|_| ClusterNode { port: free_port(), route_port: free_port(), child: None })
                .collect();
            let mut c = NatsCluster { nodes, dir };
            if (0..n).all(|i| c.spawn(i)) {
                return c;
            }
        }
        panic!("could not start a NATS cluster of {n} on free ports");
    }

    fn spawn(&mut self, i: usize) -> bool {
        let routes: Vec<String> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, m)| format!("nats://127.0.0.1:{}", m.route_port))
            .collect();
        let m = &self.nodes[i];
        let name = unique_name(self.dir.path(), &format!("n{i}"));
        let store = self.dir.path().join(format!("n{i}"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("n{i}.log")))
            .expect("nats log");
        let child = Command::new(sbin("nats-server"))
            .args(["-a", "127.0.0.1", "-p", &m.port.to_string(), "-js", "-n", &name])
            .arg("-sd")
            .arg(&store)
            .args(["--cluster_name", "lh", "--cluster"])
            .arg(format!("nats://127.0.0.1:{}", m.route_port))
            .args(["--routes", &routes.join(",")])
            // Clients know only the URL's servers: a holder reaching each node through a
            // fault proxy must not learn the nodes' own ports and go round the cut.
            .arg("--no_advertise")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn nats-server");
        let mut child = Some(child);
        let port = m.port;
        let up = until_up(&mut child, Duration::from_secs(10), || jetstream_up(port, &name));
        self.nodes[i].child = child;
        up
    }

    /// `nats://127.0.0.1:P0,127.0.0.1:P1,…` plus `suffix` (e.g. `?replicas=3`).
    pub fn url(&self, suffix: &str) -> String {
        let hosts: Vec<String> =
            self.nodes.iter().map(|m| format!("127.0.0.1:{}", m.port)).collect();
        format!("nats://{}{suffix}", hosts.join(","))
    }

    /// `kill -9` of node `i`.
    pub fn kill9(&mut self, i: usize) {
        kill9_child(&mut self.nodes[i].child);
    }

    /// Node `i`'s client port.
    pub fn port(&self, i: usize) -> u16 {
        self.nodes[i].port
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether it has no nodes (never, once started).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The node that leads the JetStream stream `stream` (`KV_BUCKET` for a bucket), as the
    /// running nodes say (`$JS.API.STREAM.INFO`, its `cluster.leader`); `None` when none of
    /// them names a running node (no such stream, or an election under way).
    pub fn stream_leader(&self, stream: &str) -> Option<usize> {
        let running: Vec<usize> = (0..self.nodes.len()).filter(|&i| self.running(i)).collect();
        for &asked in &running {
            let Some(info) =
                js_request(self.nodes[asked].port, &format!("$JS.API.STREAM.INFO.{stream}"))
            else {
                continue;
            };
            let Some(name) = leader_name(&info) else { continue };
            if let Some(&i) = running.iter().find(|&&i| self.name(i) == name) {
                return Some(i);
            }
        }
        None
    }

    /// Waits (bounded by `limit`) until a running node leads `stream` and is not `old`.
    pub fn wait_stream_leader(
        &self,
        stream: &str,
        old: Option<usize>,
        limit: Duration,
    ) -> Option<usize> {
        let deadline = Instant::now() + limit;
        loop {
            match self.stream_leader(stream) {
                Some(l) if Some(l) != old => return Some(l),
                _ if Instant::now() >= deadline => return None,
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// Waits (bounded by `limit`) until every running node answers JetStream's account info
    /// without an error: the meta leader is elected and streams can be created. `false`
    /// after `limit`.
    pub fn wait_jetstream(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            let ready = (0..self.nodes.len()).filter(|&i| self.running(i)).all(|i| {
                js_request(self.nodes[i].port, "$JS.API.INFO")
                    .is_some_and(|a| !a.contains("\"error\""))
            });
            if ready {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits (bounded by `limit`) until the cluster can place a stream on all its nodes: a
    /// throwaway 3-replica memory stream is created (and deleted). Right after the meta
    /// leader is elected it may not yet count every peer, and a bucket with `replicas=3`
    /// would be refused ("no suitable peers for placement"). `false` after `limit`.
    pub fn wait_placement(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let n = self.nodes.len();
        let body = format!(
            "{{\"name\":\"lh_placement\",\"subjects\":[\"lh.placement\"],\"num_replicas\":{n},\
             \"storage\":\"memory\"}}"
        );
        loop {
            let port = self.nodes[0].port;
            let made = js_request_with(port, "$JS.API.STREAM.CREATE.lh_placement", &body)
                .is_some_and(|a| !a.contains("\"error\""));
            if made {
                let _ = js_request(port, "$JS.API.STREAM.DELETE.lh_placement");
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn running(&self, i: usize) -> bool {
        self.nodes[i].child.is_some()
    }

    fn name(&self, i: usize) -> String {
        unique_name(self.dir.path(), &format!("n{i}"))
    }

    /// Starts node `i` again on its ports and store.
    pub fn restart(&mut self, i: usize) {
        kill9_child(&mut self.nodes[i].child);
        respawn(Duration::from_secs(20), "nats-server", || self.spawn(i));
    }
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        for m in &mut self.nodes {
            kill9_child(&mut m.child);
        }
    }
}

/// JetStream's JSON answer to the API request `subject` (an empty body) from the server on
/// `port`, spoken in the plain NATS protocol; `None` when it does not answer within 2 s.
fn js_request(port: u16, subject: &str) -> Option<String> {
    js_request_with(port, subject, "")
}

/// [`js_request`] with the JSON request `body`.
fn js_request_with(port: u16, subject: &str, body: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    let deadline = Instant::now() + Duration::from_secs(2);
    s.set_read_timeout(Some(Duration::from_millis(200))).ok()?;
    let ask = format!(
        "CONNECT {{\"verbose\":false,\"pedantic\":false}}\r\nSUB _INBOX.lh 1\r\n\
         PUB {subject} _INBOX.lh {}\r\n{body}\r\n",
        body.len()
    );
    s.write_all(ask.as_bytes()).ok()?;
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return None,
        }
        let text = String::from_utf8_lossy(&got);
        // `MSG <subject> <sid> <bytes>\r\n<payload>\r\n`
        if let Some(at) = text.find("MSG _INBOX.lh 1 ") {
            let rest = &text[at..];
            let (head, body) = rest.split_once("\r\n")?;
            let len: usize = head.rsplit(' ').next()?.parse().ok()?;
            if body.len() >= len {
                let _ = s.write_all(b"QUIT\r\n");
                return Some(body[..len].to_owned());
            }
        }
    }
    None
}

/// The `cluster.leader` of a `$JS.API.STREAM.INFO` answer.
fn leader_name(info: &str) -> Option<String> {
    let cluster = &info[info.find("\"cluster\":")?..];
    let from = cluster.find("\"leader\":\"")? + "\"leader\":\"".len();
    let to = cluster[from..].find('"')?;
    Some(cluster[from..from + to].to_owned())
}
