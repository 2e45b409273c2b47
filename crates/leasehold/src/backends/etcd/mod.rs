//! etcd v3 store: `etcd://[USER:PASS@]HOST:PORT[,HOST:PORT…][/PREFIX][?ttl=10s]`.
//!
//! Layout and ordering are those of etcd's own `clientv3/concurrency.Mutex`, so a leasehold
//! holder, `etcdctl lock NAME` and any Go service using that package exclude each other:
//!
//! - the lock named `PREFIX/KEY` (or just `KEY` when the URL ends in a bare `/`) is the set of
//!   keys under `PREFIX/KEY/`; each contender puts one key there, bound to its etcd lease;
//! - the holder is the key with the lowest create revision; a waiter watches only the key
//!   created just before its own (no herd) and holds the lock when no earlier key remains;
//! - leasehold's key is `PREFIX/KEY/write/OWNER` (a reader's `PREFIX/KEY/read/OWNER`, the
//!   layout of etcd's `recipes.RWMutex`, `rw.rs`; OWNER the 32-hex-digit owner token), its value
//!   the owner token, then a line break and who holds it ([`crate::HolderInfo`], when the
//!   locker has it); `etcdctl get --prefix PREFIX/KEY/` lists holders and waiters in order.
//!   A reader waits only for the earlier keys that are not readers'.
//! - slot `i` of a semaphore `SEM` is the lock `PREFIX/SEM#i` (`semaphore.rs`): its grant key
//!   `PREFIX/SEM#i/write/OWNER` adds `slot I of N` to the value, and is put in one transaction
//!   that checks no slot of `SEM` changed since the permit count was read.
//!
//! With the default prefix, `etcdctl lock leasehold/KEY` takes the same lock as `KEY` here.
//! As in etcd's package, lock names are prefixes: a holder of `a/b` is also queued under `a`
//! (over-exclusion, never under-exclusion).
//!
//! One etcd lease (`ttl`, default 10 s, whole seconds, raised by the server to its minimum)
//! is the store's session: every grant and waiting key is bound to it and a background task
//! keeps it alive. The fence is the create revision of the holder's key, which etcd never
//! reuses (it survives leader changes). Release deletes only the caller's own key, compared on
//! its create revision, so a retried stale release can never remove a successor.
//!
//! When a keepalive goes unanswered, [`crate::Lease::admit`] turns false at once; when none
//! is confirmed by `sent + 0.9·TTL` of the last confirmed one (before the server can expire the
//! lease) or the server answers that the lease is gone, `lost()` fires, and the next acquire
//! opens a new session. A contender whose session ends while it waits (its process frozen
//! past the TTL) held nothing: it waits on with a new session, within its deadline
//! (`SessionCore`, shared with ZooKeeper).
//!
//! Errors: a user or password the cluster refuses, a role without permission on the prefix
//! (gRPC `Unauthenticated`, `PermissionDenied`, etcd's "authentication failed") is
//! [`Error::Config`]; a cluster that cannot be reached is [`Error::Unavailable`]. Opening a
//! session (the first request of a connection) answers within the connect limit.

mod probe;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use self::client::Client;
use self::rpc::{
    Compare, CompareResult, KeyValue, RangeRequest, RequestOp, SortOrder, SortTarget, TxnRequest,
    TxnResponse,
};
use super::Limits;
use super::session::{SessionCore, Waited};
use crate::store::{AcquireRequest, Attempt};
use crate::{
    Error, FenceRepeat, FenceToken, Guarantees, Holder, HolderInfo, Key, LockKind, Mode,
    OwnerToken, Result, Store,
};

// leasehold's own etcd v3 client: the store's, and through `tools` the bench's and the
// harness's (some of its RPCs only they call).
#[cfg_attr(not(feature = "tools"), allow(dead_code))]
pub(crate) mod client;
mod config;
/// The fence resource; its public path is `leasehold::fence::etcd`.
#[doc(hidden)]
pub mod fence;
mod queue;
pub(crate) mod rpc;
mod rw;
mod semaphore;
mod session;
#[cfg(feature = "tools")]
pub mod tools;

