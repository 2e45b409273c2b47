//! etcd's baselines for `leasehold bench`, on leasehold's own gRPC client (through
//! `leasehold::backends::etcd::tools`): the raw client sending the very transactions the
//! store sends (a conditional put bound to a lease, a delete compared on the create
//! revision), and etcd's own lock recipe driven through the server's Lock RPC (etcd's
//! v3lock service runs `concurrency.Mutex`, the code behind `etcdctl lock`).

use std::sync::Arc;
use std::time::Duration;

use leasehold::backends::etcd::tools::{self, Client, rpc};
use leasehold::{OwnerToken, StoreUrl};

use crate::baseline::{Baseline, HandoffBaseline, Paired, RawClient, RawError, RawHeld};

/// How long the baselines' own leases live: longer than any bench (they are not kept
/// alive; the keys on them are deleted by each release, and the leases expire after).
const LEASE_TTL_S: i64 = 3600;
/// The longest a Lock RPC waits (the bench's lease length).
const LOCK_WAIT: Duration = Duration::from_secs(30);

/// The raw client on the store's connection, with a lease of its own for the whole bench.
struct EtcdRaw {
    client: Client,
    prefix: String,
    lease: i64,
    owner: String,
    _store: Arc<leasehold::backends::etcd::EtcdStore>,
}

fn err(e: impl std::fmt::Display) -> RawError {
    e.to_string()
}

impl EtcdRaw {
    fn name(&self, key: &str) -> String {
        if self.prefix.is_empty() { key.to_owned() } else { format!("{}/{key}", self.prefix) }
    }

    /// The same client and prefix on a new lease of its own (the Lock RPC's recipe names
    /// its key after the lease, so contenders need one each).
    async fn with_own_lease(&self) -> Result<EtcdRaw, RawError> {
        let lease = self.client.lease_grant(LEASE_TTL_S).await.map_err(err)?.id;
        Ok(EtcdRaw {
            client: self.client.clone(),
            prefix: self.prefix.clone(),
            lease,
            owner: self.owner.clone(),
            _store: self._store.clone(),
        })
    }
}

/// What a raw holder releases: the lock key and its create revision.
struct RawKey(Arc<EtcdRaw>, String, i64);

/// The raw client sending leasehold's transactions.
struct Txns(Arc<EtcdRaw>);

#[async_trait::async_trait]
impl RawClient for Txns {
    async fn acquire(&self, key: &str) -> Result<Option<Box<dyn RawHeld>>, RawError> {
        use rpc::{Compare, CompareResult, RangeRequest, RequestOp, TxnRequest};
        let raw = &self.0;
        let pfx = format!("{}/", raw.name(key));
        let lock_key = format!("{pfx}{}", raw.owner);
        let first = RangeRequest {
            limit: 1,
            ..RangeRequest::prefix(pfx.as_str())
                .sorted(rpc::SortTarget::Create, rpc::SortOrder::Ascend)
        };
        let txn = TxnRequest {
            compare: vec![
                Compare::create_revision(pfx.as_str(), CompareResult::Equal, 0).with_prefix(),
            ],
            success: vec![RequestOp::put(lock_key.as_str(), raw.owner.as_str(), raw.lease)],
            failure: vec![RequestOp::range(first)],
        };
        let r = raw.client.txn(txn).await.map_err(err)?;
        let rev = r.header.map(|h| h.revision).unwrap_or(0);
        Ok(r.succeeded.then(|| Box::new(RawKey(raw.clone(), lock_key, rev)) as Box<dyn RawHeld>))
    }
}

#[async_trait::async_trait]
impl RawHeld for RawKey {
    async fn release(self: Box<Self>) -> Result<(), RawError> {
        use rpc::{Compare, CompareResult, RequestOp, TxnRequest};
        let RawKey(raw, lock_key, rev) = *self;
        let txn = TxnRequest {
            compare: vec![Compare::create_revision(lock_key.as_str(), CompareResult::Equal, rev)],
            success: vec![RequestOp::delete(lock_key.as_str())],
            failure: vec![],
        };
        let r = raw.client.txn(txn).await.map_err(err)?;
        if r.succeeded { Ok(()) } else { Err("raw release found the key not ours".into()) }
    }
}

/// etcd's Lock RPC on a lease of its own.
struct LockRpc(Arc<EtcdRaw>);

/// A key the Lock RPC granted: its lock key, for Unlock.
struct Locked(Arc<EtcdRaw>, Vec<u8>);

#[async_trait::async_trait]
impl RawClient for LockRpc {
    async fn acquire(&self, key: &str) -> Result<Option<Box<dyn RawHeld>>, RawError> {
        self.acquire_within(key, Duration::ZERO).await
    }

    /// The Lock RPC waits in the server; bounded by `wait`, at least the bench's lease length.
    async fn acquire_within(
        &self,
        key: &str,
        wait: Duration,
    ) -> Result<Option<Box<dyn RawHeld>>, RawError> {
        let lock = self.0.client.lock(self.0.name(key), self.0.lease);
        match tokio::time::timeout(wait.max(LOCK_WAIT), lock).await {
            Ok(Ok(r)) => Ok(Some(Box::new(Locked(self.0.clone(), r.key)))),
            Ok(Err(e)) => Err(err(e)),
            Err(_) => Ok(None),
        }
    }
}

#[async_trait::async_trait]
impl RawHeld for Locked {
    async fn release(self: Box<Self>) -> Result<(), RawError> {
        let Locked(raw, key) = *self;
        raw.client.unlock(key).await.map(drop).map_err(err)
    }
}

/// The raw client on the store `url` names, opened as leasehold opens it.
async fn connect(url: &StoreUrl) -> Result<EtcdRaw, RawError> {
    let store = tools::connect(url).await.map_err(err)?;
    let client = tools::client(&store);
    let lease = client.lease_grant(LEASE_TTL_S).await.map_err(err)?.id;
    let owner = OwnerToken::generate().map_err(err)?.to_string();
    Ok(EtcdRaw { prefix: store.prefix().to_owned(), client, lease, owner, _store: Arc::new(store) })
}

/// The uncontended baselines: the raw client sending leasehold's transactions, and the
/// Lock RPC.
pub async fn baselines(url: &StoreUrl) -> Result<Vec<Baseline>, String> {
    let raw = connect(url).await?;
    let rpc = raw.with_own_lease().await?;
    Ok(vec![
        Baseline {
            label: "raw etcd gRPC client: leasehold's conditional put (bound to a lease) and create-revision delete",
            paired: Paired::Headline,
            ratio_name: None,
            client: Arc::new(Txns(Arc::new(raw))),
        },
        Baseline {
            label: "etcd's Lock RPC (server-side concurrency.Mutex, as etcdctl lock) + Unlock",
            paired: Paired::No,
            ratio_name: None,
            client: Arc::new(LockRpc(Arc::new(rpc))),
        },
    ])
}

/// The handoff baseline: the Lock RPC, one lease per task.
pub async fn handoff_baselines(
    url: &StoreUrl,
    tasks: usize,
) -> Result<Vec<HandoffBaseline>, String> {
    let raw = connect(url).await?;
    let mut clients: Vec<Arc<dyn RawClient>> = Vec::new();
    for _ in 0..tasks {
        clients.push(Arc::new(LockRpc(Arc::new(raw.with_own_lease().await?))));
    }
    Ok(vec![HandoffBaseline {
        label: "etcd's Lock RPC (server-side concurrency.Mutex, as etcdctl lock), one lease per task",
        clients,
        peer: false,
        requests: &[],
    }])
}
