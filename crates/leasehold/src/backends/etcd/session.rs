//! The store's session: one etcd lease, kept alive by a background task that drives the
//! grants' admit() and lost() signals.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::client::{self, Client};
use super::{etcd_err, rpc};
use crate::Result;
use crate::backends::session::{SessionSignals, StoreSession};

/// The session's local deadline: the server expires the lease no earlier than `ttl` after it
/// applied the keepalive, itself after `sent`.
fn session_deadline(sent: Instant, ttl_secs: i64) -> Instant {
    sent + Duration::from_secs(ttl_secs.max(1) as u64).mul_f64(0.9)
}

/// One etcd lease kept alive by a background task; every key this store puts is bound to it.
pub(super) struct Session {
    pub(super) id: i64,
    pub(super) signals: SessionSignals,
    task: tokio::task::AbortHandle,
    client: Client,
}

impl Session {
    pub(super) async fn open(client: &Client, ttl_secs: i64) -> Result<Arc<Session>> {
        let sent = Instant::now();
        let grant = client.lease_grant(ttl_secs).await.map_err(|e| etcd_err("LeaseGrant", e))?;
        let (id, ttl) = (grant.id, grant.ttl);
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

    pub(super) fn ended(&self) -> bool {
        self.signals.ended()
    }
}

impl StoreSession for Session {
    fn signals(&self) -> &SessionSignals {
        &self.signals
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
            let (client, id) = (self.client.clone(), self.id);
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
            let Some(s) = stream.as_mut() else {
                // Opening the stream sends the first keepalive and reads its answer.
                let (s, first) = client.lease_keep_alive(id).await?;
                stream = Some(s);
                return Ok(first.ttl);
            };
            s.send(rpc::LeaseKeepAliveRequest { id }).await?;
            let r = s.message().await?.ok_or(client::Error::StreamEnded("lease keepalive"))?;
            Ok::<_, client::Error>(r.ttl)
        })
        .await;
        match answer {
            Ok(Ok(ttl_secs)) => {
                if ttl_secs <= 0 {
                    let _ = live.send(false);
                    let _ = end.send(Some(format!(
                        "etcd lease {id:x} expired or was revoked on the server"
                    )));
                    return;
                }
                let nd = session_deadline(sent, ttl_secs);
                if nd > deadline {
                    deadline = nd;
                }
                period = (deadline - sent) / 3;
                last_ok = sent;
                live.send_if_modified(|l| !std::mem::replace(l, true));
            }
            Ok(Err(e)) => {
                if matches!(e, client::Error::LeaseNotFound(_)) {
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
