//! etcd v3 store: `etcd://[USER:PASS@]HOST:PORT[,HOST:PORT…][/PREFIX][?ttl=10s]`.
//!
//! Layout and ordering are those of etcd's own `clientv3/concurrency.Mutex`, so a leasehold
//! holder, `etcdctl lock NAME` and any Go service using that package exclude each other:
//!
//! - the lock named `PREFIX/KEY` (or just `KEY` when the URL ends in a bare `/`) is the set of
//!   keys under `PREFIX/KEY/`; each contender puts one key there, bound to its etcd lease;
//! - the holder is the key with the lowest create revision; a waiter watches only the key
//!   created just before its own (no herd) and holds the lock when no earlier key remains;
//! - leasehold's key is `PREFIX/KEY/OWNER` (the 32-hex-digit owner token), its value the owner
//!   token; `etcdctl get --prefix PREFIX/KEY/` lists holder and waiters in order.
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
//! opens a new session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, PutOptions, SortOrder,
    SortTarget, Txn, TxnOp, TxnOpResponse, WatchFilterType, WatchOptions,
};
use tokio::sync::watch;

use super::bell::{SessionSignals, Undoing};
use crate::store::{AcquireRequest, Attempt, Holder, Watch};
use crate::{Error, FenceRepeat, FenceToken, Guarantees, Key, LockKind, OwnerToken, Result, Store};

pub use etcd_client;

const DEFAULT_PREFIX: &str = "leasehold";

fn etcd_err(what: &str, e: etcd_client::Error) -> Error {
    Error::unavailable(format!("etcd {what} failed: {e}"), Some(Box::new(e)))
}

fn lock_name_in(prefix: &str, key: &Key) -> String {
    if prefix.is_empty() { key.as_str().to_owned() } else { format!("{prefix}/{}", key.as_str()) }
}

pub(crate) fn lock_key_in(prefix: &str, key: &Key, owner: &OwnerToken) -> String {
    format!("{}/{owner}", lock_name_in(prefix, key))
}

/// Whether a request failed before reaching any member (no connection could be made), so
/// sending it again cannot apply it twice. The client balances over all endpoints and keeps a
/// dead member in rotation for a while after it dies.
fn not_sent(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::GRpcStatus(s) => {
            s.code() == tonic::Code::Unavailable && s.message().contains("connect")
        }
        etcd_client::Error::TransportError(_) => true,
        _ => false,
    }
}

/// Runs `f` again (briefly) while its request could not be sent to any member.
async fn retry<T, Fut>(mut f: impl FnMut() -> Fut) -> std::result::Result<T, etcd_client::Error>
where
    Fut: std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
{
    let mut tries = 0;
    loop {
        match f().await {
            Err(e) if not_sent(&e) && tries < 40 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            r => return r,
        }
    }
}

/// A transaction, sent again while no member could be reached.
async fn txn(
    client: &Client,
    txn: Txn,
) -> std::result::Result<etcd_client::TxnResponse, etcd_client::Error> {
    retry(|| {
        let (mut c, t) = (client.clone(), txn.clone());
        async move { c.txn(t).await }
    })
    .await
}

/// Parsed `etcd://` URL.
#[derive(Debug, Clone)]
struct Config {
    endpoints: Vec<String>,
    user: Option<(String, String)>,
    prefix: String,
    ttl_secs: i64,
}

fn parse_url(url: &str) -> Result<Config> {
    let rest = url
        .strip_prefix("etcd://")
        .ok_or_else(|| Error::invalid(format!("{url:?} is not an etcd:// URL")))?;
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (auth_hosts, prefix) = match rest.split_once('/') {
        Some((h, p)) => (h, p.trim_end_matches('/').to_owned()),
        None => (rest, DEFAULT_PREFIX.to_owned()),
    };
    let (user, hosts) = match auth_hosts.rsplit_once('@') {
        Some((u, h)) => {
            let (name, pass) = u.split_once(':').unwrap_or((u, ""));
            (Some((name.to_owned(), pass.to_owned())), h)
        }
        None => (None, auth_hosts),
    };
    let endpoints: Vec<String> = hosts
        .split(',')
        .filter(|h| !h.is_empty())
        .map(|h| {
            if h.contains(':') {
                Ok(format!("http://{h}"))
            } else {
                Err(Error::invalid(format!("etcd endpoint {h:?} has no port (HOST:PORT)")))
            }
        })
        .collect::<Result<_>>()?;
    if endpoints.is_empty() {
        return Err(Error::invalid(format!("{url:?} names no etcd endpoint (etcd://HOST:PORT)")));
    }
    let mut cfg = Config { endpoints, user, prefix, ttl_secs: 10 };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "ttl" => {
                let secs = v
                    .strip_suffix('s')
                    .and_then(|n| n.parse::<i64>().ok())
                    .filter(|n| (1..=3600).contains(n))
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "ttl={v:?}: give the session TTL in whole seconds, 1s..3600s"
                        ))
                    })?;
                cfg.ttl_secs = secs;
            }
            _ => return Err(Error::invalid(format!("unknown etcd URL option {k:?} (known: ttl)"))),
        }
    }
    Ok(cfg)
}

