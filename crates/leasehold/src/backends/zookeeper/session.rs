//! One ZooKeeper session, and the task that follows its state into every grant's admit() and lost().

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use zookeeper_client::{Client, SessionState};

use super::config::Config;
use super::zk_err;
use crate::backends::session::{SessionSignals, StoreSession};
use crate::{Error, Result};

/// One ZooKeeper session and the task that follows its state.
pub(super) struct Session {
    /// Emptied when the session is declared lost: dropping the last client closes the session
    /// (at once, or on reconnection), so its nodes cannot outlive the verdict. Clones handed out
    /// by [`ZookeeperStore::client`] keep it open while they live.
    client: Arc<Mutex<Option<Client>>>,
    pub(super) id: i64,
    pub(super) signals: SessionSignals,
    task: tokio::task::AbortHandle,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Session({:x})", self.id)
    }
}

impl StoreSession for Session {
    fn signals(&self) -> &SessionSignals {
        &self.signals
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.task.abort();
        // Dropping the last client closes the session, which deletes its ephemeral nodes.
    }
}

impl Session {
    /// Connects within `limit`: the client alone keeps trying the hosts until the session
    /// timeout.
    pub(super) async fn open(cfg: &Config, limit: Duration) -> Result<Arc<Session>> {
        let what = || format!("connecting to zookeeper at {}", cfg.hosts);
        let connect = async {
            Client::connector()
                .with_session_timeout(cfg.session)
                .connect(&cfg.hosts)
                .await
                .map_err(|e| zk_err(&format!("connect to {}", cfg.hosts), e))
        };
        let client = crate::limits::within(limit, what, connect).await?;
        let timeout = client.session_timeout();
        let (live_tx, end_tx, signals) = SessionSignals::new();
        let states = client.state_watcher();
        let id = client.session_id().0;
        let slot = Arc::new(Mutex::new(Some(client)));
        let task = tokio::spawn(follow_state(states, timeout, live_tx, end_tx, slot.clone()))
            .abort_handle();
        Ok(Arc::new(Session { client: slot, id, signals, task }))
    }

    pub(super) fn client(&self) -> Result<Client> {
        self.client.lock().unwrap_or_else(|p| p.into_inner()).clone().ok_or_else(|| {
            Error::unavailable(
                self.signals.ended_because().unwrap_or_else(|| "zookeeper session closed".into()),
                None,
            )
        })
    }

    pub(super) fn ended(&self) -> bool {
        self.signals.ended()
    }
}

pub(super) async fn follow_state(
    mut states: zookeeper_client::StateWatcher,
    timeout: Duration,
    live: watch::Sender<bool>,
    end: watch::Sender<Option<String>>,
    client: Arc<Mutex<Option<Client>>>,
) {
    let close = || drop(client.lock().unwrap_or_else(|p| p.into_inner()).take());
    let grace = timeout.mul_f64(0.4);
    let mut state = states.state();
    loop {
        match state {
            SessionState::SyncConnected => {
                live.send_if_modified(|l| !std::mem::replace(l, true));
                state = states.changed().await;
            }
            SessionState::Disconnected | SessionState::ConnectedReadOnly => {
                let _ = live.send(false);
                let since = Instant::now();
                tracing::warn!("zookeeper connection lost; the session may still be alive");
                match tokio::time::timeout(grace, states.changed()).await {
                    Ok(s) => state = s,
                    Err(_) => {
                        let _ = end.send(Some(format!(
                            "the zookeeper client has been disconnected for {:?} (0.4 × the \
                             {timeout:?} session timeout): the server may expire the session",
                            since.elapsed()
                        )));
                        close();
                        return;
                    }
                }
            }
            other => {
                let _ = live.send(false);
                let _ = end.send(Some(format!("zookeeper session ended: {other}")));
                close();
                return;
            }
        }
    }
}
