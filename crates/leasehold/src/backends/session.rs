//! What the session stores share: the connections a PostgreSQL or MySQL session store's
//! locks share ([`Conns`]) and the grants it holds on them ([`Grants`]), the keys whose
//! abandoned requests are still being undone ([`Undoing`]), and the core of the stores whose
//! session lives on their servers (etcd, ZooKeeper): the session's two signals
//! ([`SessionSignals`]) and [`SessionCore`], which opens sessions, records the grants bound to
//! them and carries a wait across a lost session.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::store::{AcquireRequest, Attempt};
use crate::{FenceToken, Key, OwnerToken, Result};

cfg_sql! {
    /// A connection of a PostgreSQL or MySQL session store, as [`Conns`] sees it.
    pub(crate) trait SessionConnection {
        /// The lock names it carries: held, or reserved by a request in flight.
        fn keys(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>>;
        /// Whether its session still lives.
        fn alive(&self) -> bool;
    }
}

cfg_sql! {
    /// The connections a session store's requests share. A session lock is re-entrant
    /// within its session, so a connection never carries one lock name twice (a second
    /// grant there would exclude nothing), and carries [`Conns::PER_CONN`] names at most.
    pub(crate) struct Conns<C>(Mutex<Vec<std::sync::Arc<C>>>);
}

cfg_sql! {
    impl<C> Default for Conns<C> {
        fn default() -> Self {
            Conns(Mutex::default())
        }
    }
}

cfg_sql! {
    impl<C: SessionConnection> Conns<C> {
        /// Lock names one session connection carries at most.
        pub const PER_CONN: usize = 64;

        fn list(&self) -> std::sync::MutexGuard<'_, Vec<std::sync::Arc<C>>> {
            self.0.lock().unwrap_or_else(|p| p.into_inner())
        }

        /// A live connection to ask for `name` on, with `name` reserved on it, never one
        /// already carrying it. `exclusive` (a request that waits in the server, stalling its
        /// connection): one carrying nothing, taken out of the shared list. When none fits,
        /// `open` makes one, shared unless `exclusive`; its error is the answer.
        pub async fn reserve<F>(
            &self,
            name: &str,
            exclusive: bool,
            open: impl FnOnce() -> F,
        ) -> crate::Result<std::sync::Arc<C>>
        where
            F: std::future::Future<Output = crate::Result<std::sync::Arc<C>>>,
        {
            let found = {
                let mut conns = self.list();
                conns.retain(|c| c.alive());
                let pick = conns.iter().position(|c| {
                    let keys = c.keys();
                    if exclusive {
                        keys.is_empty()
                    } else {
                        keys.len() < Self::PER_CONN && !keys.contains(name)
                    }
                });
                match pick {
                    Some(i) if exclusive => Some(conns.swap_remove(i)),
                    Some(i) => Some(conns[i].clone()),
                    None => None,
                }
            };
            let conn = match found {
                Some(c) => c,
                None => {
                    let c = open().await?;
                    if !exclusive {
                        self.list().push(c.clone());
                    }
                    c
                }
            };
            conn.keys().insert(name.to_owned());
            Ok(conn)
        }

        /// Gives a connection back to the shared list (after a wait), closing surplus empty
        /// ones and dead ones.
        pub fn give_back(&self, conn: std::sync::Arc<C>) {
            let mut conns = self.list();
            let empty = conns.iter().filter(|c| c.keys().is_empty()).count();
            if conn.alive() && (!conn.keys().is_empty() || empty < 2) {
                conns.push(conn);
            }
        }
    }
}

cfg_sql! {
    /// One grant of a session store: the key, its mode (a reader's shared lock, or
    /// exclusive), its fence and holder info, and the connection whose session holds the lock.
    pub(crate) struct Held<C> {
        pub key: crate::Key,
        pub mode: crate::Mode,
        pub fence: u64,
        pub info: Option<crate::HolderInfo>,
        pub conn: std::sync::Arc<C>,
    }
}

cfg_sql! {
    /// The grants a session store holds, by owner: a session lock belongs to a connection of
    /// this process, so only this map can say whose it is.
    pub(crate) struct Grants<C>(Mutex<HashMap<crate::OwnerToken, Held<C>>>);
}

