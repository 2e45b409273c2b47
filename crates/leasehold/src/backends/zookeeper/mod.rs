//! ZooKeeper store: `zk://HOST:PORT[,HOST:PORT…][/CHROOT][?session=10s&curator=mutex]`.
//!
//! Node layout and ordering are those of Apache Curator's `InterProcessMutex`, so a leasehold
//! holder and a Java service using Curator on the same path exclude each other:
//!
//! - the lock on KEY is the node `[/CHROOT]/leasehold/KEY` (created as a container node on
//!   first use); each contender creates one ephemeral sequential child named
//!   `_c_<UUID>-lock-<SEQUENCE>` (Curator's "protected" name);
//! - the holder is the child with the lowest sequence; a waiter watches only the child just
//!   before its own (no herd: one release wakes one waiter);
//! - leasehold's UUID is its owner token (written 8-4-4-4-12), and the node's data the owner
//!   token, then a line break and who holds it ([`crate::HolderInfo`]; Curator puts
//!   the client's address there), so `zkCli.sh ls /leasehold/KEY` shows holder and waiters
//!   and `get` who they are. A create interrupted by
//!   a connection loss looks for its own UUID before creating again (Curator's protection
//!   mode), so no orphan node is left to block others.
//!
//! With Curator, use `new InterProcessMutex(client, "/leasehold/KEY")` (under the same
//! namespace as the CHROOT, if any).
//!
//! Readers (`__READ__` children) and writers follow Curator's `InterProcessReadWriteLock` on the
//! same node (`rw.rs`); leasehold's exclusive grants are `lock-` children, or `__WRIT__` ones
//! with `?curator=rwlock` for paths shared with Curator's read-write lock (Curator's two
//! recipes do not see each other's exclusive nodes; leasehold sees both). Semaphores follow
//! `InterProcessSemaphoreV2` (`locks`, `leases`; `semaphore.rs`).
//!
//! The fence is the `czxid` of the holder's node: a zxid (leader epoch, counter) that ZooKeeper
//! never reuses, also across leader elections.
//!
//! Every node is bound to the store's ZooKeeper session (`session`, default 10 s, negotiated
//! by the server within its limits). When the client loses its connection, the session may
//! still be alive: [`crate::Lease::admit`] turns false at once, and `lost()` fires if the
//! client is not reconnected within 0.4 × the session timeout (the client notices silence
//! after at most 0.4 × the timeout, so this lands before the server can expire the session).
//! `Expired` fires `lost()` at once; the next acquire opens a new session. A release after the
//! session expired answers `Ok(false)` (not ours any more: the server deleted the node). A
//! contender whose session ends while it waits (its process frozen past the session timeout)
//! held nothing: it waits on with a new session, within its deadline (`SessionCore`, shared
//! with etcd).
//!
//! Opening a session answers within the connect limit ([`crate::Locker::connect_within`],
//! 5 s by default), not within the session timeout: a server that is not there, or does not
//! answer, is [`Error::Unavailable`] at the limit. A digest user or ACL the server refuses (`NoAuth`, `AuthFailed`), as
//! when the chroot or `/leasehold` cannot be created, is [`Error::Config`].

mod config;
mod node;
mod probe;
mod rw;
mod semaphore;
mod session;
use config::{Config, parse_url, valid_path};
use node::{CreateGuard, create_node, find_own};
use session::Session;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use zookeeper_client::{Client, EventType};

use super::Limits;
use super::session::{SessionCore, Waited};
use crate::store::{AcquireRequest, Attempt};
use crate::{
    Error, FenceRepeat, FenceToken, Guarantees, Holder, HolderInfo, Key, LockKind, Mode,
    OwnerToken, Result, Store,
};

pub use zookeeper_client;

/// The node under which every lock lives (inside the chroot).
pub const BASE: &str = "/leasehold";

fn zk_err(what: &str, e: zookeeper_client::Error) -> Error {
    use zookeeper_client::Error as E;
    let msg = format!("zookeeper {what} failed: {e}");
    match e {
        E::NoAuth | E::AuthFailed | E::InvalidAcl => Error::config(
            format!("{msg} (the server's ACLs refuse this client: check the chroot's ACL)"),
            Some(Box::new(e)),
        ),
        E::BadArguments(_) => Error::invalid(msg),
        _ => Error::unavailable(msg, Some(Box::new(e))),
    }
}

/// A node's data: the owner token, then (if any) the holder's info line.
fn node_data(owner: &OwnerToken, info: Option<&HolderInfo>) -> String {
    match info {
        Some(i) => format!("{owner}\n{}", i.encode()),
        None => owner.to_string(),
    }
}

