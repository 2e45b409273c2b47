//! A contender's place in a lock's queue: the put that takes it (in a task of its own), what
//! undoes it when no grant is handed out, and the waiter's watch on its predecessor.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::client::{self, Client};
use super::rpc::{
    Compare, CompareResult, EventType, FilterType, KeyValue, RangeRequest, RequestOp,
    ResponseHeader, ResponseOp, TxnRequest, TxnResponse, WatchCreateRequest,
};
use super::{EtcdStore, etcd_err, parse_value, range, retry, txn};
use crate::backends::session::Undoing;
use crate::{Error, OwnerToken, Result};

type PutTask = tokio::task::JoinHandle<client::Result<TxnResponse>>;

/// The request that may put our key, run in a task of its own (a dropped request may still be
/// applied), and what removes the key if the acquire does not hand out a grant: after the
/// request has settled, a delete of that key as put (compared on its create revision once
/// known, else on its owner). Disarmed when the grant is handed out or the key is known absent.
pub(super) struct PutGuard {
    task: Option<PutTask>,
    armed: Option<Armed>,
}

/// What removes a key of ours that no grant was handed out for.
struct Armed {
    client: Client,
    undoing: Arc<Undoing>,
    /// The lock's name, which a release in this process waits on while we undo.
    name: String,
    lock_key: String,
    owner: String,
    /// Our key's create revision, once the put is known to have made it: the delete then
    /// cannot reach a later put of the same key (the same owner waiting on a new session).
    rev: Option<i64>,
}

impl Armed {
    async fn undo(&self) -> Result<()> {
        match self.rev {
            Some(rev) => delete_exact(&self.client, &self.lock_key, rev).await,
            None => delete_if_value(&self.client, &self.lock_key, &self.owner).await.map(drop),
        }
    }
}

impl PutGuard {
    pub(super) fn spawn(
        store: &EtcdStore,
        txn: TxnRequest,
        name: &str,
        lock_key: &str,
        owner: &OwnerToken,
    ) -> Self {
        let client = store.client.clone();
        let task = tokio::spawn(async move { self::txn(&client, txn).await });
        PutGuard {
            task: Some(task),
            armed: Some(Armed {
                client: store.client.clone(),
                undoing: store.core.undoing.clone(),
                name: name.to_owned(),
                lock_key: lock_key.to_owned(),
                owner: owner.to_string(),
                rev: None,
            }),
        }
    }

    /// The put request's answer: `Err(why)` inside when the session's etcd lease was gone
    /// (nothing was put).
    pub(super) async fn outcome(&mut self) -> Result<std::result::Result<TxnResponse, String>> {
        let task = self.task.as_mut().expect("awaited once");
        let r = task.await;
        self.task = None;
        match r {
            Ok(Ok(resp)) => Ok(Ok(resp)),
            Ok(Err(e)) if lease_gone(&e) => {
                self.disarm();
                Ok(Err(format!("etcd refused the put: {e}")))
            }
            Ok(Err(e)) => Err(etcd_err("txn", e)),
            Err(e) => Err(Error::UnknownOutcome(format!("etcd put task failed: {e}"))),
        }
    }

    /// Our key exists with create revision `rev`: undo only that key.
    pub(super) fn put_at(&mut self, rev: i64) {
        if let Some(a) = self.armed.as_mut() {
            a.rev = Some(rev);
        }
    }

    /// The key is ours for good (granted) or was never put.
    pub(super) fn disarm(&mut self) {
        self.armed = None;
    }

    /// Removes the key now, before the caller goes on.
    pub(super) async fn undo_now(&mut self) -> Result<()> {
        let Some(armed) = self.armed.take() else { return Ok(()) };
        let r = armed.undo().await;
        if r.is_err() {
            // Put it back so Drop retries in the background.
            self.armed = Some(armed);
        }
        r
    }

    /// Removes our key (its create revision known) before a new session puts it again, so no
    /// undo of this place can run after that put. On an error the key is left to the old
    /// session's lease, which the server expires.
    pub(super) async fn undo_before_retry(&mut self) {
        if let Some(armed) = self.armed.take()
            && armed.rev.is_some()
            && let Err(e) = armed.undo().await
        {
            tracing::warn!("removing etcd key {} of an ended session failed: {e}", armed.lock_key);
        }
    }
}

