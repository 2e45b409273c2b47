//! Fencing for HTTP services: a tower [`Layer`] that admits a request only under the newest
//! grant of the lock that guards the service's resource.
//!
//! Clients send the grant with every effectful request (see [`request_headers`]):
//!
//! ```text
//! Fencing-Token: 1042
//! Fencing-Key: report:2026-11
//! Fencing-Owner: 6f1c…e2 (32 hex digits)
//! ```
//!
//! The layer follows the fence protocol of [`crate::fence`]: a token for another lock key is
//! refused (a token is bound to its key); a token lower than the newest one seen is refused; the
//! same token from another owner is refused; a higher token is installed, after the requests
//! still running under the older one have finished, so effects of two holders never overlap
//! inside the service. Refusals are `409 Conflict` with a body that says why; a request without
//! the headers gets `428 Precondition Required`, malformed ones `400 Bad Request`.
//!
//! The state lives in the [`FenceGuard`], i.e. in this process. A service with several
//! replicas needs the check where the effect lands (a fence table in the shared database,
//! [`crate::fence::postgres`] and friends); this layer then still gives every replica the early,
//! explicit refusal.
//!
//! ```
//! # use leasehold::fence::http::{FenceGuard, FenceLayer};
//! let guard = FenceGuard::new(leasehold::Key::new("report:2026-11").unwrap());
//! let layer = FenceLayer::new(guard.clone());
//! // axum: Router::new().route("/report", put(handler)).layer(layer)
//! # let _ = layer;
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode};
use tower_layer::Layer;
use tower_service::Service;

use super::Fencing;
use crate::{FenceToken, Key, OwnerToken};

pub use http;

/// `Fencing-Token`: the grant's fence.
pub const TOKEN: HeaderName = HeaderName::from_static("fencing-token");
/// `Fencing-Key`: the lock key the token belongs to.
pub const KEY: HeaderName = HeaderName::from_static("fencing-key");
/// `Fencing-Owner`: the grant's owner token.
pub const OWNER: HeaderName = HeaderName::from_static("fencing-owner");

/// The three headers that carry `fencing`, for a client to add to its requests. Keys that are
/// not valid header values (control characters) are percent-encoded byte by byte.
pub fn request_headers(fencing: &Fencing) -> [(HeaderName, HeaderValue); 3] {
    let num =
        |v: String| HeaderValue::from_str(&v).expect("digits and hex are valid header values");
    [
        (TOKEN, num(fencing.token().get().to_string())),
        (KEY, num(encode_key(fencing.key().as_str()))),
        (OWNER, num(fencing.owner().to_string())),
    ]
}