/// Reads [`node_data`] back, if it names `owner`.
fn data_of(data: &[u8], owner: &OwnerToken) -> Option<Option<HolderInfo>> {
    let data = std::str::from_utf8(data).ok()?;
    let (o, info) = data.split_once('\n').map_or((data, None), |(o, i)| (o, Some(i)));
    (o == owner.to_string()).then(|| info.and_then(HolderInfo::decode))
}

/// Whether an error says our session is over: its ephemeral nodes are gone with it.
fn session_gone(e: &zookeeper_client::Error) -> bool {
    matches!(e, zookeeper_client::Error::SessionExpired | zookeeper_client::Error::ClientClosed)
}

/// Whether `e` is a request's failure because our session is over ([`session_gone`]).
fn cut_by_session_end(e: &Error) -> bool {
    let source = std::error::Error::source(e);
    source.and_then(|s| s.downcast_ref::<zookeeper_client::Error>()).is_some_and(session_gone)
}

/// The owner token as a UUID (8-4-4-4-12), the form Curator's protected names carry.
fn uuid(owner: &OwnerToken) -> String {
    let h = owner.to_string();
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// The owner token a protected node name carries, if it is one of ours.
fn owner_of(node: &str) -> Option<OwnerToken> {
    let uuid = node.strip_prefix("_c_")?.get(..36)?;
    uuid.replace('-', "").parse().ok()
}

/// The ZooKeeper store. See the module docs for layout, fences and session semantics.
pub struct ZookeeperStore {
    cfg: Config,
    /// The bound on opening a session.
    connect: Duration,
    /// The session, the grants bound to it (by owner: their node's path) and the abandoned
    /// places being undone.
    core: SessionCore<Session, String>,
}

impl std::fmt::Debug for ZookeeperStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZookeeperStore")
            .field("hosts", &self.cfg.hosts)
            .field("chroot", &self.cfg.chroot)
            .finish()
    }
}

impl ZookeeperStore {
    /// Connects and opens a session within [`crate::DEFAULT_CONNECT_TIMEOUT`].
    pub async fn connect(url: &str) -> Result<ZookeeperStore> {
        Self::open(&parse_url(url)?, Limits::default()).await
    }

    async fn open(cfg: &Config, limits: Limits) -> Result<ZookeeperStore> {
        let store = ZookeeperStore {
            cfg: cfg.clone(),
            connect: limits.connect,
            core: SessionCore::new("zookeeper"),
        };
        // Another service at the first server's address (Redis, PostgreSQL, MySQL, a web
        // server) is named as such instead of timing out as an outage (`backends::peer`).
        let first = store.cfg.hosts.split(',').next().and_then(super::peer::host_port);
        let peer = first.as_ref().map(|(h, p)| (h.as_str(), *p));
        super::peer::guarded("zookeeper", super::peer::Speaks::Zk, peer, store.session()).await?;
        Ok(store)
    }

    /// The lock node of `key`: `[/CHROOT]/leasehold/KEY`, the path to give Curator's
    /// `InterProcessMutex`.
    pub fn lock_path(&self, key: &Key) -> Result<String> {
        let path = format!("{}{BASE}/{}", self.cfg.chroot, key.as_str());
        valid_path(&path).map_err(|e| {
            Error::invalid(format!("key {:?} does not make a ZooKeeper path: it {e}", key.as_str()))
        })?;
        Ok(path)
    }

    /// A client on the store's current session.
    pub async fn client(&self) -> Result<Client> {
        self.session().await?.client()
    }

    async fn session(&self) -> Result<Arc<Session>> {
        self.core.session(|| Session::open(&self.cfg, self.connect)).await
    }

    fn grant(
        &self,
        req: &AcquireRequest<'_>,
        path: String,
        czxid: i64,
        session: Arc<Session>,
        sent: Instant,
    ) -> Waited {
        self.core.grant(req, path, czxid, session, sent)
    }

    /// An acquisition through the shared core: a session lost while waiting is replaced.
    async fn acquire_on_sessions(
        &self,
        req: &AcquireRequest<'_>,
        until: Option<Instant>,
    ) -> Result<Attempt> {
        let attempt = |session| async move {
            match self.attempt(req, session, until).await {
                // A request our session's end cut off ("session expired", the client closed),
                // possibly before the session's task has said so: nothing was granted.
                Err(e) if cut_by_session_end(&e) => Ok(Waited::SessionLost(e.to_string())),
                r => r,
            }
        };
        let open = || Session::open(&self.cfg, self.connect);
        self.core.acquire(req, until, open, attempt).await
    }

    /// The children of `lock` that are lock nodes, in Curator's order.
    async fn queue(client: &Client, lock: &str) -> Result<Vec<rw::Child>> {
        match client.list_children(lock).await {
            Ok(c) => Ok(rw::ordered(c)),
            Err(zookeeper_client::Error::NoNode) => Ok(Vec::new()),
            Err(e) => Err(zk_err("list children", e)),
        }
    }

