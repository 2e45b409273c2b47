//! What the session stores share: the connections a PostgreSQL or MySQL session store's
//! locks share ([`Conns`]) and the grants it holds on them ([`Grants`]), the keys whose
//! abandoned requests are still being undone, and the two signals of a store-side session
//! (etcd, ZooKeeper).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

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

cfg_sql! {
    /// Keys whose abandoned requests are still being undone, so a release in this process can
    /// wait until no abandoned request can grab the lock it frees.
    #[derive(Default)]
    pub(crate) struct Undoing {
        keys: Mutex<HashMap<String, usize>>,
        done: tokio::sync::Notify,
    }
}

cfg_sql! {
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

/// The two signals of a store-side session (an etcd lease, a ZooKeeper session) that every
/// grant on it carries: whether the store confirms it right now (`admit()`), and why it ended
/// (`lost()`). The task that follows the session holds the senders.
#[cfg(any(feature = "etcd", feature = "zookeeper"))]
#[derive(Debug, Clone)]
pub(crate) struct SessionSignals {
    live: tokio::sync::watch::Receiver<bool>,
    end: tokio::sync::watch::Receiver<Option<String>>,
}

#[cfg(any(feature = "etcd", feature = "zookeeper"))]
impl SessionSignals {
    /// A live session's signals and the senders that change them.
    pub fn new()
    -> (tokio::sync::watch::Sender<bool>, tokio::sync::watch::Sender<Option<String>>, Self) {
        let (live_tx, live) = tokio::sync::watch::channel(true);
        let (end_tx, end) = tokio::sync::watch::channel(None);
        (live_tx, end_tx, SessionSignals { live, end })
    }

    /// Why the session ended, once it has.
    #[cfg_attr(not(feature = "zookeeper"), allow(dead_code))]
    pub fn ended_because(&self) -> Option<String> {
        self.end.borrow().clone()
    }

    /// Whether the session has ended.
    pub fn ended(&self) -> bool {
        self.end.borrow().is_some()
    }

    /// A grant of `fence` on this session, carrying both signals.
    pub fn grant(
        &self,
        fence: crate::FenceToken,
        sent: std::time::Instant,
        store: &'static str,
    ) -> crate::store::Grant {
        let mut end = self.end.clone();
        crate::store::Grant::new(fence, sent)
            .with_session_end(Box::pin(async move {
                match end.wait_for(|e| e.is_some()).await {
                    Ok(e) => e.clone().unwrap_or_default(),
                    Err(_) => format!("the {store} session was closed"),
                }
            }))
            .with_session_live(self.live.clone())
    }
}
