//! A private `redis-server` (plain or TLS), killed on drop.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::failure::{FailingStore, Plan};
use crate::spawn::{free_port, kill9_child, need, on_free_port, until_up};

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
            // `-NOAUTH`: up, with `--requirepass`.
            && s.read(&mut buf)
                .map(|n| buf[..n].starts_with(b"+PONG") || buf[..n].starts_with(b"-NOAUTH"))
                .unwrap_or(false)
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

    /// Waits (bounded by 10 s; panics past it) until `replica` has applied everything this
    /// server had written when called: what `WAIT` from another connection cannot tell.
    pub fn wait_applied_by(&self, replica: &RedisServer) {
        caught_up(self.port, replica.port, Duration::from_secs(10)).expect("replica caught up");
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

    /// Freezes `replica` (SIGSTOP), then closes this primary's replication links (`CLIENT
    /// KILL TYPE replica`): nothing written here from now on reaches it, since the link is
    /// gone before anything more is sent and a frozen replica cannot open another. Resume it
    /// only once this primary is dead, or it reconnects and catches up from the backlog. An
    /// error (the replica resumed) when no link was closed.
    pub fn freeze_and_cut(&self, replica: &RedisServer) -> Result<(), String> {
        replica.stop();
        let said = self.cli(&["CLIENT", "KILL", "TYPE", "replica"]);
        if said.parse::<u32>().is_ok_and(|n| n >= 1) {
            return Ok(());
        }
        replica.cont();
        Err(format!("CLIENT KILL TYPE replica on :{} said {said:?}", self.port))
    }
}