    async fn attempt(
        &self,
        req: &AcquireRequest<'_>,
        session: Arc<Session>,
        until: Option<Instant>,
    ) -> Result<Waited> {
        if let Some(slot) = &req.slot {
            return semaphore::attempt(self, req, slot, session, until).await;
        }
        let busy = || Ok(Waited::Done(Attempt::Busy { holder_expires_in: None }));
        let client = session.client()?;
        let lock = self.lock_path(req.key)?;
        // An abandoned place of ours on this lock is being removed: let it finish first, so
        // a search for it by our UUID cannot meet the node we are about to create.
        let settle =
            until.map_or(Duration::from_secs(10), |u| u.saturating_duration_since(Instant::now()));
        self.core.undoing.settled(&lock, settle).await;
        let kind = rw::Kind::of(req.mode, self.cfg.curator);
        if until.is_none() && rw::would_wait(&Self::queue(&client, &lock).await?, req.mode) {
            // One attempt on a taken lock: do not join the queue at all.
            return busy();
        }
        let uuid = uuid(req.owner);
        let sent = Instant::now();
        let task = tokio::spawn(create_node(
            client.clone(),
            lock.clone(),
            uuid.clone(),
            kind.marker(),
            node_data(req.owner, req.info),
        ));
        let mut guard = CreateGuard {
            task: Some(task),
            armed: Some((client.clone(), self.core.undoing.clone(), lock.clone(), uuid)),
            path: None,
        };
        let (path, czxid) = guard.outcome().await?;
        let me = path.rsplit('/').next().unwrap_or_default().to_owned();
        loop {
            let queue = Self::queue(&client, &lock).await?;
            let Some(pos) = queue.iter().position(|c| c.name == me) else {
                // Our ephemeral node went with our session (the process was frozen past the
                // session timeout): nothing was granted; the core waits on with a new session.
                guard.disarm();
                return Ok(Waited::SessionLost(format!(
                    "our zookeeper node {path} is gone: session {:x} ended while waiting",
                    session.id
                )));
            };
            let Some(blocker) = rw::blocker(&queue, pos) else {
                // On a session that has ended meanwhile no grant: the node goes with it.
                guard.disarm();
                return Ok(self.grant(req, path, czxid, session, sent));
            };
            let Some(until) = until else {
                guard.undo_now().await?;
                return busy();
            };
            if Instant::now() >= until {
                guard.undo_now().await?;
                return busy();
            }
            debug_assert!(blocker.seq < queue[pos].seq);
            let pred = format!("{lock}/{}", blocker.name);
            let watcher = match client.check_and_watch_stat(&pred).await {
                Ok((Some(_), w)) => w,
                Ok((None, _)) => continue, // already gone
                Err(e) if session_gone(&e) => {
                    guard.disarm(); // our node went with the session
                    return Ok(Waited::SessionLost(zk_err("watch", e).to_string()));
                }
                Err(e) => return Err(zk_err("watch", e)),
            };
            let woke = tokio::select! {
                woke = tokio::time::timeout_at(until.into(), watcher.changed()) => woke,
                why = session.signals.end("zookeeper") => {
                    guard.disarm(); // our node goes with the session (its client is closed)
                    return Ok(Waited::SessionLost(why));
                }
            };
            if let Ok(ev) = woke
                && ev.event_type != EventType::NodeDeleted
                && ev.event_type != EventType::Session
            {
                tracing::debug!("zookeeper predecessor {pred} changed: {:?}", ev.event_type);
            }
        }
    }
}