use self::config::{Config, parse_url};
use self::queue::{PutGuard, delete_if_value, first_kv, header_rev, wait_deleted};
use self::session::Session;

fn etcd_err(what: &str, e: client::Error) -> Error {
    let msg = format!("etcd {what} failed: {e}");
    match &e {
        client::Error::Status(s) if refuses_config(s) => Error::config(msg, Some(Box::new(e))),
        client::Error::Invalid(_) => Error::invalid(msg),
        _ => Error::unavailable(msg, Some(Box::new(e))),
    }
}

/// The cluster refused this client's credentials or role.
fn refuses_config(s: &tonic::Status) -> bool {
    use tonic::Code;
    match s.code() {
        Code::Unauthenticated | Code::PermissionDenied => true,
        // etcd answers a wrong password, and a user given where auth is off, this way.
        Code::InvalidArgument | Code::FailedPrecondition => {
            let m = s.message();
            m.contains("authentication") || m.contains("permission") || m.contains("user name")
        }
        _ => false,
    }
}

/// The value of a lock key: the owner token, then (if any) the holder's info line.
fn lock_value(owner: &OwnerToken, info: Option<&HolderInfo>) -> String {
    match info {
        Some(i) => format!("{owner}\n{}", i.encode()),
        None => owner.to_string(),
    }
}

/// Reads [`lock_value`] back: the owner token and the holder's info, if it is one of ours.
/// A semaphore slot's value has a line `slot I of N` between them (`semaphore.rs`).
fn parse_value(v: &[u8]) -> Option<(OwnerToken, Option<HolderInfo>)> {
    let v = std::str::from_utf8(v).ok()?;
    let (owner, mut rest) = match v.split_once('\n') {
        Some((o, r)) => (o, Some(r)),
        None => (v, None),
    };
    if let Some(r) = rest
        && r.starts_with("slot ")
    {
        rest = r.split_once('\n').map(|(_, info)| info);
    }
    Some((owner.parse().ok()?, rest.and_then(HolderInfo::decode)))
}

fn lock_name_in(prefix: &str, key: &Key) -> String {
    if prefix.is_empty() { key.as_str().to_owned() } else { format!("{prefix}/{}", key.as_str()) }
}

pub(crate) fn lock_key_in(prefix: &str, key: &Key, owner: &OwnerToken) -> String {
    rw::grant_key(prefix, key, owner, Mode::Exclusive)
}

/// Runs `f` again (briefly) while its request could not be sent to any member
/// ([`client::Error::not_sent`]). The channel balances over all endpoints and keeps a dead
/// member in rotation for a while after it dies.
async fn retry<T, Fut>(mut f: impl FnMut() -> Fut) -> client::Result<T>
where
    Fut: std::future::Future<Output = client::Result<T>>,
{
    let mut tries = 0;
    loop {
        match f().await {
            Err(e) if e.not_sent() && tries < 40 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            r => return r,
        }
    }
}

/// A transaction, sent again while no member could be reached.
async fn txn(client: &Client, txn: TxnRequest) -> client::Result<TxnResponse> {
    retry(|| client.txn(txn.clone())).await
}

/// A range read, sent again while no member could be reached.
async fn range(client: &Client, req: RangeRequest) -> client::Result<Vec<KeyValue>> {
    Ok(retry(|| client.range(req.clone())).await?.kvs)
}

/// The etcd store. See the module docs for layout, fences and session semantics.
pub struct EtcdStore {
    client: Client,
    cfg: Config,
    /// The bound on opening a session (its first request may open the connection).
    connect: Duration,
    /// The session, the grants bound to it (by owner: their key and its create revision) and
    /// the abandoned places being undone.
    core: SessionCore<Session, (String, i64)>,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.cfg.endpoints)
            .field("prefix", &self.cfg.prefix)
            .finish()
    }
}

impl EtcdStore {
    /// Connects and opens the store's session within [`crate::DEFAULT_CONNECT_TIMEOUT`].
    /// [`Error::Config`] when the cluster refuses the user, the password or the role.
    pub async fn connect(url: &str) -> Result<EtcdStore> {
        Self::open(&parse_url(url)?, Limits::default()).await
    }