cfg_sql! {
    impl<C> Default for Grants<C> {
        fn default() -> Self {
            Grants(Mutex::default())
        }
    }
}

cfg_sql! {
    impl<C> Grants<C> {
        fn map(&self) -> std::sync::MutexGuard<'_, HashMap<crate::OwnerToken, Held<C>>> {
            self.0.lock().unwrap_or_else(|p| p.into_inner())
        }

        /// Records `owner`'s grant.
        pub fn insert(&self, owner: crate::OwnerToken, held: Held<C>) {
            self.map().insert(owner, held);
        }

        /// The connection holding `owner`'s grant of `key`, if it is one.
        pub fn conn(
            &self,
            key: &crate::Key,
            owner: &crate::OwnerToken,
        ) -> Option<std::sync::Arc<C>> {
            match self.map().get(owner) {
                Some(h) if h.key == *key => Some(h.conn.clone()),
                _ => None,
            }
        }

        /// Removes and returns `owner`'s grant of `key`, if it is one (owner-checked).
        pub fn take(&self, key: &crate::Key, owner: &crate::OwnerToken) -> Option<Held<C>> {
            let mut map = self.map();
            match map.get(owner) {
                Some(h) if h.key == *key => map.remove(owner),
                _ => None,
            }
        }

        /// This process's grants (of `key`, if given), sorted by key.
        pub fn holders(&self, key: Option<&crate::Key>) -> Vec<crate::Holder> {
            let mut out: Vec<crate::Holder> = self
                .map()
                .iter()
                .filter(|(_, h)| key.is_none_or(|k| *k == h.key))
                .map(|(o, h)| {
                    let fence = Some(crate::FenceToken::new(h.fence));
                    crate::Holder::new(h.key.clone(), *o, fence, None)
                        .with_info(h.info.clone())
                        .with_mode(h.mode)
                })
                .collect();
            out.sort_by(|a, b| a.key.cmp(&b.key));
            out
        }
    }
}

cfg_undoing! {
    /// Keys whose abandoned requests are still being undone, so a release in this process can
    /// wait until no abandoned request can grab the lock it frees.
    #[derive(Default)]
    pub(crate) struct Undoing {
        keys: Mutex<HashMap<String, usize>>,
        done: tokio::sync::Notify,
    }
}

cfg_undoing! {
    impl Undoing {
        pub fn start(&self, name: &str) {
            let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
            *keys.entry(name.to_owned()).or_default() += 1;
        }

        pub fn finish(&self, name: &str) {
            let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(n) = keys.get_mut(name) {
                *n -= 1;
                if *n == 0 {
                    keys.remove(name);
                }
            }
            drop(keys);
            self.done.notify_waiters();
        }

        pub async fn settled(&self, name: &str, limit: Duration) {
            // The common case, nothing being undone: no timer.
            if !self.keys.lock().unwrap_or_else(|p| p.into_inner()).contains_key(name) {
                return;
            }
            let _ = tokio::time::timeout(limit, async {
                loop {
                    let done = self.done.notified();
                    if !self.keys.lock().unwrap_or_else(|p| p.into_inner()).contains_key(name) {
                        return;
                    }
                    done.await;
                }
            })
            .await;
        }
    }
}

cfg_store_session! {
    /// The two signals of a store-side session (an etcd lease, a ZooKeeper session) that every
    /// grant on it carries: whether the store confirms it right now (`admit()`), and why it
    /// ended (`lost()`). The task that follows the session holds the senders.
    #[derive(Debug, Clone)]
    pub(crate) struct SessionSignals {
        live: tokio::sync::watch::Receiver<bool>,
        end: tokio::sync::watch::Receiver<Option<String>>,
    }
}