/// The session's local deadline: the server expires the lease no earlier than `ttl` after it
/// applied the keepalive, itself after `sent`.
fn session_deadline(sent: Instant, ttl_secs: i64) -> Instant {
    sent + Duration::from_secs(ttl_secs.max(1) as u64).mul_f64(0.9)
}

/// One etcd lease kept alive by a background task; every key this store puts is bound to it.
struct Session {
    id: i64,
    signals: SessionSignals,
    task: tokio::task::AbortHandle,
    client: Client,
}

impl Session {
    async fn open(client: &Client, ttl_secs: i64) -> Result<Arc<Session>> {
        let sent = Instant::now();
        let grant = client
            .clone()
            .lease_grant(ttl_secs, None)
            .await
            .map_err(|e| etcd_err("LeaseGrant", e))?;
        let (id, ttl) = (grant.id(), grant.ttl());
        let (live_tx, end_tx, signals) = SessionSignals::new();
        let task = tokio::spawn(keep_alive(
            client.clone(),
            id,
            session_deadline(sent, ttl),
            live_tx,
            end_tx,
        ))
        .abort_handle();
        tracing::debug!(lease = format!("{id:x}"), ttl, "etcd session opened");
        Ok(Arc::new(Session { id, signals, task, client: client.clone() }))
    }

    fn ended(&self) -> bool {
        self.signals.ended()
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Session({:x})", self.id)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.task.abort();
        // Free every key still bound to the lease now rather than at its TTL.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (mut client, id) = (self.client.clone(), self.id);
            rt.spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(5), client.lease_revoke(id)).await;
            });
        }
    }
}

async fn keep_alive(
    client: Client,
    id: i64,
    mut deadline: Instant,
    live: watch::Sender<bool>,
    end: watch::Sender<Option<String>>,
) {
    let mut lease = client.lease_client();
    let mut stream = None;
    let mut last_ok = Instant::now();
    let mut period = deadline.saturating_duration_since(Instant::now()) / 3;
    loop {
        let next = (last_ok + period).min(deadline);
        tokio::time::sleep_until(next.into()).await;
        let sent = Instant::now();
        if sent >= deadline {
            let _ = live.send(false);
            let _ = end.send(Some(format!(
                "no keepalive of etcd lease {id:x} was confirmed before the session's local \
                 deadline (the server may expire it any moment)"
            )));
            return;
        }
        let limit = (deadline - sent).min(period.max(Duration::from_millis(100)));
        let answer = tokio::time::timeout(limit, async {
            if stream.is_none() {
                // Opening the stream sends the first keepalive and reads its answer.
                let (keeper, s) = lease.keep_alive(id).await?;
                stream = Some((keeper, s));
                return Ok::<_, etcd_client::Error>(None);
            }
            let (keeper, s) = stream.as_mut().expect("stream open");
            keeper.keep_alive().await?;
            Ok(s.message().await?.map(|r| r.ttl()))
        })
        .await;
        match answer {
            Ok(Ok(ttl)) => {
                let ttl = match ttl {
                    // Stream just opened: the lease was found alive.
                    None => None,
                    Some(t) if t > 0 => Some(t),
                    Some(_) => {
                        let _ = live.send(false);
                        let _ = end.send(Some(format!(
                            "etcd lease {id:x} expired or was revoked on the server"
                        )));
                        return;
                    }
                };
                let ttl_secs = ttl.unwrap_or((period.as_secs_f64() * 3.0 / 0.9).round() as i64);
                let nd = session_deadline(sent, ttl_secs);
                if nd > deadline {
                    deadline = nd;
                }
                period = (deadline - sent) / 3;
                last_ok = sent;
                live.send_if_modified(|l| !std::mem::replace(l, true));
            }
            Ok(Err(e)) => {
                let gone = matches!(&e, etcd_client::Error::LeaseKeepAliveError(m) if m.contains("not found"));
                if gone {
                    let _ = live.send(false);
                    let _ = end.send(Some(format!("etcd lease {id:x} no longer exists")));
                    return;
                }
                tracing::warn!("etcd keepalive of lease {id:x} failed: {e}");
                stream = None;
                live.send_if_modified(|l| std::mem::replace(l, false));
                // Retry soon, not a third of a TTL later.
                last_ok = Instant::now().checked_sub(period).unwrap_or(last_ok)
                    + Duration::from_millis(100);
            }
            Err(_) => {
                tracing::warn!("etcd keepalive of lease {id:x} got no answer within {limit:?}");
                stream = None;
                live.send_if_modified(|l| std::mem::replace(l, false));
                last_ok = Instant::now().checked_sub(period).unwrap_or(last_ok);
            }
        }
    }
}

