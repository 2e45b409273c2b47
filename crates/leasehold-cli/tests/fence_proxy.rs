//! `leasehold fence-proxy` in front of a tiny recording upstream, on the default SQLite store
//! in a temp dir: holders of `leasehold run` jobs get through with their exported grant;
//! forged, stale and header-less requests are refused and never forwarded.

mod common;

use common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(10);

/// What the upstream received: one `METHOD TARGET fencing-token BODY` line per request.
type Seen = Arc<Mutex<Vec<String>>>;

/// An HTTP/1.1 upstream on loopback that records each request and answers `upstream saw N`.
fn upstream() -> (SocketAddr, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let rec = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let rec = rec.clone();
            std::thread::spawn(move || serve(conn, &rec));
        }
    });
    (addr, seen)
}

fn serve(conn: TcpStream, rec: &Seen) {
    conn.set_read_timeout(Some(LIMIT)).unwrap();
    let mut r = BufReader::new(conn.try_clone().unwrap());
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let (mut len, mut token) = (0usize, String::from("-"));
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (name, value) = h.split_once(':').unwrap();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => len = value.trim().parse().unwrap(),
                "fencing-token" => token = value.trim().to_string(),
                _ => {}
            }
        }
        let mut body = vec![0; len];
        r.read_exact(&mut body).unwrap();
        let target = line.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
        let mut seen = rec.lock().unwrap();
        seen.push(format!("{target} {token} {}", String::from_utf8_lossy(&body)));
        let answer = format!("upstream saw {}", seen.len());
        drop(seen);
        let mut w = &conn;
        let res = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{answer}", answer.len());
        if w.write_all(res.as_bytes()).is_err() {
            return;
        }
    }
}

/// The proxy, its address (read from its `listening=` line).
struct Proxy {
    child: Option<Child>,
    addr: SocketAddr,
}

impl Proxy {
    /// Stops it (SIGTERM, a clean exit); its stderr.
    fn stop(mut self) -> String {
        let child = self.child.take().unwrap();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let o = wait_child(child, LIMIT);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        stderr(&o)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn proxy(e: &Env, up: SocketAddr) -> Proxy {
    let upstream = format!("http://{up}");
    let mut child = e
        .cmd()
        .args(["fence-proxy", "--key", "job", "--listen", "127.0.0.1:0", "--upstream", &upstream])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("listening=").unwrap_or_else(|| panic!("{line:?}"));
    Proxy { addr: addr.parse().unwrap(), child: Some(child) }
}

/// One PUT with `headers`; the status and the body of the answer.
fn put(addr: SocketAddr, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    let mut req = format!(
        "PUT /doc?v=1 HTTP/1.1\r\nhost: svc\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b).trim().to_string();
    (status, body)
}

/// A `leasehold run` job that writes its grant to `NAME.env` and holds until `NAME.stop`.
fn job(e: &Env, name: &str, wait: &str) -> (Child, [String; 3]) {
    let script = format!(
        "printf '%s %s %s' \"$LEASEHOLD_FENCE\" \"$LEASEHOLD_KEY\" \"$LEASEHOLD_OWNER\" > {name}.tmp \
         && mv {name}.tmp {name}.env; while [ ! -e {name}.stop ]; do sleep 0.02; done"
    );
    // No --store: the proxy and the jobs share the default store under $XDG_STATE_HOME.
    let child = e
        .cmd()
        .args(["run", "--wait", wait, "job", "--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&e.path(&format!("{name}.env")));
    let text = std::fs::read_to_string(e.path(&format!("{name}.env"))).unwrap();
    let v: Vec<String> = text.split(' ').map(str::to_string).collect();
    (child, [v[0].clone(), v[1].clone(), v[2].clone()])
}

fn headers(g: &[String; 3]) -> [(&str, &str); 3] {
    [("fencing-token", &g[0]), ("fencing-key", &g[1]), ("fencing-owner", &g[2])]
}

fn finish(e: &Env, name: &str, child: Child) {
    std::fs::write(e.path(&format!("{name}.stop")), "").unwrap();
    let o = wait_child(child, Duration::from_secs(30));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

#[test]
fn the_proxy_admits_holders_and_refuses_forged_stale_and_bare_requests() {
    let e = Env::new();
    let (up, seen) = upstream();
    let p = proxy(&e, up);

    let (a, ga) = job(&e, "a", "0");
    assert_eq!(put(p.addr, &headers(&ga), "a1"), (200, "upstream saw 1".into()));

    // The forgery: the right key, the largest token, any owner.
    let forged = [
        ("fencing-token", "18446744073709551615"),
        ("fencing-key", "job"),
        ("fencing-owner", "0123456789abcdef0123456789abcdef"),
    ];
    let (status, body) = put(p.addr, &forged, "forged");
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("not the lock store's current grant"), "{body}");
    assert_eq!(put(p.addr, &headers(&ga), "a2"), (200, "upstream saw 2".into()));

    let (status, body) = put(p.addr, &[], "bare");
    assert_eq!(status, 428, "{body}");

    // A's job ends; B gets the key and claims the upstream; A's late request is stale.
    finish(&e, "a", a);
    let (b, gb) = job(&e, "b", "20s");
    assert_eq!(put(p.addr, &headers(&gb), "b1"), (200, "upstream saw 3".into()));
    let (status, body) = put(p.addr, &headers(&ga), "late a");
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("older than the installed fence"), "{body}");
    finish(&e, "b", b);

    let seen = seen.lock().unwrap().clone();
    let want: Vec<String> = [(&ga, "a1"), (&ga, "a2"), (&gb, "b1")]
        .iter()
        .map(|(g, body)| format!("PUT /doc?v=1 {} {body}", g[0]))
        .collect();
    assert_eq!(seen, want, "only admitted requests reach the upstream, unchanged");

    // One line per refusal, with the reason; never an owner token.
    let log = p.stop();
    let refused: Vec<&str> = log.lines().filter(|l| l.contains("refused")).collect();
    assert_eq!(refused.len(), 3, "{log}");
    assert!(
        refused[0].contains("PUT /doc (key \"job\", fence 18446744073709551615): 403"),
        "{log}"
    );
    assert!(refused[1].contains("PUT /doc: 428 fencing required"), "{log}");
    assert!(refused[2].contains(&format!("fence {}): 409 stale fence", ga[0])), "{log}");
    for g in [&ga, &gb] {
        assert!(!log.contains(&g[2]), "an owner token in the log: {log}");
    }
}

#[test]
fn a_bad_upstream_is_a_usage_error() {
    let e = Env::new();
    let o = e
        .cmd()
        .args(["fence-proxy", "--key", "job", "--listen", "127.0.0.1:0"])
        .args(["--upstream", "https://svc"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 64, "{}", stderr(&o));
    assert!(stderr(&o).contains("only plain http://"), "{}", stderr(&o));
}
