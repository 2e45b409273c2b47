//! What the session stores share: the keys whose abandoned requests are still being undone
//! (PostgreSQL and MySQL session locks), and the two signals of a store-side session (etcd,
//! ZooKeeper).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

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
            *self.keys.lock().unwrap_or_else(|p| p.into_inner()).entry(name.to_owned()).or_default() +=
                1;
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
