//! Fencing for HTTP services: a tower [`Layer`] that admits a request only under the newest
//! grant of the lock that guards the service's resource, and only once the lock store has
//! confirmed that grant.
//!
//! Clients send the grant with every effectful request (see [`request_headers`]):
//!
//! ```text
//! Fencing-Token: 1042
//! Fencing-Key: report:2026-11
//! Fencing-Owner: 6f1c…e2 (32 hex digits)
//! ```
//!
//! The headers are a **claim**, not authority: anyone can send a big number. The layer follows
//! the fence protocol of [`crate::fence`] and asks the store before it believes a claim:
//!
//! - a token of another lock key, or fence 0, is refused with `403 Forbidden`;
//! - a token older than the installed one, or the installed token from another owner, is
//!   refused with `409 Conflict`, without asking the store;
//! - the installed grant is admitted without asking the store;
//! - a newer token is confirmed with one [`Store::holders`] round trip: it must be the store's
//!   current exclusive grant of the key (a reader's never is), with that owner and that
//!   fence. Unconfirmed: `403`, nothing installed. The store unreachable or too slow: `503`, nothing installed (fail closed).
//!   Confirmed: installed once the requests still running under the older grant have finished,
//!   so the effects of two holders never overlap inside the service.
//!
//! A request without the headers gets `428 Precondition Required`, malformed ones `400`. Every
//! refusal has a one-line body that says why, and carries its [`Refusal`] in the response's
//! extensions. Verifications are serialized (one store round trip in flight per guard), so a
//! flood of forged claims costs the store one query at a time and never blocks requests
//! under the installed grant.
//!
//! What it takes to be correct (`docs/fencing.md`): every writer reaches the resource only
//! through this layer, and the installed grant lives in the [`FenceGuard`], i.e. in this
//! process. A service with several replicas needs the check where the effect lands (a fence
//! table in the shared database, [`crate::fence::postgres`] and friends); this layer then still
//! gives every replica the early, explicit refusal. A grant that ended in the store after it
//! was installed is still admitted until a successor claims: fencing orders holders, it does
//! not replace the holder's own [`crate::Lease::admit`].
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> leasehold::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let url = format!("sqlite://{}/locks.db", dir.path().display());
//! use leasehold::fence::http::{FenceGuard, FenceLayer};
//! let locker = leasehold::Locker::connect(&url).await?;
//! let key = leasehold::Key::new("report:2026-11")?;
//! let guard = FenceGuard::new(key, locker.store().clone())?;
//! let layer = FenceLayer::new(guard.clone());
//! // axum: Router::new().route("/report", put(handler)).layer(layer)
//! # let _ = layer; Ok(()) }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode};
use tower_layer::Layer;
use tower_service::Service;