#[derive(Debug)]
struct Held {
    key: Key,
    lock_key: String,
    rev: i64,
    session: Arc<Session>,
}

/// The etcd store. See the module docs for layout, fences and session semantics.
pub struct EtcdStore {
    client: Client,
    cfg: Config,
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
    held: Mutex<HashMap<OwnerToken, Held>>,
    undoing: Arc<Undoing>,
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
    /// Connects (lazily: the first request opens the connection and the session).
    pub async fn connect(url: &str) -> Result<EtcdStore> {
        let cfg = parse_url(url)?;
        let mut opts = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2))
            .with_keep_alive_while_idle(true)
            // A member cut off from the leader refuses instead of answering from stale state.
            .with_require_leader(true);
        if let Some((u, p)) = &cfg.user {
            opts = opts.with_user(u.clone(), p.clone());
        }
        let client = Client::connect(&cfg.endpoints, Some(opts))
            .await
            .map_err(|e| etcd_err(&format!("connect to {}", cfg.endpoints.join(",")), e))?;
        let store = EtcdStore {
            client,
            cfg,
            session: tokio::sync::Mutex::new(None),
            held: Mutex::default(),
            undoing: Arc::default(),
        };
        store.session().await?;
        Ok(store)
    }

    /// A clone of the client (shares the connection), e.g. for [`crate::fence::etcd`].
    pub fn client(&self) -> Client {
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
        let mut s = self.session.lock().await;
        if let Some(cur) = s.as_ref()
            && !cur.ended()
        {
            return Ok(cur.clone());
        }
        let new = Session::open(&self.client, self.cfg.ttl_secs).await?;
        *s = Some(new.clone());
        Ok(new)
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<OwnerToken, Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn grant(
        &self,
        req: &AcquireRequest<'_>,
        lock_key: String,
        rev: i64,
        session: Arc<Session>,
        sent: Instant,
    ) -> Attempt {
        let grant = session.signals.grant(FenceToken::new(rev as u64), sent, "etcd");
        self.held().insert(*req.owner, Held { key: req.key.clone(), lock_key, rev, session });
        Attempt::Granted(grant)
    }
}

type PutTask =
    tokio::task::JoinHandle<std::result::Result<etcd_client::TxnResponse, etcd_client::Error>>;

/// The request that may put our key, run in a task of its own (a dropped request may still be
/// applied), and what removes the key if the acquire does not hand out a grant: after the
/// request has settled, an owner-checked delete. Disarmed when the grant is handed out or the
/// key is known absent.
struct PutGuard {
    task: Option<PutTask>,
    armed: Option<(Client, Arc<Undoing>, String, String)>,
}

impl PutGuard {
    fn spawn(store: &EtcdStore, txn: Txn, name: &str, lock_key: &str, owner: &OwnerToken) -> Self {
        let client = store.client.clone();
        let task = tokio::spawn(async move { self::txn(&client, txn).await });
        PutGuard {
            task: Some(task),
            armed: Some((
                store.client.clone(),
                store.undoing.clone(),
                name.to_owned(),
                format!("{lock_key}\0{owner}"),
            )),
        }
    }

