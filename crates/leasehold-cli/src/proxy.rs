//! `leasehold fence-proxy`: an HTTP/1.1 reverse proxy that fences an upstream service with
//! `leasehold::fence::http`, for services that cannot check fences themselves.
//!
//! Every request must carry the `Fencing-*` headers. The library's fence layer decides (stale
//! 409, foreign or unconfirmed 403, store unreachable 503, header-less 428, malformed 400);
//! refused requests never reach the upstream. Admitted ones are forwarded (method, path and
//! query, headers but the hop-by-hop ones, streamed body) over a fresh connection, and the
//! admission is held until the upstream's response has been read to its end, so a newer grant
//! is installed only after every exchange under the older one is over.
//!
//! The installed grant lives in this process (`docs/fencing.md`, "The proxy"): one replica per
//! upstream and key.

use crate::exit::{Exit, code};
use crate::opts::{StoreOpt, TimeoutOpt};
use crate::{dur, store};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body as HttpBody, Bytes, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use leasehold::Key;
use leasehold::fence::http::http::{self, HeaderMap, HeaderValue, Request, Response, StatusCode};
use leasehold::fence::http::{Admitted, FenceGuard, FenceLayer, Refusal, read_headers};
use tower_layer::Layer;
use tower_service::Service;

/// Bound on connecting to the upstream; a request whose upstream cannot be reached gets 502.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on reading a request's head from a client.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// `--help` of the command: what it does and what it needs to be correct.
pub(crate) const ABOUT: &str = "\
An HTTP/1.1 reverse proxy that fences UPSTREAM with the lock KEY.

Every request must carry Fencing-Token, Fencing-Key and Fencing-Owner (a `leasehold run`
job has them in LEASEHOLD_FENCE, LEASEHOLD_KEY and LEASEHOLD_OWNER). The headers are a
claim: a fence newer than the installed one is confirmed with the store (one round trip per
new grant) before it is installed, and installed only after the requests running under the
older grant have finished, so two holders' effects never interleave upstream. Refused and
not forwarded: an older fence, or the installed one from another owner (409); another key,
fence 0, or a grant the store does not confirm (403); the store unreachable (503); no
headers (428); malformed headers (400). One line on stderr per refusal, with the reason.
Admitted requests are forwarded with method, path, query, headers and body; the upstream's
answer comes back as it is.

Correct only if:
  - every writer reaches the upstream through this proxy (no other route, no other port);
  - one proxy per upstream and key: the installed fence lives in this process, so a second
    replica would admit an older holder after this one admitted a newer one. For several
    replicas, check the fence where the effect lands (a fence table, leasehold::fence);
  - holders lock on the store given with --store (the same default as `run`).
A restart forgets the installed fence; the store then confirms the next claim, and an older
holder whose grant has ended can no longer be confirmed.";

/// The upstream, as given by `--upstream http://HOST:PORT`.
#[derive(Debug)]
struct Upstream {
    /// `HOST:PORT`, for connecting and for requests without a Host header.
    authority: String,
}

fn parse_upstream(s: &str) -> Result<Upstream, String> {
    let bad = |why: &str| format!("--upstream {s:?}: {why} (expected http://HOST:PORT)");
    let uri: http::Uri = s.parse().map_err(|_| bad("not a URL"))?;
    if uri.scheme_str() != Some("http") {
        return Err(bad("only plain http:// upstreams are supported"));
    }
    let auth = uri.authority().ok_or_else(|| bad("no host"))?;
    if auth.as_str().contains('@') {
        return Err(bad("credentials in the URL are not supported"));
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(bad("a path or query is not supported; requests keep their own"));
    }
    let port = auth.port_u16().unwrap_or(80);
    Ok(Upstream { authority: format!("{}:{port}", auth.host()) })
}

/// A response body: a refusal's text, or the upstream's body holding the admission.
pub(crate) enum Body {
    Text(Option<Bytes>),
    Upstream { body: Incoming, hold: Option<Admitted> },
}

impl From<String> for Body {
    fn from(s: String) -> Self {
        Body::Text(Some(Bytes::from(s)))
    }
}

impl HttpBody for Body {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.get_mut() {
            Body::Text(t) => Poll::Ready(t.take().map(|b| Ok(Frame::data(b)))),
            Body::Upstream { body, hold } => {
                let polled = Pin::new(body).poll_frame(cx);
                if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
                    // The exchange is over: a newer grant may be installed.
                    *hold = None;
                }
                polled
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Text(t) => t.is_none(),
            Body::Upstream { body, .. } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Text(t) => SizeHint::with_exact(t.as_ref().map_or(0, |b| b.len() as u64)),
            Body::Upstream { body, .. } => body.size_hint(),
        }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The inner service behind the fence layer: forwards an admitted request upstream.
#[derive(Debug, Clone)]
struct Forward {
    upstream: Arc<Upstream>,
}

impl Service<Request<Incoming>> for Forward {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Incoming>) -> Self::Future {
        let upstream = self.upstream.clone();
        Box::pin(async move { Ok(forward(&upstream, req).await) })
    }
}

/// Headers that describe one connection, not the request: never forwarded (RFC 9110 §7.6.1).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn strip_hop_by_hop(h: &mut HeaderMap) {
    let named: Vec<String> = h
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|n| n.trim().to_ascii_lowercase()))
        .filter(|n| !n.is_empty())
        .collect();
    for n in HOP_BY_HOP.iter().copied().chain(named.iter().map(String::as_str)) {
        h.remove(n);
    }
}