    async fn open(cfg: &Config, limits: Limits) -> Result<EtcdStore> {
        let opts = client::Options {
            user: cfg.user.clone(),
            connect_timeout: Some(limits.connect),
            keep_alive: Some((Duration::from_secs(2), Duration::from_secs(2))),
            // A member cut off from the leader refuses instead of answering from stale state.
            require_leader: true,
        };
        let what = format!("connect to {}", cfg.endpoints.join(","));
        // Another service at the first endpoint (Redis, PostgreSQL, a web server) is named as
        // such instead of surfacing as an h2 error (`backends::peer`).
        let first = cfg.endpoints.first().and_then(|e| super::peer::host_port(e));
        let peer = first.as_ref().map(|(h, p)| (h.as_str(), *p));
        let connect =
            async { Client::connect(&cfg.endpoints, &opts).await.map_err(|e| etcd_err(&what, e)) };
        let opened = async {
            let client =
                crate::limits::within(limits.connect, || format!("etcd {what}"), connect).await?;
            let store = EtcdStore {
                client,
                connect: limits.connect,
                cfg: cfg.clone(),
                core: SessionCore::new("etcd"),
            };
            store.session().await?;
            Ok(store)
        };
        super::peer::guarded("etcd", super::peer::Speaks::Etcd, peer, opened).await
    }

    /// A clone of the client (shares the connection), e.g. for [`crate::fence::etcd`].
    pub(crate) fn client(&self) -> Client {
        self.client.clone()
    }

    /// The name of `key`'s lock, as `etcdctl lock NAME` spells it.
    pub fn lock_name(&self, key: &Key) -> String {
        lock_name_in(&self.cfg.prefix, key)
    }

    /// The etcd key a grant of `key` to `owner` lives in: what
    /// [`crate::fence::etcd`] compares, with the grant's fence as its create revision.
    pub fn lock_key(&self, key: &Key, owner: &OwnerToken) -> String {
        lock_key_in(&self.cfg.prefix, key, owner)
    }

    /// The lock prefix (the URL path; `leasehold` by default).
    pub fn prefix(&self) -> &str {
        &self.cfg.prefix
    }

    /// The current session, opening a new one when the last has ended.
    async fn session(&self) -> Result<Arc<Session>> {
        self.core.session(|| self.open_session()).await
    }

    /// A new session (an etcd lease and its keepalive task), within the connect limit.
    async fn open_session(&self) -> Result<Arc<Session>> {
        let open = Session::open(&self.client, self.cfg.ttl_secs);
        crate::limits::within(self.connect, || "opening an etcd session".into(), open).await
    }

    fn grant(
        &self,
        req: &AcquireRequest<'_>,
        lock_key: String,
        rev: i64,
        session: Arc<Session>,
        sent: Instant,
    ) -> Waited {
        self.core.grant(req, (lock_key, rev), rev, session, sent)
    }

    /// An acquisition through the shared core: a session lost while waiting is replaced.
    async fn acquire_on_sessions(
        &self,
        req: &AcquireRequest<'_>,
        until: Option<Instant>,
    ) -> Result<Attempt> {
        let attempt = |session| self.attempt(req, session, until);
        self.core.acquire(req, until, || self.open_session(), attempt).await
    }
}

