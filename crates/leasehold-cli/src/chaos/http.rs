//! `stalled-holder-http`: the stalled-holder scenario with an HTTP service as the resource.
//! The tool starts a small recording upstream on loopback and a `leasehold fence-proxy` in
//! front of it; the fenced arm writes through the proxy (the frozen holder's late request must
//! be refused, 409), the unfenced control straight to the upstream (it must get through).

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::fence::Fencing;
use leasehold::fence::http::request_headers;
use leasehold_harness::resource::Resource;
use leasehold_harness::stores::open_resource;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use super::KEY;

/// Bound on one request to the proxy or the upstream.
const LIMIT: Duration = Duration::from_secs(10);
/// The resource spec's prefix: `http-proxy:PROXY,UPSTREAM`.
const PREFIX: &str = "http-proxy:";

/// The resource a trial writes to: the harness's, or the fenced HTTP service.
pub(super) enum Res {
    Harness(Box<dyn Resource>),
    Http { proxy: SocketAddr, upstream: SocketAddr },
}

/// Opens `spec`: `http-proxy:PROXY,UPSTREAM`, else the harness's resource.
pub(super) async fn open(spec: &str) -> Res {
    if let Some((p, u)) = spec.strip_prefix(PREFIX).and_then(|r| r.split_once(','))
        && let (Ok(proxy), Ok(upstream)) = (p.parse(), u.parse())
    {
        return Res::Http { proxy, upstream };
    }
    Res::Harness(open_resource(spec).await)
}

impl Res {
    /// Claims the resource; over HTTP the first fenced request claims (nothing to do here).
    pub(super) async fn claim(&mut self, f: &Fencing) -> Result<(), String> {
        match self {
            Res::Harness(r) => r.claim(f).await.map_err(|e| e.to_string()),
            Res::Http { .. } => Ok(()),
        }
    }

    /// Writes `value`: fenced through the proxy, unfenced straight to the upstream.
    pub(super) async fn write(&mut self, f: Option<&Fencing>, value: &str) -> Result<(), String> {
        match self {
            Res::Harness(r) => r.write(f, value).await.map_err(|e| e.to_string()),
            Res::Http { proxy, upstream } => {
                let to = if f.is_some() { *proxy } else { *upstream };
                match request(to, "PUT", f, value).await? {
                    (200, _) => Ok(()),
                    (status, body) => Err(format!("HTTP {status}: {body}")),
                }
            }
        }
    }

    /// The value the resource holds now.
    pub(super) async fn read(&mut self) -> Option<String> {
        match self {
            Res::Harness(r) => r.read().await,
            Res::Http { upstream, .. } => match request(*upstream, "GET", None, "").await {
                Ok((200, body)) if !body.is_empty() => Some(body),
                _ => None,
            },
        }
    }
}

/// One HTTP/1.1 request (`connection: close`); the status and the body.
async fn request(
    to: SocketAddr,
    method: &str,
    f: Option<&Fencing>,
    body: &str,
) -> Result<(u16, String), String> {
    let exchange = async {
        let mut s = TcpStream::connect(to).await.map_err(|e| e.to_string())?;
        let mut req = format!(
            "{method} /value HTTP/1.1\r\nhost: {to}\r\nconnection: close\r\ncontent-length: {}\r\n",
            body.len()
        );
        for (k, v) in f.map(request_headers).into_iter().flatten() {
            req.push_str(&format!("{k}: {}\r\n", v.to_str().unwrap_or("")));
        }
        req.push_str("\r\n");
        req.push_str(body);
        s.write_all(req.as_bytes()).await.map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.map_err(|e| e.to_string())?;
        let out = String::from_utf8_lossy(&out);
        let status = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b).trim().to_owned();
        Ok::<_, String>((status, body))
    };
    tokio::time::timeout(LIMIT, exchange)
        .await
        .map_err(|_| format!("no answer from {to} within {LIMIT:?}"))?
}

/// The recording upstream: `PUT` stores the body, `GET` answers the last one stored.
async fn upstream() -> Result<SocketAddr, String> {
    let listener = TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let value: Arc<Mutex<String>> = Arc::default();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            let value = value.clone();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(LIMIT, serve(conn, &value)).await;
            });
        }
    });
    Ok(addr)
}

/// Answers one request on `conn`.
async fn serve(conn: TcpStream, value: &Mutex<String>) -> std::io::Result<()> {
    let mut r = BufReader::new(conn);
    let mut line = String::new();
    r.read_line(&mut line).await?;
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).await? == 0 || h.trim_end().is_empty() {
            break;
        }
        if let Some((name, v)) = h.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().unwrap_or(0).min(1 << 20);
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).await?;
    let answer = {
        let mut v = value.lock().unwrap_or_else(|p| p.into_inner());
        if line.starts_with("PUT ") {
            *v = String::from_utf8_lossy(&body).into_owned();
            "stored".to_owned()
        } else {
            v.clone()
        }
    };
    let res = format!(
        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
        answer.len()
    );
    r.get_mut().write_all(res.as_bytes()).await
}

/// The upstream and a `leasehold fence-proxy` child in front of it; the proxy's stderr (one
/// line per refusal) goes to `out/fence-proxy.log`.
pub(super) struct Setup {
    /// The resource spec for the holder and the successor.
    pub spec: String,
    /// For the report.
    pub description: String,
    _proxy: tokio::process::Child,
    /// Kept open: the proxy's stdout.
    _stdout: BufReader<tokio::process::ChildStdout>,
}

pub(super) async fn start(url: &leasehold::StoreUrl, out: &Path) -> Result<Setup, String> {
    let up = upstream().await?;
    let log_path = out.join("fence-proxy.log");
    let log = std::fs::File::create(&log_path)
        .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = tokio::process::Command::new(exe)
        .args(["fence-proxy", "--key", KEY, "--listen", "127.0.0.1:0"])
        // The URL may hold a password: the environment, never the command line.
        .env(crate::store::ENV_STORE, url.expose())
        .env_remove(crate::store::ENV_STORE_FILE)
        .arg(format!("--upstream=http://{up}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start the fence proxy: {e}"))?;
    let mut stdout = BufReader::new(child.stdout.take().ok_or("the proxy's stdout")?);
    let mut line = String::new();
    let read = tokio::time::timeout(LIMIT, stdout.read_line(&mut line)).await;
    let Some(addr) = line.trim().strip_prefix("listening=").filter(|_| matches!(read, Ok(Ok(_))))
    else {
        let _ = child.start_kill();
        let said = std::fs::read_to_string(&log_path).unwrap_or_default();
        return Err(format!("the fence proxy did not start: {}", said.trim()));
    };
    let proxy: SocketAddr = addr.parse().map_err(|_| format!("the proxy said {line:?}"))?;
    Ok(Setup {
        spec: format!("{PREFIX}{proxy},{up}"),
        description: format!(
            "HTTP upstream {up} (recording, tool-started) behind leasehold fence-proxy {proxy} \
             on the same store; fenced arm through the proxy, unfenced arm straight to the \
             upstream; refusals in {}",
            log_path.display()
        ),
        _proxy: child,
        _stdout: stdout,
    })
}