cfg_store_session! {
    impl SessionSignals {
        /// A live session's signals and the senders that change them.
        pub fn new()
        -> (tokio::sync::watch::Sender<bool>, tokio::sync::watch::Sender<Option<String>>, Self)
        {
            let (live_tx, live) = tokio::sync::watch::channel(true);
            let (end_tx, end) = tokio::sync::watch::channel(None);
            (live_tx, end_tx, SessionSignals { live, end })
        }

        /// Why the session ended, once it has.
        pub fn ended_because(&self) -> Option<String> {
            self.end.borrow().clone()
        }

        /// Whether the session has ended.
        pub fn ended(&self) -> bool {
            self.end.borrow().is_some()
        }

        /// Resolves when the session ends, with why; never while it lives. A waiter races
        /// its watch against this, so a session lost while it waits is noticed at once
        /// rather than when the predecessor goes.
        pub async fn end(&self, store: &'static str) -> String {
            let mut end = self.end.clone();
            match end.wait_for(|e| e.is_some()).await {
                Ok(e) => e.clone().unwrap_or_default(),
                Err(_) => format!("the {store} session was closed"),
            }
        }

        /// A grant of `fence` on this session, carrying both signals.
        fn grant(&self, fence: FenceToken, sent: Instant, store: &'static str) -> crate::store::Grant {
            let signals = self.clone();
            crate::store::Grant::new(fence, sent)
                .with_session_end(Box::pin(async move { signals.end(store).await }))
                .with_session_live(self.live.clone())
        }
    }
}

cfg_store_session! {
    /// What [`SessionCore`] needs of a store's session (an etcd lease kept alive, a ZooKeeper
    /// session): its signals. Dropping the last handle of a session ends it on the server
    /// (the store's `Drop`), which removes whatever is still bound to it.
    pub(crate) trait StoreSession: Send + Sync + 'static {
        /// The session's `admit()` and `lost()` signals.
        fn signals(&self) -> &SessionSignals;
    }
}

cfg_store_session! {
    /// One grant bound to a store-side session: its key, where it lives on the server (`P`:
    /// etcd's key and create revision, ZooKeeper's node path) and the session.
    pub(crate) struct OnSession<S, P> {
        pub key: Key,
        pub place: P,
        pub session: Arc<S>,
    }
}

cfg_store_session! {
    /// What one acquisition on one session came to.
    pub(crate) enum Waited {
        /// The answer to hand the caller: granted, or busy.
        Done(Attempt),
        /// The session ended before anything was granted on it (the contender's key or node
        /// went with it, or was never made): nothing is lost, and [`SessionCore::acquire`]
        /// goes on with a new session. The string says why.
        SessionLost(String),
    }
}

cfg_store_session! {
    /// The core of a store whose session lives on its servers (etcd, ZooKeeper), written once:
    /// the current session (a new one opened when the last has ended), the grants bound to
    /// sessions, by owner, and the keys whose abandoned requests are being undone.
    ///
    /// A lost session means two things. For a grant it is a lost lease: `lost()` fires and
    /// the grant is never renewed again. For a contender that is still waiting, nothing was
    /// granted, so nothing can be lost: [`SessionCore::acquire`] opens a new session and the
    /// wait goes on (a new place at the end of the queue) within its deadline, and answers
    /// busy when the deadline has passed.
    pub(crate) struct SessionCore<S, P> {
        store: &'static str,
        current: tokio::sync::Mutex<Option<Arc<S>>>,
        held: Mutex<HashMap<OwnerToken, OnSession<S, P>>>,
        /// Keys whose abandoned queue places are still being removed.
        pub undoing: Arc<Undoing>,
    }
}