    /// The put request's answer.
    async fn outcome(&mut self) -> Result<etcd_client::TxnResponse> {
        let task = self.task.as_mut().expect("awaited once");
        let r = task.await;
        self.task = None;
        match r {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(e)) => Err(etcd_err("txn", e)),
            Err(e) => Err(Error::UnknownOutcome(format!("etcd put task failed: {e}"))),
        }
    }

    /// The key is ours for good (granted) or was never put.
    fn disarm(&mut self) {
        self.armed = None;
    }

    /// Removes the key now, before the caller goes on.
    async fn undo_now(&mut self) -> Result<()> {
        let Some((mut client, undoing, name, ko)) = self.armed.take() else { return Ok(()) };
        let (lock_key, owner) = ko.split_once('\0').expect("joined above");
        let r = delete_if_value(&mut client, lock_key, owner).await;
        if r.is_err() {
            // Put it back so Drop retries in the background.
            self.armed = Some((client, undoing, name, ko));
        }
        r.map(|_| ())
    }
}

impl Drop for PutGuard {
    fn drop(&mut self) {
        let Some((mut client, undoing, name, ko)) = self.armed.take() else { return };
        let task = self.task.take();
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        // A release of this lock waits for the removal, so the key it frees cannot be taken
        // (and kept) by this abandoned place in the queue.
        undoing.start(&name);
        rt.spawn(async move {
            if let Some(task) = task {
                let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
            }
            let (lock_key, owner) = ko.split_once('\0').expect("joined above");
            for attempt in 0..10u32 {
                match delete_if_value(&mut client, lock_key, owner).await {
                    Ok(_) => break,
                    Err(e) => {
                        tracing::warn!("removing abandoned etcd key {lock_key} failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100 << attempt.min(5))).await;
                    }
                }
            }
            undoing.finish(&name);
        });
    }
}

/// Deletes `lock_key` iff its value is still `owner`.
async fn delete_if_value(client: &mut Client, lock_key: &str, owner: &str) -> Result<bool> {
    let r = txn(
        client,
        Txn::new()
            .when([Compare::value(lock_key, CompareOp::Equal, owner)])
            .and_then([TxnOp::delete(lock_key, None)]),
    )
    .await
    .map_err(|e| etcd_err("delete", e))?;
    Ok(r.succeeded())
}

fn first_kv(r: &TxnOpResponse) -> Option<&etcd_client::KeyValue> {
    match r {
        TxnOpResponse::Get(g) => g.kvs().first(),
        _ => None,
    }
}

fn header_rev(h: Option<&etcd_client::ResponseHeader>) -> Result<i64> {
    h.map(|h| h.revision())
        .ok_or_else(|| Error::unavailable("etcd answered without a response header", None))
}

/// The waiter's watch on one predecessor, seen to exist at revision `seen_at`: `true` when it
/// was deleted (or the watch ended and the caller must look again), `false` at `until`.
///
/// The watch starts at the current revision: a watch asked to start in the past is served by
/// etcd's catch-up loop, which runs every 100 ms and would add that much to every handoff. A
/// delete between `seen_at` and the watch's creation is caught by looking once more.
async fn wait_deleted(client: &Client, key: &[u8], seen_at: i64, until: Instant) -> Result<bool> {
    let opts = WatchOptions::new().with_filters([WatchFilterType::NoPut]);
    let open = retry(|| {
        let (mut w, k, o) = (client.watch_client(), key.to_vec(), opts.clone());
        async move { w.watch(k, Some(o)).await }
    });
    let mut stream = match tokio::time::timeout_at(until.into(), open).await {
        Err(_) => return Ok(false),
        Ok(Err(e)) => return Err(etcd_err("watch", e)),
        Ok(Ok(s)) => s,
    };
    let mut checked = false;
    loop {
        let msg = match tokio::time::timeout_at(until.into(), stream.message()).await {
            Err(_) => return Ok(false),
            Ok(Err(e)) => return Err(etcd_err("watch", e)),
            Ok(Ok(None)) => return Ok(true),
            Ok(Ok(Some(m))) => m,
        };
        if msg.canceled() || msg.events().iter().any(|e| e.event_type() == EventType::Delete) {
            return Ok(true);
        }
        if msg.created() && !checked {
            checked = true;
            let created_at = header_rev(msg.header())?;
            if created_at != seen_at {
                // Something changed in between: is the predecessor still there?
                let opts = GetOptions::new().with_keys_only();
                let r = retry(|| {
                    let (mut c, k, o) = (client.clone(), key.to_vec(), opts.clone());
                    async move { c.get(k, Some(o)).await }
                })
                .await
                .map_err(|e| etcd_err("get", e))?;
                if r.kvs().is_empty() {
                    return Ok(true);
                }
            }
        }
    }
}

impl EtcdStore {
    /// One acquisition: a single conditional put (`until` = None), or a place in the queue and
    /// predecessor watches until `until`.
    async fn attempt(&self, req: &AcquireRequest<'_>, until: Option<Instant>) -> Result<Attempt> {
        let session = self.session().await?;
        let name = self.lock_name(req.key);
        let pfx = format!("{name}/");
        let lock_key = self.lock_key(req.key, req.owner);
        let owner = req.owner.to_string();
        let put = TxnOp::put(
            lock_key.as_str(),
            owner.as_str(),
            Some(PutOptions::new().with_lease(session.id)),
        );
        let first = TxnOp::get(
            pfx.as_str(),
            Some(
                GetOptions::new()
                    .with_prefix()
                    .with_sort(SortTarget::Create, SortOrder::Ascend)
                    .with_limit(1),
            ),
        );
        let txn = match until {
            // Put only if nobody is queued (a holder or a waiter, ours or etcdctl's).
            None => Txn::new()
                .when([Compare::create_revision(pfx.as_str(), CompareOp::Equal, 0).with_prefix()])
                .and_then([put])
                .or_else([first]),
            // Take a place in the queue, as concurrency.Mutex does.
            Some(_) => Txn::new().and_then([put, first]),
        };
        let sent = Instant::now();
        let mut guard = PutGuard::spawn(self, txn, &name, &lock_key, req.owner);
        let resp = guard.outcome().await?;
        let rev = header_rev(resp.header())?;
        let Some(until) = until else {
            guard.disarm();
            if resp.succeeded() {
                return Ok(self.grant(req, lock_key, rev, session, sent));
            }
            return Ok(Attempt::Busy { holder_expires_in: None });
        };
        let ops = resp.op_responses();
        if ops.get(1).and_then(first_kv).is_some_and(|kv| kv.create_revision() == rev) {
            guard.disarm();
            return Ok(self.grant(req, lock_key, rev, session, sent));
        }
        // Wait for every key created before ours to go, watching only the latest of them.
        let before = GetOptions::new()
            .with_prefix()
            .with_max_create_revision(rev - 1)
            .with_sort(SortTarget::Create, SortOrder::Descend)
            .with_limit(1)
            .with_keys_only();
        loop {
            if Instant::now() >= until {
                guard.undo_now().await?;
                return Ok(Attempt::Busy { holder_expires_in: None });
            }
            let look = Txn::new().and_then([
                TxnOp::get(pfx.as_str(), Some(before.clone())),
                TxnOp::get(lock_key.as_str(), Some(GetOptions::new().with_keys_only())),
            ]);
            let r = tokio::time::timeout(req.op_timeout, self::txn(&self.client, look))
                .await
                .map_err(|_| {
                    Error::UnknownOutcome(format!(
                        "etcd lookup got no answer within {:?}",
                        req.op_timeout
                    ))
                })?
                .map_err(|e| etcd_err("txn", e))?;
            let ops = r.op_responses();
            if ops.get(1).and_then(first_kv).is_none_or(|kv| kv.create_revision() != rev) {
                guard.disarm();
                return Err(Error::unavailable(
                    format!("etcd session {:x} ended while waiting for {:?}", session.id, req.key),
                    None,
                ));
            }
            let Some(pred) = ops.first().and_then(first_kv) else {
                guard.disarm();
                // Granted when the last key before ours went; the deadline counts from the
                // request that queued us (the session has been kept alive since).
                return Ok(self.grant(req, lock_key, rev, session, sent));
            };
            let pred = pred.key().to_vec();
            if !wait_deleted(&self.client, &pred, header_rev(r.header())?, until).await? {
                continue; // `until` passed: the loop head undoes and answers busy
            }
        }
    }