impl EtcdStore {
    /// One acquisition: a single conditional put (`until` = None), or a place in the queue and
    /// predecessor watches until `until`.
    async fn attempt(
        &self,
        req: &AcquireRequest<'_>,
        session: Arc<Session>,
        until: Option<Instant>,
    ) -> Result<Waited> {
        if let Some(slot) = &req.slot {
            return semaphore::attempt(self, req, slot, session, until).await;
        }
        let name = self.lock_name(req.key);
        // An abandoned place of ours on this lock is being removed: let it finish first, so
        // its delete cannot meet the key we are about to put (the same owner's key name).
        let settle =
            until.map_or(Duration::from_secs(10), |u| u.saturating_duration_since(Instant::now()));
        self.core.undoing.settled(&name, settle).await;
        let pfx = format!("{name}/");
        let lock_key = rw::grant_key(&self.cfg.prefix, req.key, req.owner, req.mode);
        let value = lock_value(req.owner, req.info);
        let put = RequestOp::put(lock_key.as_str(), value.as_str(), session.id);
        let first = RequestOp::range(RangeRequest {
            limit: 1,
            ..RangeRequest::prefix(pfx.as_str()).sorted(SortTarget::Create, SortOrder::Ascend)
        });
        // What a grant waits for: every key under the lock (exclusive), or every key but the
        // readers' (a reader, as etcd's recipes.RWMutex).
        let blockers = rw::blockers(&pfx, req.mode);
        let txn = match until {
            // Put only if nothing it would wait for is there (a holder or a waiter, ours or
            // etcdctl's or a recipe's).
            None => TxnRequest {
                compare: blockers
                    .iter()
                    .map(|(k, end)| {
                        Compare::create_revision(k.clone(), CompareResult::Equal, 0)
                            .with_range_end(end.clone())
                    })
                    .collect(),
                success: vec![put],
                failure: vec![],
            },
            // Take a place in the queue, as concurrency.Mutex does, and read our key back:
            // its create revision is our place (a put over a key of ours still there from an
            // ended session keeps that key's place).
            Some(_) => TxnRequest {
                compare: vec![],
                success: vec![put, first, RequestOp::range(RangeRequest::key(lock_key.as_str()))],
                failure: vec![],
            },
        };
        let sent = Instant::now();
        let mut guard = PutGuard::spawn(self, txn, &name, &lock_key, req.owner);
        let resp = match guard.outcome().await? {
            Ok(resp) => resp,
            Err(why) => return Ok(Waited::SessionLost(why)),
        };
        let Some(until) = until else {
            guard.disarm();
            if resp.succeeded {
                let rev = header_rev(resp.header.as_ref())?;
                return Ok(self.grant(req, lock_key, rev, session, sent));
            }
            return Ok(Waited::Done(Attempt::Busy { holder_expires_in: None }));
        };
        let rev = match resp.responses.get(2).and_then(first_kv) {
            Some(kv) => kv.create_revision,
            None => header_rev(resp.header.as_ref())?,
        };
        guard.put_at(rev);
        if resp.responses.get(1).and_then(first_kv).is_some_and(|kv| kv.create_revision == rev) {
            let granted = self.grant(req, lock_key, rev, session, sent);
            match granted {
                Waited::Done(_) => guard.disarm(),
                Waited::SessionLost(_) => guard.undo_before_retry().await,
            }
            return Ok(granted);
        }
        // Wait for every blocker created before ours to go, watching only the latest of them.
        let before: Vec<RequestOp> = blockers
            .into_iter()
            .map(|(key, range_end)| {
                RequestOp::range(RangeRequest {
                    key,
                    range_end,
                    max_create_revision: rev - 1,
                    limit: 1,
                    keys_only: true,
                    sort_target: SortTarget::Create as i32,
                    sort_order: SortOrder::Descend as i32,
                    ..Default::default()
                })
            })
            .collect();
        let n = before.len();
        loop {
            if Instant::now() >= until {
                guard.undo_now().await?;
                return Ok(Waited::Done(Attempt::Busy { holder_expires_in: None }));
            }
            let ours = RangeRequest { keys_only: true, ..RangeRequest::key(lock_key.as_str()) };
            let mut success = before.clone();
            success.push(RequestOp::range(ours));
            let look = TxnRequest { compare: vec![], success, failure: vec![] };
            let r = tokio::time::timeout(req.op_timeout, self::txn(&self.client, look))
                .await
                .map_err(|_| {
                    Error::UnknownOutcome(format!(
                        "etcd lookup got no answer within {:?}",
                        req.op_timeout
                    ))
                })?
                .map_err(|e| etcd_err("txn", e))?;
            let ops = &r.responses;
            if ops.get(n).and_then(first_kv).is_none_or(|kv| kv.create_revision != rev) {
                // Our key went with our session's lease (the process was frozen past the TTL):
                // nothing was granted; the core waits on with a new session.
                guard.disarm();
                return Ok(Waited::SessionLost(format!(
                    "our key {lock_key} is gone: etcd session {:x} ended while waiting",
                    session.id
                )));
            }
            let pred = ops[..n.min(ops.len())].iter().filter_map(first_kv);
            let Some(pred) = pred.max_by_key(|kv| kv.create_revision) else {
                // Granted when the last key before ours went; the deadline counts from the
                // request that queued us (the session has been kept alive since). On a session
                // that has ended meanwhile, no grant: our key goes first.
                let granted = self.grant(req, lock_key, rev, session, sent);
                match granted {
                    Waited::Done(_) => guard.disarm(),
                    Waited::SessionLost(_) => guard.undo_before_retry().await,
                }
                return Ok(granted);
            };
            let pred = pred.key.clone();
            let seen = header_rev(r.header.as_ref())?;
            tokio::select! {
                gone = wait_deleted(&self.client, &pred, seen, until) => {
                    if !gone? {
                        continue; // `until` passed: the loop head undoes and answers busy
                    }
                }
                why = session.signals.end("etcd") => {
                    guard.undo_before_retry().await;
                    return Ok(Waited::SessionLost(why));
                }
            }
        }
    }
}