use super::{Fencing, rule};
use crate::{Error, FenceRepeat, FenceToken, Key, OwnerToken, Store};

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
#[non_exhaustive]
pub enum Refusal {
    /// No fencing headers (428).
    Missing(&'static str),
    /// Headers present but unreadable (400).
    Malformed(String),
    /// An older token than the installed one, or the installed token from another owner
    /// (409). Decided without asking the store.
    Stale(String),
    /// A token of another lock key, fence 0, or a newer grant the store does not confirm as
    /// its current one (403). Nothing was installed.
    Forbidden(String),
    /// The store could not confirm a newer grant in time (503). Nothing was installed.
    Unavailable(String),
}

impl Refusal {
    /// The HTTP status this refusal is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::Missing(_) => StatusCode::PRECONDITION_REQUIRED,
            Refusal::Malformed(_) => StatusCode::BAD_REQUEST,
            Refusal::Stale(_) => StatusCode::CONFLICT,
            Refusal::Forbidden(_) => StatusCode::FORBIDDEN,
            Refusal::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The response body: one line that says why.
    pub fn message(&self) -> String {
        match self {
            Refusal::Missing(h) => {
                format!("fencing required: send the {h} header (and Fencing-Key, Fencing-Owner)\n")
            }
            Refusal::Malformed(m) => format!("malformed fencing headers: {m}\n"),
            Refusal::Stale(m) => format!("stale fence: {m}\n"),
            Refusal::Forbidden(m) => format!("fence not accepted: {m}\n"),
            Refusal::Unavailable(m) => format!("fence not verified: {m}\n"),
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

/// How a grant compares with the installed one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Judged {
    Installed,
    Newer,
}

/// The newest confirmed grant a resource has seen, and the gate that keeps effects of an
/// older grant from overlapping with a newer one. Clone it to share it between layers and
/// handlers; clones share the installed grant.
#[derive(Debug, Clone)]
pub struct FenceGuard {
    key: Key,
    store: Arc<dyn Store>,
    timeout: Duration,
    installed: Arc<Mutex<Installed>>,
    /// Requests hold it shared while they run; installing a newer token takes it exclusively.
    gate: Arc<tokio::sync::RwLock<()>>,
    /// One verification at a time; holds the last grant the store confirmed.
    confirming: Arc<tokio::sync::Mutex<Option<Fencing>>>,
}

/// Admission to the resource: while it or a clone of it lives, no newer grant can be
/// installed. [`FenceLayer`] puts a clone into the request's extensions: a service whose work
/// outlives its response future (a streamed response body) keeps that clone until it is done,
/// and must drop it then, or newer grants wait for it forever.
#[derive(Debug, Clone)]
pub struct Admitted {
    _gate: Arc<tokio::sync::OwnedRwLockReadGuard<()>>,
    /// The grant the request was admitted under.
    pub fencing: Fencing,
}

impl FenceGuard {
    /// A guard for a resource protected by the lock `key`, with nothing installed yet, that
    /// confirms every newer grant with `store` (the store the holders lock on, e.g.
    /// `locker.store().clone()`) before installing it, each question bounded by
    /// [`crate::DEFAULT_OP_TIMEOUT`].
    ///
    /// [`Error::InvalidInput`] for a store that cannot confirm grants: one that issues no
    /// fences, or whose [`Store::holders`] does not know them (Redlock with an external fence
    /// source; see [`crate::Guarantees::holders_know_fence`]).
    ///
    /// There is deliberately no constructor without a store: the headers come from the
    /// network, and a guard that believed them would let one forged token lock every holder
    /// out. Code that holds the [`crate::Lease`] itself needs no guard: it has
    /// [`crate::Lease::admit`].
    pub fn new(key: Key, store: Arc<dyn Store>) -> crate::Result<Self> {
        let g = store.guarantees();
        if g.fence_repeat == FenceRepeat::NoFence {
            return Err(Error::InvalidInput(format!(
                "the {} store issues no fences (fence 0): an HTTP fence guard cannot verify its \
                 grants; attach a fence source or use a store that issues fences",
                g.backend
            )));
        }
        if !g.holders_know_fence {
            return Err(Error::InvalidInput(format!(
                "the {} store cannot say which fence its current holder has (an external fence \
                 source): an HTTP fence guard could not tell a forged fence from a real one",
                g.backend
            )));
        }
        Ok(FenceGuard {
            key,
            store,
            timeout: crate::DEFAULT_OP_TIMEOUT,
            installed: Arc::default(),
            gate: Arc::new(tokio::sync::RwLock::new(())),
            confirming: Arc::default(),
        })
    }

    /// Bounds each question to the store by `t` instead (at least 1 ms); a store that does
    /// not answer in time is [`Refusal::Unavailable`].
    pub fn with_timeout(mut self, t: Duration) -> Self {
        self.timeout = t.max(Duration::from_millis(1));
        self
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

    /// Compares `f` with the installed grant; refuses other keys, fence 0 and stale grants.
    fn judge(&self, f: &Fencing) -> Result<Judged, Refusal> {
        if f.key() != &self.key {
            return Err(Refusal::Forbidden(format!(
                "the token belongs to lock key {:?}; this resource is guarded by {:?}",
                f.key().as_str(),
                self.key.as_str()
            )));
        }
        let t = f.token().get();
        if t == 0 {
            return Err(Refusal::Forbidden("fence 0: the grant's store issues no fences".into()));
        }
        let cur = self.lock();
        let installed = cur.owner.as_ref().map(|o| (&self.key, cur.token, o));
        let presented = (f.key(), t, &f.owner());
        if rule::may_apply(installed, presented) {
            Ok(Judged::Installed)
        } else if rule::may_claim(installed, presented) {
            Ok(Judged::Newer)
        } else if t < cur.token {
            Err(Refusal::Stale(format!(
                "fence {t} is older than the installed fence {}",
                cur.token
            )))
        } else {
            Err(Refusal::Stale(format!("fence {t} is installed by another owner")))
        }
    }

    /// Asks the store whether `f` is its current grant of the key: one round trip, unless a
    /// verification that ran meanwhile already confirmed or installed it.
    async fn confirm(&self, f: &Fencing) -> Result<(), Refusal> {
        let mut last = self.confirming.lock().await;
        if self.judge(f)? == Judged::Installed || last.as_ref() == Some(f) {
            return Ok(());
        }
        let asked = tokio::time::timeout(self.timeout, self.store.holders(Some(&self.key))).await;
        let holders = match asked {
            Ok(Ok(h)) => h,
            Ok(Err(e)) => {
                tracing::warn!("fence guard of {:?}: the lock store failed: {e}", self.key);
                return Err(Refusal::Unavailable(format!(
                    "the lock store could not be asked whether fence {} is the current grant",
                    f.token()
                )));
            }
            Err(_) => {
                return Err(Refusal::Unavailable(format!(
                    "the lock store did not answer within {:?} whether fence {} is the current \
                     grant",
                    self.timeout,
                    f.token()
                )));
            }
        };
        let current = holders
            .iter()
            // A reader's grant is never a writer's: it is not confirmed.
            .any(|h| {
                &h.key == f.key()
                    && h.owner == f.owner()
                    && h.fence == Some(f.token())
                    && h.mode == crate::Mode::Exclusive
            });
        if !current {
            return Err(Refusal::Forbidden(format!(
                "fence {} with that owner is not the lock store's current grant of {:?}",
                f.token(),
                self.key.as_str()
            )));
        }
        *last = Some(f.clone());
        Ok(())
    }

    /// Admits `f`. The installed grant is admitted at once; a newer one is confirmed with the
    /// store, then installed once requests admitted under the older grant have finished.
    /// Refuses other keys, stale grants, unconfirmed grants, and (fail closed) grants the
    /// store could not be asked about.
    pub async fn admit(&self, f: Fencing) -> Result<Admitted, Refusal> {
        if self.judge(&f)? == Judged::Newer {
            self.confirm(&f).await?;
            let _w = self.gate.write().await;
            // Decide again: another request may have installed something meanwhile.
            if self.judge(&f)? == Judged::Newer {
                let mut cur = self.lock();
                cur.token = f.token().get();
                cur.owner = Some(f.owner());
            }
        }
        let gate = self.gate.clone().read_owned().await;
        // A newer grant may have been installed between the check and the gate.
        match self.judge(&f)? {
            Judged::Installed => Ok(Admitted { _gate: Arc::new(gate), fencing: f }),
            Judged::Newer => Err(Refusal::Stale(format!("fence {} was not installed", f.token()))),
        }
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
                    res.extensions_mut().insert(refusal);
                    return Ok(res);
                }
            };
            req.extensions_mut().insert(admitted.fencing.clone());
            req.extensions_mut().insert(admitted.clone());
            let out = inner.call(req).await;
            drop(admitted);
            out
        })
    }
}

#[cfg(test)]
mod tests;