cfg_store_session! {
    impl<S: StoreSession, P: Clone> SessionCore<S, P> {
        /// An empty core for `store` (its name in messages and logs); no session is open.
        pub fn new(store: &'static str) -> Self {
            SessionCore {
                store,
                current: tokio::sync::Mutex::new(None),
                held: Mutex::default(),
                undoing: Arc::default(),
            }
        }

        /// The current session, or a new one from `open` when none is open or the last has
        /// ended. Concurrent callers share one new session.
        pub async fn session<F, Fut>(&self, open: F) -> Result<Arc<S>>
        where
            F: FnOnce() -> Fut,
            Fut: Future<Output = Result<Arc<S>>>,
        {
            let mut cur = self.current.lock().await;
            if let Some(s) = cur.as_ref()
                && !s.signals().ended()
            {
                return Ok(s.clone());
            }
            let new = open().await?;
            *cur = Some(new.clone());
            Ok(new)
        }

        /// Stops handing out `session`, found gone by a request before its own task said so:
        /// the next acquisition opens a new one. Grants still bound to it keep it (their
        /// `lost()` fires when its task sees the end).
        async fn retire(&self, session: &Arc<S>) {
            let mut cur = self.current.lock().await;
            if cur.as_ref().is_some_and(|s| Arc::ptr_eq(s, session)) {
                *cur = None;
            }
        }

        fn map(&self) -> std::sync::MutexGuard<'_, HashMap<OwnerToken, OnSession<S, P>>> {
            self.held.lock().unwrap_or_else(|p| p.into_inner())
        }

        /// Hands out `req`'s grant at `place` with `fence`, bound to `session`, and records
        /// it; [`Waited::SessionLost`] instead when the session has ended (a grant on it
        /// would be lost at once; what it holds goes with the session).
        pub fn grant(
            &self,
            req: &AcquireRequest<'_>,
            place: P,
            fence: i64,
            session: Arc<S>,
            sent: Instant,
        ) -> Waited {
            if let Some(why) = session.signals().ended_because() {
                return Waited::SessionLost(why);
            }
            let grant = session.signals().grant(FenceToken::from_i64(fence), sent, self.store);
            self.map().insert(*req.owner, OnSession { key: req.key.clone(), place, session });
            Waited::Done(Attempt::Granted(grant))
        }

        /// Where `owner`'s grant of `key` lives and its session, if it is one of ours.
        pub fn held(&self, key: &Key, owner: &OwnerToken) -> Option<(P, Arc<S>)> {
            match self.map().get(owner) {
                Some(h) if h.key == *key => Some((h.place.clone(), h.session.clone())),
                _ => None,
            }
        }

        /// Removes and returns `owner`'s grant of `key`, if it is one of ours (owner-checked).
        pub fn take(&self, key: &Key, owner: &OwnerToken) -> Option<OnSession<S, P>> {
            let mut map = self.map();
            match map.get(owner) {
                Some(h) if h.key == *key => map.remove(owner),
                _ => None,
            }
        }

        /// An acquisition that outlives the sessions it waits on: `attempt` runs on the
        /// current session (opened with `open` when needed); when it answers
        /// [`Waited::SessionLost`], or fails while its session has ended (a request answered
        /// "session expired", or cut off by the session's end), nothing was granted, so the
        /// session is retired and `attempt` runs again on a new one, as long as `until` has
        /// not passed (then busy). A one-shot attempt (`until` = None) is tried on one new
        /// session, then answers the loss as [`crate::Error::Unavailable`].
        pub async fn acquire<O, OF, A, AF>(
            &self,
            req: &AcquireRequest<'_>,
            until: Option<Instant>,
            open: O,
            mut attempt: A,
        ) -> Result<Attempt>
        where
            O: Fn() -> OF,
            OF: Future<Output = Result<Arc<S>>>,
            A: FnMut(Arc<S>) -> AF,
            AF: Future<Output = Result<Waited>>,
        {
            let mut lost = 0u32;
            loop {
                let session = self.session(&open).await?;
                let why = match attempt(session.clone()).await {
                    Ok(Waited::Done(a)) => return Ok(a),
                    Ok(Waited::SessionLost(why)) => why,
                    Err(e) if session.signals().ended() => e.to_string(),
                    Err(e) => return Err(e),
                };
                self.retire(&session).await;
                lost += 1;
                match until {
                    Some(u) if Instant::now() >= u => {
                        return Ok(Attempt::Busy { holder_expires_in: None });
                    }
                    None if lost >= 2 => {
                        let msg = format!(
                            "the {} session ended twice during one attempt on {:?}: {why}",
                            self.store, req.key
                        );
                        return Err(crate::Error::unavailable(msg, None));
                    }
                    _ => {}
                }
                tracing::info!(
                    store = self.store,
                    key = req.key.as_str(),
                    "the session ended while waiting, with nothing granted ({why}); \
                     waiting on with a new session"
                );
                if lost > 1 {
                    // A session that keeps ending (a store that keeps expiring it): not a spin.
                    let pause = Duration::from_millis(50 * u64::from(lost.min(20)));
                    let next = Instant::now() + pause;
                    tokio::time::sleep_until(until.map_or(next, |u| u.min(next)).into()).await;
                }
            }
        }
    }
}