#[async_trait]
impl Store for EtcdStore {
    fn guarantees(&self) -> Guarantees {
        Guarantees {
            backend: "etcd",
            kind: LockKind::Session,
            exclusion: "linearizable (Raft); members cut off from the leader refuse requests \
                        (require-leader), and the queue order is etcd's concurrency.Mutex, shared \
                        with etcdctl lock",
            store_failure: "survives the loss of a minority of members (leases outlive a \
                            leader change); without a majority no grant is made, keepalives go \
                            unconfirmed, admit() turns false and lost() fires before the \
                            session TTL can end on the server",
            expiry: "the etcd lease of this client's session (its TTL), kept alive in the \
                     background; lost() at sent + 0.9·TTL of the last confirmed keepalive",
            fence: "create revision of the holder's key",
            fence_repeat: FenceRepeat::Never,
            failure_admits_second_holder: false,
            holders_know_fence: true,
            holders_know_info: true,
            waiting: "watch on the predecessor's key only (no herd)",
            primitives: crate::Primitives {
                permits: true,
                shared: true,
                writer_preference: true,
                shared_fence: true,
                note: "readers and writers in the layout of etcd's recipes.RWMutex (a writer \
                       blocks later readers by revision); semaphores as one lock per slot \
                       (KEY#i), the permit count checked over all slots in the grant's \
                       transaction (etcd has no semaphore recipe); several keys",
            },
        }
    }