    fn held_entry(&self, key: &Key, owner: &OwnerToken) -> Option<(String, i64, Arc<Session>)> {
        match self.held().get(owner) {
            Some(h) if h.key == *key => Some((h.lock_key.clone(), h.rev, h.session.clone())),
            _ => None,
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
            waiting: "watch on the predecessor's key only (no herd)",
        }
    }

    async fn try_acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        self.attempt(req, None).await
    }

    async fn watch(&self, _key: &Key) -> Result<Box<dyn Watch>> {
        // Unused: `acquire` queues and watches its predecessor itself.
        Ok(Box::new(super::bell::SleepWatch))
    }

    async fn acquire(&self, req: &AcquireRequest<'_>, until: Option<Instant>) -> Result<Attempt> {
        // The whole wait (queue place, predecessor watches) answers within `until` + op timeout.
        super::bell::server_side_acquire(req, until, |_| self.attempt(req, until)).await
    }

    async fn renew(&self, key: &Key, owner: &OwnerToken, _ttl: Duration) -> Result<bool> {
        let Some((lock_key, rev, session)) = self.held_entry(key, owner) else {
            return Ok(false);
        };
        if session.ended() {
            return Ok(false);
        }
        let opts = GetOptions::new().with_keys_only();
        let r = retry(|| {
            let (mut c, k, o) = (self.client.clone(), lock_key.clone(), opts.clone());
            async move { c.get(k, Some(o)).await }
        })
        .await
        .map_err(|e| etcd_err("get", e))?;
        Ok(r.kvs()
            .first()
            .is_some_and(|kv| kv.create_revision() == rev && kv.lease() == session.id))
    }