fn text(status: StatusCode, msg: String) -> Response<Body> {
    let mut res = Response::new(Body::from(msg));
    *res.status_mut() = status;
    res.headers_mut()
        .insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    res
}

async fn forward(up: &Upstream, mut req: Request<Incoming>) -> Response<Body> {
    let hold = req.extensions_mut().remove::<Admitted>();
    let (mut parts, body) = req.into_parts();
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    parts.uri = match target.parse() {
        Ok(u) => u,
        Err(_) => return text(StatusCode::BAD_REQUEST, "unreadable request target\n".into()),
    };
    parts.version = http::Version::HTTP_11;
    parts.extensions = Default::default();
    strip_hop_by_hop(&mut parts.headers);
    if !parts.headers.contains_key(http::header::HOST)
        && let Ok(v) = HeaderValue::from_str(&up.authority)
    {
        parts.headers.insert(http::header::HOST, v);
    }
    let method = parts.method.clone();
    let path = parts.uri.path().to_owned();
    match send(up, Request::from_parts(parts, body)).await {
        Ok(res) => {
            let (mut parts, body) = res.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Response::from_parts(parts, Body::Upstream { body, hold })
        }
        Err(e) => {
            eprintln!(
                "leasehold fence-proxy: {method} {path}: 502, upstream {}: {e}",
                up.authority
            );
            text(StatusCode::BAD_GATEWAY, format!("the upstream did not answer: {e}\n"))
        }
    }
}

/// One request over a fresh connection to the upstream.
async fn send(up: &Upstream, req: Request<Incoming>) -> Result<Response<Incoming>, String> {
    let stream =
        tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(&up.authority))
            .await
            .map_err(|_| format!("no connection within {}", dur::human(CONNECT_TIMEOUT)))?
            .map_err(|e| e.to_string())?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    sender.send_request(req).await.map_err(|e| e.to_string())
}

/// What a refusal's log line names: the request and the grant it claimed (never the owner).
fn refusal_line(req: &Request<Incoming>) -> String {
    let claim = match read_headers(req.headers()) {
        Ok(f) => format!(" (key {:?}, fence {})", f.key().as_str(), f.token()),
        Err(_) => String::new(),
    };
    format!("{} {}{claim}", req.method(), req.uri().path())
}

pub(crate) async fn fence_proxy(
    store: StoreOpt,
    TimeoutOpt { timeout }: TimeoutOpt,
    key: String,
    listen: String,
    upstream: String,
) -> Result<Exit, Exit> {
    use tokio::signal::unix::{SignalKind, signal};

    let usage = |m: String| Exit::fail(code::USAGE, m);
    let key = Key::new(key)?;
    let listen: SocketAddr =
        listen.parse().map_err(|_| usage(format!("--listen {listen:?} is not HOST:PORT")))?;
    let upstream = Arc::new(parse_upstream(&upstream).map_err(usage)?);
    let (store, locker) = store::open(&store, timeout).await?;
    let url = store.url;
    let guard = FenceGuard::new(key.clone(), locker.store().clone())?;
    let fenced = FenceLayer::new(guard).layer(Forward { upstream: upstream.clone() });
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| Exit::fail(code::UNAVAILABLE, format!("cannot listen on {listen}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| Exit::fail(code::SOFTWARE, format!("cannot read the bound address: {e}")))?;
    let sig = |k| {
        signal(k)
            .map_err(|e| Exit::fail(code::SOFTWARE, format!("cannot install signal handler: {e}")))
    };
    let (mut int, mut term) = (sig(SignalKind::interrupt())?, sig(SignalKind::terminate())?);
    eprintln!(
        "leasehold fence-proxy: {local} -> http://{} for lock {:?} on {}; every writer must \
         reach the upstream only through this proxy",
        upstream.authority,
        key.as_str(),
        url
    );
    // For scripts (and --listen 127.0.0.1:0): the address actually bound.
    println!("listening={local}");
    use std::io::Write;
    let _ = std::io::stdout().flush();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((s, _)) => s,
                Err(e) => {
                    eprintln!("leasehold fence-proxy: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = int.recv() => break,
            _ = term.recv() => break,
        };
        let fenced = fenced.clone();
        let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
            let mut fenced = fenced.clone();
            async move {
                let line = refusal_line(&req);
                std::future::poll_fn(|cx| fenced.poll_ready(cx)).await?;
                let res = fenced.call(req).await?;
                if let Some(r) = res.extensions().get::<Refusal>() {
                    let why = r.message();
                    eprintln!(
                        "leasehold fence-proxy: refused {line}: {} {}",
                        r.status().as_u16(),
                        why.trim_end()
                    );
                }
                Ok::<_, Infallible>(res)
            }
        });
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
    Ok(Exit::ok(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_are_plain_http_host_port() {
        assert_eq!(parse_upstream("http://127.0.0.1:8080").unwrap().authority, "127.0.0.1:8080");
        assert_eq!(parse_upstream("http://svc/").unwrap().authority, "svc:80");
        for bad in
            ["https://svc", "svc:80", "http://u:p@svc", "http://svc/api", "http://svc/?a", ""]
        {
            assert!(parse_upstream(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hop_by_hop_headers_stay_behind() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("connection", "close, x-secret-hop"),
            ("x-secret-hop", "1"),
            ("transfer-encoding", "chunked"),
            ("fencing-token", "7"),
            ("content-type", "text/plain"),
        ] {
            h.append(http::HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        strip_hop_by_hop(&mut h);
        let mut left: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        left.sort();
        assert_eq!(left, ["content-type", "fencing-token"]);
    }
}
