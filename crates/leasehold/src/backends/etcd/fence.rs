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
use crate::backends::etcd::rpc::{Compare, CompareResult, RangeRequest, RequestOp, TxnRequest};
use crate::fence::Fencing;
use crate::fence::claim::require_token;
use crate::{Error, FenceToken, Result};

/// The condition every fenced transaction starts with, to add to transactions of your own
/// (with your etcd client): `key`'s create revision equals `create_revision` (the grant's
/// key still exists, and is the grant's).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockCondition {
    /// The etcd key holding the grant.
    pub key: String,
    /// Its create revision: the grant's fence.
    pub create_revision: i64,
}

/// One effect of a fenced transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Op {
    /// `PUT key value`.
    Put {
        /// The key written.
        key: String,
        /// Its new value.
        value: Vec<u8>,
    },
    /// `DELETE key`.
    Delete {
        /// The key removed.
        key: String,
    },
}

impl Op {
    fn request(self) -> RequestOp {
        match self {
            Op::Put { key, value } => RequestOp::put(key, value, 0),
            Op::Delete { key } => RequestOp::delete(key),
        }
    }
}

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
        crate::backends::etcd::lock_key_in(&self.prefix, fencing.key(), &fencing.owner())
    }

    /// The condition every fenced transaction starts with: the grant's key still exists with
    /// the fence as its create revision. Add it to transactions of your own.
    pub fn condition(&self, fencing: &Fencing) -> LockCondition {
        let create_revision = fencing.token().as_i64();
        LockCondition { key: self.lock_key(fencing), create_revision }
    }

    /// Runs `ops` iff the grant still holds its lock; [`Error::StaleFence`] otherwise.
    pub async fn txn(&self, fencing: &Fencing, ops: Vec<Op>) -> Result<()> {
        require_token("etcd", fencing)?;
        let LockCondition { key: lock_key, create_revision } = self.condition(fencing);
        let compare =
            Compare::create_revision(lock_key.as_str(), CompareResult::Equal, create_revision);
        let req = TxnRequest {
            compare: vec![compare],
            success: ops.into_iter().map(Op::request).collect(),
            failure: vec![RequestOp::range(RangeRequest::key(lock_key.as_str()))],
        };
        let r = self.client.txn(req).await.map_err(|e| {
            Error::unavailable(format!("etcd fenced txn failed: {e}"), Some(Box::new(e)))
        })?;
        if r.succeeded {
            return Ok(());
        }
        // The lock key's create revision is its fence: another one means another grant.
        let installed = r
            .responses
            .first()
            .and_then(|op| op.range())
            .and_then(|g| g.kvs.first())
            .map(|kv| FenceToken::from_i64(kv.create_revision));
        Err(Error::StaleFence {
            resource: lock_key,
            presented: fencing.token(),
            installed,
            reason: crate::error::StaleReason::GrantGone,
        })
    }

    /// `PUT key value` iff the grant still holds its lock.
    pub async fn put(&self, fencing: &Fencing, key: &str, value: &str) -> Result<()> {
        let op = Op::Put { key: key.to_owned(), value: value.as_bytes().to_vec() };
        self.txn(fencing, vec![op]).await
    }

    /// `DELETE key` iff the grant still holds its lock.
    pub async fn delete(&self, fencing: &Fencing, key: &str) -> Result<()> {
        self.txn(fencing, vec![Op::Delete { key: key.to_owned() }]).await
    }
}