impl Drop for PutGuard {
    fn drop(&mut self) {
        let Some(armed) = self.armed.take() else { return };
        let task = self.task.take();
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        // A release of this lock waits for the removal, so the key it frees cannot be taken
        // (and kept) by this abandoned place in the queue.
        armed.undoing.start(&armed.name);
        rt.spawn(async move {
            if let Some(task) = task {
                let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
            }
            for attempt in 0..10u32 {
                match armed.undo().await {
                    Ok(()) => break,
                    Err(e) => {
                        tracing::warn!(
                            "removing abandoned etcd key {} failed: {e}",
                            armed.lock_key
                        );
                        tokio::time::sleep(Duration::from_millis(100 << attempt.min(5))).await;
                    }
                }
            }
            armed.undoing.finish(&armed.name);
        });
    }
}

/// Whether etcd refused a request because the lease it named is gone (expired or revoked).
pub(super) fn lease_gone(e: &client::Error) -> bool {
    match e {
        client::Error::LeaseNotFound(_) => true,
        client::Error::Status(s) => {
            s.code() == tonic::Code::NotFound && s.message().contains("lease not found")
        }
        _ => false,
    }
}

/// Deletes `lock_key` iff its create revision is `rev` (that put of it, no later one).
async fn delete_exact(client: &Client, lock_key: &str, rev: i64) -> Result<()> {
    let req = TxnRequest {
        compare: vec![Compare::create_revision(lock_key, CompareResult::Equal, rev)],
        success: vec![RequestOp::delete(lock_key)],
        failure: vec![],
    };
    txn(client, req).await.map_err(|e| etcd_err("delete", e)).map(drop)
}

/// Deletes `lock_key` iff it exists (its name carries the owner token) and its value starts
/// with `owner` (its first line; what follows is the holder's info).
pub(super) async fn delete_if_value(client: &Client, lock_key: &str, owner: &str) -> Result<bool> {
    let look = RangeRequest::key(lock_key);
    let kvs = range(client, look).await.map_err(|e| etcd_err("get", e))?;
    let Some(kv) = kvs.first() else { return Ok(false) };
    if parse_value(&kv.value).is_none_or(|(o, _)| o.to_string() != owner) {
        return Ok(false);
    }
    // Only that key, as it was read (its create revision and value).
    let req = TxnRequest {
        compare: vec![
            Compare::create_revision(lock_key, CompareResult::Equal, kv.create_revision),
            Compare::value(lock_key, CompareResult::Equal, kv.value.clone()),
        ],
        success: vec![RequestOp::delete(lock_key)],
        failure: vec![],
    };
    let r = txn(client, req).await.map_err(|e| etcd_err("delete", e))?;
    Ok(r.succeeded)
}

pub(super) fn first_kv(r: &ResponseOp) -> Option<&KeyValue> {
    r.range().and_then(|g| g.kvs.first())
}

pub(super) fn header_rev(h: Option<&ResponseHeader>) -> Result<i64> {
    h.map(|h| h.revision)
        .ok_or_else(|| Error::unavailable("etcd answered without a response header", None))
}

/// The waiter's watch on one predecessor, seen to exist at revision `seen_at`: `true` when it
/// was deleted (or the watch ended and the caller must look again), `false` at `until`.
///
/// The watch starts at the current revision: a watch asked to start in the past is served by
/// etcd's catch-up loop, which runs every 100 ms and would add that much to every handoff. A
/// delete between `seen_at` and the watch's creation is caught by looking once more.
pub(super) async fn wait_deleted(
    client: &Client,
    key: &[u8],
    seen_at: i64,
    until: Instant,
) -> Result<bool> {
    let req = WatchCreateRequest {
        key: key.to_vec(),
        filters: vec![FilterType::Noput as i32],
        ..Default::default()
    };
    let open = retry(|| client.watch(req.clone()));
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
        if msg.canceled || msg.events.iter().any(|e| e.r#type == EventType::Delete as i32) {
            return Ok(true);
        }
        if msg.created && !checked {
            checked = true;
            let created_at = header_rev(msg.header.as_ref())?;
            if created_at != seen_at {
                // Something changed in between: is the predecessor still there?
                let look = RangeRequest { keys_only: true, ..RangeRequest::key(key) };
                let kvs = range(client, look).await.map_err(|e| etcd_err("get", e))?;
                if kvs.is_empty() {
                    return Ok(true);
                }
            }
        }
    }
}