/// Waits (bounded by `limit`) until the replica on port `replica` has applied everything the
/// primary on `primary` had written when this was called: its `slave_repl_offset` reaches the
/// primary's `master_repl_offset`. (`WAIT` cannot tell this from another connection: it
/// waits only for the calling client's own writes, and answers at once for a client that
/// wrote nothing.)
pub(super) fn caught_up(primary: u16, replica: u16, limit: Duration) -> Result<(), String> {
    let offset = |port: u16, field: &str| {
        let out = Command::new(need("timeout"))
            .arg("10")
            .arg(need("redis-cli"))
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "INFO", "replication"])
            .stdin(Stdio::null())
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines().find_map(|l| l.strip_prefix(field)?.trim().parse::<u64>().ok())
    };
    let want = offset(primary, "master_repl_offset:")
        .ok_or_else(|| format!("no master_repl_offset from :{primary}"))?;
    let deadline = Instant::now() + limit;
    loop {
        let got = offset(replica, "slave_repl_offset:");
        if got.is_some_and(|o| o >= want) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the replica :{replica} applied up to {got:?}, not the primary's {want}, within \
                 {limit:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// In what a failover of a replicated Redis form reports, the promoted node had neither the
/// holder's lease nor its fence: the holder's grant was lost with the old primary.
pub const GRANT_LOST: &str = "the holder's grant was lost";

/// The lease and fence-counter names of `key` on a Redis form (`PREFIX{KEY}`,
/// `PREFIX{KEY}:fence`), the prefix from `suffix`'s options.
pub(super) fn lease_names(suffix: &str, key: &str) -> (String, String) {
    let prefix =
        suffix.split(['?', '&']).find_map(|p| p.strip_prefix("prefix=")).unwrap_or("leasehold:");
    let lease = format!("{prefix}{{{key}}}");
    let fence = format!("{lease}:fence");
    (lease, fence)
}

/// The database a `suffix`'s `db=N` option names ("0" without one).
pub(super) fn db_of(suffix: &str) -> &str {
    suffix.split(['?', '&']).find_map(|p| p.strip_prefix("db=")).unwrap_or("0")
}

/// What a promoted node's lease value and fence counter say, against the counter its primary
/// had when the replica was cut off: [`GRANT_LOST`] when there is no lease and the counter is
/// the one from before the cut (the holder's grant, made after it, never arrived).
pub(super) fn promoted_read(read: Result<Vec<Option<String>>, String>, at_cut: &str) -> String {
    match read.as_deref() {
        Ok([None, Some(fence)]) if fence == at_cut => format!(
            "{GRANT_LOST}: the promoted node had no lease on the key and the fence counter it \
             had at the cut ({fence})"
        ),
        Ok(v) => format!(
            "the promoted node had (lease, fence counter) {v:?} (the counter at the cut: \
             {at_cut}): the holder's grant may have reached it"
        ),
        Err(e) => format!("the promoted node could not be read: {e}"),
    }
}

/// `MGET NAMES…` (names of one slot) on the node at `port`, database `db`, asked again while
/// it answers an error (a node just promoted may refuse for a moment), bounded by `limit`:
/// each value, `None` for a missing key.
pub(super) fn read_keys(
    port: u16,
    db: &str,
    names: &[&str],
    limit: Duration,
) -> Result<Vec<Option<String>>, String> {
    let deadline = Instant::now() + limit;
    loop {
        // `--no-raw`: a missing key reads `(nil)`, a value is quoted, an error says so.
        let out = Command::new(need("timeout"))
            .arg("10")
            .arg(need("redis-cli"))
            .args(["--no-raw", "-h", "127.0.0.1", "-p", &port.to_string(), "-n", db, "MGET"])
            .args(names)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("redis-cli: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let values: Result<Vec<Option<String>>, String> = text
            .lines()
            .map(|l| {
                let v = l.split_once(") ").filter(|(n, _)| n.trim().parse::<u32>().is_ok());
                let v = v.map_or(l, |(_, v)| v).trim();
                match v {
                    "(nil)" => Ok(None),
                    _ if v.starts_with('"') && v.ends_with('"') && v.len() >= 2 => {
                        Ok(Some(v[1..v.len() - 1].to_owned()))
                    }
                    _ => Err(v.to_owned()),
                }
            })
            .collect();
        let last = match values {
            Ok(v) if out.status.success() && v.len() == names.len() => return Ok(v),
            Ok(v) => format!("{v:?} ({})", out.status),
            Err(e) => e,
        };
        if Instant::now() > deadline {
            return Err(format!("MGET on :{port} answered {last:?} for {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
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

/// A private Redis for the store-failure scenarios: a primary, and for `failover` a replica.
struct Failing {
    primary: RedisServer,
    replica: Option<RedisServer>,
}

pub(super) fn plan(failover: bool) -> Plan {
    if failover {
        Plan {
            start: || {
                let primary = RedisServer::start();
                let replica = RedisServer::start();
                replica.replicate(&primary);
                Box::new(Failing { primary, replica: Some(replica) })
            },
            setup: "a private Redis primary and replica, fresh for each trial; an earlier grant \
                    replicated, then the replica stopped replicating just before the holder's \
                    grant (the lag asynchronous replication allows), the primary was killed (-9) \
                    and the replica promoted (REPLICAOF NO ONE); the successor uses the promoted \
                    replica, as a Sentinel-routed client would, the holder keeps its connection \
                    to the dead primary",
        }
    } else {
        Plan {
            start: || Box::new(Failing { primary: RedisServer::start(), replica: None }),
            setup: "a private redis-server on a free loopback port, fresh for each trial, without \
                    persistence (--save '' --appendonly no, how most Redis lock stores run); killed \
                    (-9) during the hold and restarted on the same port",
        }
    }
}

impl FailingStore for Failing {
    fn url(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.primary.url())
    }
    fn kill9(&mut self) {
        self.primary.kill9();
    }
    fn restart(&mut self) {
        self.primary.restart();
    }
    fn replicated(&self) -> bool {
        self.replica.is_some()
    }
    fn cut_replica(&mut self, _suffix: &str) -> Result<(), String> {
        let Some(replica) = &self.replica else { return Ok(()) };
        let applied = caught_up(self.primary.port(), replica.port(), Duration::from_secs(5));
        replica.detach();
        applied.map_err(|e| format!("the replica never applied the warm-up grant: {e}"))
    }
    fn fail_over(&mut self, suffix: &str) -> (String, String) {
        let Some(replica) = &self.replica else {
            return ("no failover for this store".into(), self.url(suffix));
        };
        self.primary.kill9();
        replica.promote();
        (
            format!(
                "primary :{} killed, replica :{} promoted",
                self.primary.port(),
                replica.port()
            ),
            format!("{}{suffix}", replica.url()),
        )
    }
}