    async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool> {
        let name = self.lock_name(key);
        self.undoing.settled(&name, Duration::from_secs(10)).await;
        let held = {
            let mut map = self.held();
            match map.get(owner) {
                Some(h) if h.key == *key => map.remove(owner),
                _ => None,
            }
        };
        let mut client = self.client.clone();
        let Some(h) = held else {
            // Not granted by this store instance (another process, or an acquire whose outcome
            // was unknown): the key name carries the owner, the value must match it too.
            return delete_if_value(&mut client, &self.lock_key(key, owner), &owner.to_string())
                .await;
        };
        // Only our own key, and only the grant we were given (its create revision).
        let r = txn(
            &client,
            Txn::new()
                .when([Compare::create_revision(h.lock_key.as_str(), CompareOp::Equal, h.rev)])
                .and_then([TxnOp::delete(h.lock_key.as_str(), None)]),
        )
        .await
        .map_err(|e| etcd_err("release", e))?;
        Ok(r.succeeded())
    }

    async fn holders(&self, key: Option<&Key>) -> Result<Vec<Holder>> {
        let range = match key {
            Some(k) => format!("{}/", self.lock_name(k)),
            None if self.cfg.prefix.is_empty() => String::new(),
            None => format!("{}/", self.cfg.prefix),
        };
        let opts = if range.is_empty() {
            GetOptions::new().with_all_keys()
        } else {
            GetOptions::new().with_prefix()
        };
        let opts = opts.with_sort(SortTarget::Create, SortOrder::Ascend);
        let r = retry(|| {
            let (mut c, k, o) = (self.client.clone(), range.clone(), opts.clone());
            async move { c.get(k, Some(o)).await }
        })
        .await
        .map_err(|e| etcd_err("get", e))?;
        // The first key (lowest create revision) of each lock name holds it.
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        let mut foreign = false;
        for kv in r.kvs() {
            let Ok(k) = kv.key_str() else { continue };
            let Some((name, _)) = k.rsplit_once('/') else { continue };
            if !seen.insert(name.to_owned()) {
                continue;
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
            let (Ok(owner), Ok(lock)) =
                (kv.value_str().unwrap_or("").parse::<OwnerToken>(), Key::new(lock))
            else {
                foreign = true; // etcdctl lock or a Go service: no owner token in the value
                continue;
            };
            out.push(Holder::new(
                lock,
                owner,
                Some(FenceToken::new(kv.create_revision() as u64)),
                None,
            ));
        }
        if let Some(k) = key
            && out.is_empty()
            && foreign
        {
            return Err(Error::Busy { key: k.to_string() });
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
}