fn encode_key(k: &str) -> String {
    let mut out = String::with_capacity(k.len());
    for b in k.bytes() {
        if (0x21..0x7f).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn decode_key(v: &str) -> Option<String> {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let h = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(h, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Why a request was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No fencing headers (428).
    Missing(&'static str),
    /// Headers present but unreadable (400).
    Malformed(String),
    /// A token of another lock key, an older token, or the installed token from another owner
    /// (409).
    Stale(String),
}

impl Refusal {
    /// The HTTP status this refusal is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::Missing(_) => StatusCode::PRECONDITION_REQUIRED,
            Refusal::Malformed(_) => StatusCode::BAD_REQUEST,
            Refusal::Stale(_) => StatusCode::CONFLICT,
        }
    }

    /// The response body: one line that says why.
    pub fn message(&self) -> String {
        match self {
            Refusal::Missing(h) => {
                format!("fencing required: send the {h} header (and Fencing-Key, Fencing-Owner)\n")
            }
            Refusal::Malformed(m) => format!("malformed fencing headers: {m}\n"),
            Refusal::Stale(m) => format!("stale or foreign fence: {m}\n"),
        }
    }
}

/// Reads the fencing headers of a request.
pub fn read_headers(h: &HeaderMap) -> Result<Fencing, Refusal> {
    let get = |name: &HeaderName, label: &'static str| -> Result<&str, Refusal> {
        h.get(name)
            .ok_or(Refusal::Missing(label))?
            .to_str()
            .map_err(|_| Refusal::Malformed(format!("{label} is not ASCII")))
    };
    let token = get(&TOKEN, "Fencing-Token")?;
    let token: u64 = token.trim().parse().map_err(|_| {
        Refusal::Malformed(format!("Fencing-Token {token:?} is not an unsigned integer"))
    })?;
    let key = get(&KEY, "Fencing-Key")?;
    let key = decode_key(key.trim())
        .and_then(|k| Key::new(k).ok())
        .ok_or_else(|| Refusal::Malformed(format!("Fencing-Key {key:?} is not a valid key")))?;
    let owner: OwnerToken = get(&OWNER, "Fencing-Owner")?
        .trim()
        .parse()
        .map_err(|e: crate::Error| Refusal::Malformed(e.to_string()))?;
    Ok(Fencing::new(key, FenceToken::new(token), owner))
}

#[derive(Debug, Default)]
struct Installed {
    token: u64,
    owner: Option<OwnerToken>,
}

/// The newest grant a resource has seen, and the gate that keeps effects of an older grant
/// from overlapping with a newer one. Clone it to share it between layers and handlers.
#[derive(Debug, Clone)]
pub struct FenceGuard {
    key: Key,
    installed: Arc<Mutex<Installed>>,
    /// Requests hold it shared while they run; installing a newer token takes it exclusively.
    gate: Arc<tokio::sync::RwLock<()>>,
}

/// Admission to the resource: while it lives, no newer grant can be installed.
#[derive(Debug)]
pub struct Admitted {
    _gate: tokio::sync::OwnedRwLockReadGuard<()>,
    /// The grant the request was admitted under.
    pub fencing: Fencing,
}

impl FenceGuard {
    /// A guard for a resource protected by the lock `key`, with nothing installed yet.
    pub fn new(key: Key) -> Self {
        FenceGuard { key, installed: Arc::default(), gate: Arc::new(tokio::sync::RwLock::new(())) }
    }

    /// The lock key this resource is guarded by.
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// The newest installed fence (0 before any).
    pub fn installed(&self) -> FenceToken {
        FenceToken::new(self.lock().token)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Installed> {
        self.installed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `Ok(true)`: `f` is the installed grant; `Ok(false)`: newer, must be installed first.
    fn judge(&self, f: &Fencing) -> Result<bool, Refusal> {
        if f.key() != &self.key {
            return Err(Refusal::Stale(format!(
                "the token belongs to lock key {:?}; this resource is guarded by {:?}",
                f.key().as_str(),
                self.key.as_str()
            )));
        }
        let t = f.token().get();
        if t == 0 {
            return Err(Refusal::Stale("fence 0: the grant's store issues no fences".into()));
        }
        let cur = self.lock();
        match t.cmp(&cur.token) {
            std::cmp::Ordering::Less => Err(Refusal::Stale(format!(
                "fence {t} is older than the installed fence {}",
                cur.token
            ))),
            std::cmp::Ordering::Equal if cur.owner != Some(f.owner()) => {
                Err(Refusal::Stale(format!("fence {t} is installed by another owner")))
            }
            std::cmp::Ordering::Equal => Ok(true),
            std::cmp::Ordering::Greater => Ok(false),
        }
    }

    /// Admits `f`, installing it first if it is newer (waiting for requests admitted under
    /// the older grant to finish). Refuses stale and foreign grants.
    pub async fn admit(&self, f: Fencing) -> Result<Admitted, Refusal> {
        if !self.judge(&f)? {
            let _w = self.gate.write().await;
            // Decide again: another request may have installed something meanwhile.
            if !self.judge(&f)? {
                let mut cur = self.lock();
                cur.token = f.token().get();
                cur.owner = Some(f.owner());
            }
        }
        let gate = self.gate.clone().read_owned().await;
        // A newer grant may have been installed between the check and the gate.
        self.judge(&f)?;
        Ok(Admitted { _gate: gate, fencing: f })
    }
}

/// A tower layer that admits requests through a [`FenceGuard`].
#[derive(Debug, Clone)]
pub struct FenceLayer {
    guard: FenceGuard,
}

impl FenceLayer {
    /// Guards the wrapped service with `guard`.
    pub fn new(guard: FenceGuard) -> Self {
        FenceLayer { guard }
    }
}

impl<S> Layer<S> for FenceLayer {
    type Service = Fenced<S>;
    fn layer(&self, inner: S) -> Fenced<S> {
        Fenced { inner, guard: self.guard.clone() }
    }
}

/// The service [`FenceLayer`] makes: answers refusals itself, runs admitted requests with the
/// [`Fencing`] in the request's extensions.
#[derive(Debug, Clone)]
pub struct Fenced<S> {
    inner: S,
    guard: FenceGuard,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Fenced<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    ReqBody: Send + 'static,
    ResBody: From<String> + Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<ReqBody>) -> Self::Future {
        // The clone is not ready; the ready one (self.inner) goes with this request.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let guard = self.guard.clone();
        Box::pin(async move {
            let admitted = match read_headers(req.headers()) {
                Ok(f) => guard.admit(f).await,
                Err(r) => Err(r),
            };
            let admitted = match admitted {
                Ok(a) => a,
                Err(refusal) => {
                    let mut res = Response::new(ResBody::from(refusal.message()));
                    *res.status_mut() = refusal.status();
                    res.headers_mut().insert(
                        http::header::CONTENT_TYPE,
                        HeaderValue::from_static("text/plain; charset=utf-8"),
                    );
                    return Ok(res);
                }
            };
            req.extensions_mut().insert(admitted.fencing.clone());
            let out = inner.call(req).await;
            drop(admitted);
            out
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(key: &str, token: u64, owner: OwnerToken) -> Fencing {
        Fencing::new(Key::new(key).unwrap(), FenceToken::new(token), owner)
    }

    #[tokio::test]
    async fn admits_newest_refuses_stale_foreign_and_other_keys() {
        let g = FenceGuard::new(Key::new("res").unwrap());
        let (a, b) = (OwnerToken::generate().unwrap(), OwnerToken::generate().unwrap());
        drop(g.admit(f("res", 5, a)).await.unwrap());
        drop(g.admit(f("res", 5, a)).await.unwrap()); // idempotent
        assert!(matches!(g.admit(f("res", 5, b)).await, Err(Refusal::Stale(_))));
        assert!(matches!(g.admit(f("res", 4, b)).await, Err(Refusal::Stale(_))));
        let other = g.admit(f("other", 9, b)).await.unwrap_err();
        assert!(other.message().contains("guarded by \"res\""), "{other:?}");
        drop(g.admit(f("res", 6, b)).await.unwrap());
        assert!(matches!(g.admit(f("res", 5, a)).await, Err(Refusal::Stale(_))));
        assert_eq!(g.installed().get(), 6);
    }

    #[tokio::test]
    async fn a_newer_grant_waits_for_requests_of_the_older_one() {
        let g = FenceGuard::new(Key::new("res").unwrap());
        let (a, b) = (OwnerToken::generate().unwrap(), OwnerToken::generate().unwrap());
        let running = g.admit(f("res", 1, a)).await.unwrap();
        let newer = {
            let g = g.clone();
            tokio::spawn(async move { g.admit(f("res", 2, b)).await.map(|_| ()) })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!newer.is_finished(), "installed while an older request was running");
        assert_eq!(g.installed().get(), 1);
        drop(running);
        newer.await.unwrap().unwrap();
        assert_eq!(g.installed().get(), 2);
    }

    #[test]
    fn headers_round_trip_with_odd_keys() {
        let fencing = f("a b%c\u{e9}", 77, OwnerToken::generate().unwrap());
        let mut h = HeaderMap::new();
        for (k, v) in request_headers(&fencing) {
            h.insert(k, v);
        }
        assert_eq!(read_headers(&h).unwrap(), fencing);
        assert!(matches!(read_headers(&HeaderMap::new()), Err(Refusal::Missing(_))));
        h.insert(TOKEN, HeaderValue::from_static("x"));
        assert!(matches!(read_headers(&h), Err(Refusal::Malformed(_))));
    }
}
