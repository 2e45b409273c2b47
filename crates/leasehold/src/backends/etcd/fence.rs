//! etcd-stored resources fenced by etcd itself: a transaction that applies its operations
//! only if the holder's lock key still exists with the create revision the grant's fence
//! names.
//!
//! No claim step is needed: the comparison is on the lock itself, in the same transaction as
//! the effect. Once the holder's key is gone (released, or its session's lease expired) or a
//! different grant stands in its place, the transaction refuses. A key created later cannot
//! take over an earlier revision, so the check cannot be fooled by a successor.
//!
//! ```no_run
//! # async fn demo(store: &leasehold::backends::etcd::EtcdStore, fencing: leasehold::fence::Fencing) -> leasehold::Result<()> {
//! use leasehold::fence::etcd::EtcdFence;
//! let res = EtcdFence::for_store(store);
//! res.put(&fencing, "config/primary", "node-7").await?; // refused once the grant has ended
//! # Ok(()) }
//! ```

use crate::backends::etcd::EtcdStore;
use crate::backends::etcd::client::Client;
use crate::backends::etcd::rpc::{
    Compare, CompareResult, RangeRequest, RequestOp, TxnRequest, TxnResponse,
};
use crate::fence::{Fencing, require_token};
use crate::{Error, FenceToken, Result};

/// Applies etcd operations only while a given grant still holds its lock.
#[derive(Clone)]
pub struct EtcdFence {
    client: Client,
    prefix: String,
}

impl std::fmt::Debug for EtcdFence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdFence").field("prefix", &self.prefix).finish()
    }
}

impl EtcdFence {
    /// Fenced effects on the store's own cluster, with its lock prefix.
    pub fn for_store(store: &EtcdStore) -> Self {
        EtcdFence { client: store.client(), prefix: store.prefix().to_owned() }
    }

    /// The etcd key holding `fencing`'s grant.
    pub fn lock_key(&self, fencing: &Fencing) -> String {
        super::lock_key_in(&self.prefix, fencing.key(), &fencing.owner())
    }

    /// The comparison every fenced transaction starts with: the grant's key still exists with
    /// the fence as its create revision. Add it to transactions of your own.
    pub fn compare(&self, fencing: &Fencing) -> Compare {
        let rev = i64::try_from(fencing.token().get()).unwrap_or(i64::MAX);
        Compare::create_revision(self.lock_key(fencing), CompareResult::Equal, rev)
    }

    /// Runs `ops` iff the grant still holds its lock; [`Error::StaleFence`] otherwise.
    pub async fn txn(&self, fencing: &Fencing, ops: Vec<RequestOp>) -> Result<TxnResponse> {
        require_token("etcd", fencing)?;
        let lock_key = self.lock_key(fencing);
        let req = TxnRequest {
            compare: vec![self.compare(fencing)],
            success: ops,
            failure: vec![RequestOp::range(RangeRequest::key(lock_key.as_str()))],
        };
        let r = self.client.txn(req).await.map_err(|e| {
            Error::unavailable(format!("etcd fenced txn failed: {e}"), Some(Box::new(e)))
        })?;
        if r.succeeded {
            return Ok(r);
        }
        // The lock key's create revision is its fence: another one means another grant.
        let installed = r
            .responses
            .first()
            .and_then(|op| op.range())
            .and_then(|g| g.kvs.first())
            .map(|kv| FenceToken::new(kv.create_revision as u64));
        Err(Error::StaleFence {
            resource: lock_key,
            presented: fencing.token(),
            installed,
            reason: crate::error::StaleReason::GrantGone,
        })
    }

    /// `PUT key value` iff the grant still holds its lock.
    pub async fn put(&self, fencing: &Fencing, key: &str, value: &str) -> Result<()> {
        self.txn(fencing, vec![RequestOp::put(key, value, 0)]).await.map(|_| ())
    }

    /// `DELETE key` iff the grant still holds its lock.
    pub async fn delete(&self, fencing: &Fencing, key: &str) -> Result<()> {
        self.txn(fencing, vec![RequestOp::delete(key)]).await.map(|_| ())
    }
}