#[async_trait]
impl Store for ZookeeperStore {
    fn guarantees(&self) -> Guarantees {
        Guarantees {
            backend: "zookeeper",
            kind: LockKind::Session,
            exclusion: "linearizable writes (ZAB); the queue order is Curator's \
                        InterProcessMutex, shared with Java services using it",
            store_failure: "survives the loss of a minority of servers (sessions move to \
                            another server); without a quorum no grant is made and a \
                            disconnected holder's lost() fires 0.4 × the session timeout after \
                            the disconnect",
            expiry: "the ZooKeeper session (its negotiated timeout): admit() is false while \
                     disconnected, lost() fires if not reconnected within 0.4 × the timeout, and \
                     at once on Expired",
            fence: "czxid of the holder's node (a zxid, never reused)",
            fence_repeat: FenceRepeat::Never,
            failure_admits_second_holder: false,
            holders_know_fence: true,
            holders_know_info: true,
            waiting: "watch on the predecessor node only (no herd)",
            primitives: crate::Primitives {
                permits: true,
                shared: true,
                writer_preference: true,
                shared_fence: true,
                note: "semaphores on Curator's InterProcessSemaphoreV2 layout (slot and N in each \
                       lease's data; Curator's leases take a permit without a slot), readers on \
                       InterProcessReadWriteLock's (a writer blocks later readers by sequence), \
                       several keys; exclusive grants are Curator mutex nodes unless \
                       ?curator=rwlock",
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
        let Some((path, session)) = self.core.held(key, owner) else { return Ok(false) };
        if session.ended() {
            return Ok(false);
        }
        let Ok(client) = session.client() else { return Ok(false) };
        match client.check_stat(&path).await {
            Ok(stat) => Ok(stat.is_some_and(|s| s.ephemeral_owner == session.id)),
            Err(e) if session_gone(&e) => Ok(false),
            Err(e) => Err(zk_err("stat", e)),
        }
    }

    async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool> {
        let lock = self.lock_path(key)?;
        self.core.undoing.settled(&lock, Duration::from_secs(10)).await;
        let (client, path) = match self.core.take(key, owner) {
            Some(h) => match h.session.client() {
                Ok(c) => (c, h.place),
                // The session is gone, and its ephemeral node with it.
                Err(_) if h.session.ended() => return Ok(false),
                Err(e) => return Err(e),
            },
            None => {
                // Not granted by this store instance: find the node carrying the owner's UUID.
                let client = self.client().await?;
                let leases = semaphore::leases_of_slot(self, key)?;
                match find_own(&client, &lock, &uuid(owner)).await? {
                    Some(p) => (client, p),
                    None => match leases {
                        Some(leases) => match find_own(&client, &leases, &uuid(owner)).await? {
                            Some(p) => (client, p),
                            None => return Ok(false),
                        },
                        None => return Ok(false),
                    },
                }
            }
        };
        // The path names this grant alone (UUID and sequence): a stale release cannot reach a
        // successor's node.
        match client.delete(&path, None).await {
            Ok(()) => Ok(true),
            Err(zookeeper_client::Error::NoNode) => Ok(false),
            // The session expired (the server deleted its nodes), or was declared lost and
            // closed (which deletes them): not ours any more, whoever holds the key now.
            Err(e) if session_gone(&e) => Ok(false),
            Err(e) => Err(zk_err("delete", e)),
        }
    }

    async fn holders(&self, key: Option<&Key>) -> Result<Vec<Holder>> {
        let client = self.client().await?;
        let keys: Vec<String> = match key {
            Some(k) => vec![k.as_str().to_owned()],
            None => match client.list_children(&format!("{}{BASE}", self.cfg.chroot)).await {
                Ok(c) => c,
                Err(zookeeper_client::Error::NoNode) => Vec::new(),
                Err(e) => return Err(zk_err("list children", e)),
            },
        };
        let mut out = Vec::new();
        let mut foreign = false;
        for k in keys {
            let Ok(k) = Key::new(k) else { continue };
            let lock = self.lock_path(&k)?;
            let queue = Self::queue(&client, &lock).await?;
            for held in rw::holding(&queue) {
                let Some(owner) = owner_of(&held.name) else {
                    foreign = true; // Curator or another client: its UUID is not an owner token
                    continue;
                };
                let mode = if held.kind.exclusive() { Mode::Exclusive } else { Mode::Shared };
                match client.get_data(&format!("{lock}/{}", held.name)).await {
                    Ok((data, stat)) => match data_of(&data, &owner) {
                        Some(info) => {
                            let fence = Some(FenceToken::from_i64(stat.czxid));
                            let h = Holder::new(k.clone(), owner, fence, None);
                            out.push(h.with_info(info).with_mode(mode));
                        }
                        None => foreign = true,
                    },
                    Err(zookeeper_client::Error::NoNode) => {}
                    Err(e) => return Err(zk_err("get", e)),
                }
            }
            // A semaphore of this name (its `leases`), or the semaphore a slot key names.
            let (slots, other) = semaphore::holders(&client, self, &k).await?;
            out.extend(slots);
            foreign |= other;
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

/// `zk://H1:P1[,H2:P2…][/CHROOT][?session=DUR&curator=mutex|rwlock]`.
pub(crate) const STORE: super::Descriptor = super::Descriptor {
    form: "zk://H1:P1[,H2:P2…][/CHROOT][?session=10s&curator=mutex|rwlock]",
    usage: "zk://H1:P1[,H2:P2…][/CHROOT][?session=10s]",
    summary: "ZooKeeper",
    parse: |url| super::parsed(parse_url(url)),
};

impl super::StoreConfig for Config {
    fn open(&self, limits: Limits) -> super::Boxed<'_, Result<Arc<dyn Store>>> {
        super::opened(ZookeeperStore::open(self, limits))
    }

    fn probe<'a>(
        &'a self,
        p: &'a mut crate::probe::findings::Probe,
    ) -> super::Boxed<'a, std::result::Result<(), String>> {
        Box::pin(probe::zookeeper(self, p))
    }

    fn session_timeout(&self) -> Option<Duration> {
        Some(self.session)
    }
}