    async fn try_acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        self.acquire_on_sessions(req, None).await
    }

    async fn acquire(&self, req: &AcquireRequest<'_>, until: Option<Instant>) -> Result<Attempt> {
        // The whole wait (queue place, predecessor watches, the sessions it outlives) answers
        // within `until` + op timeout.
        crate::store::acquire_in_server(req, until, |_| self.acquire_on_sessions(req, until)).await
    }

    async fn renew(&self, key: &Key, owner: &OwnerToken, _ttl: Duration) -> Result<bool> {
        let Some(((lock_key, rev), session)) = self.core.held(key, owner) else {
            return Ok(false);
        };
        if session.ended() {
            return Ok(false);
        }
        let look = RangeRequest { keys_only: true, ..RangeRequest::key(lock_key) };
        let kvs = range(&self.client, look).await.map_err(|e| etcd_err("get", e))?;
        Ok(kvs.first().is_some_and(|kv| kv.create_revision == rev && kv.lease == session.id))
    }

    async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool> {
        let name = self.lock_name(key);
        self.core.undoing.settled(&name, Duration::from_secs(10)).await;
        let Some(h) = self.core.take(key, owner) else {
            // Not granted by this store instance (another process, or an acquire whose outcome
            // was unknown): the key name carries the owner, the value must match it too.
            let o = owner.to_string();
            if delete_if_value(&self.client, &self.lock_key(key, owner), &o).await? {
                return Ok(true);
            }
            let reader = rw::grant_key(&self.cfg.prefix, key, owner, Mode::Shared);
            return delete_if_value(&self.client, &reader, &o).await;
        };
        // Only our own key, and only the grant we were given (its create revision).
        let (lock_key, rev) = h.place;
        let req = TxnRequest {
            compare: vec![Compare::create_revision(lock_key.as_str(), CompareResult::Equal, rev)],
            success: vec![RequestOp::delete(lock_key.as_str())],
            failure: vec![],
        };
        let r = txn(&self.client, req).await.map_err(|e| etcd_err("release", e))?;
        Ok(r.succeeded)
    }

    async fn holders(&self, key: Option<&Key>) -> Result<Vec<Holder>> {
        let range = match key {
            Some(k) => format!("{}/", self.lock_name(k)),
            None if self.cfg.prefix.is_empty() => String::new(),
            None => format!("{}/", self.cfg.prefix),
        };
        let look = if range.is_empty() { RangeRequest::all() } else { RangeRequest::prefix(range) };
        let look = look.sorted(SortTarget::Create, SortOrder::Ascend);
        let kvs = self::range(&self.client, look).await.map_err(|e| etcd_err("get", e))?;
        // The first key (lowest create revision) of each lock name holds it, if exclusive;
        // else every reader's key before the first exclusive one does.
        let mut seen = std::collections::HashSet::new();
        let mut done = std::collections::HashSet::new();
        let mut out = Vec::new();
        let mut foreign = false;
        for kv in &kvs {
            let Ok(k) = std::str::from_utf8(&kv.key) else { continue };
            let Some((name, rest)) = rw::split(k) else { continue };
            let (mode, _) = rw::kind(rest);
            if done.contains(name) {
                continue;
            }
            let first = seen.insert(name.to_owned());
            if mode == Mode::Exclusive {
                done.insert(name.to_owned());
                if !first {
                    continue; // a writer behind the readers that hold
                }
            }
            if let Some(k) = key
                && name != self.lock_name(k)
            {
                continue; // a nested lock name under ours
            }
            let lock = if self.cfg.prefix.is_empty() {
                name
            } else {
                match name.strip_prefix(&format!("{}/", self.cfg.prefix)) {
                    Some(n) => n,
                    None => continue,
                }
            };
            let (Some((owner, info)), Ok(lock)) = (parse_value(&kv.value), Key::new(lock)) else {
                foreign = true; // etcdctl lock or a Go service: no owner token in the value
                continue;
            };
            let fence = Some(FenceToken::from_i64(kv.create_revision));
            out.push(Holder::new(lock, owner, fence, None).with_info(info).with_mode(mode));
        }
        if let Some(k) = key
            && out.is_empty()
            && foreign
        {
            return Err(Error::Busy { key: k.clone() });
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
}

/// `etcd://H1:P1[,H2:P2…][/PREFIX][?ttl=DUR]`.
pub(crate) const STORE: super::Descriptor = super::Descriptor {
    form: "etcd://H1:P1[,H2:P2…][/PREFIX][?ttl=10s]",
    usage: "etcd://H1:P1[,H2:P2…][/PREFIX][?ttl=10s]",
    summary: "etcd v3",
    parse: |url| super::parsed(parse_url(url)),
};

impl super::StoreConfig for Config {
    fn open(&self, limits: Limits) -> super::Boxed<'_, Result<Arc<dyn Store>>> {
        super::opened(EtcdStore::open(self, limits))
    }

    fn probe<'a>(
        &'a self,
        p: &'a mut crate::probe::findings::Probe,
    ) -> super::Boxed<'a, std::result::Result<(), String>> {
        Box::pin(probe::etcd(self, p))
    }

    fn session_timeout(&self) -> Option<Duration> {
        Some(Duration::from_secs(self.ttl_secs.unsigned_abs()))
    }
}
