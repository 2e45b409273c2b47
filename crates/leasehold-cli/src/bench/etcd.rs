//! The etcd baselines: the raw gRPC client sending leasehold's conditional put and create-revision delete, and etcd's own Lock RPC.

use super::{BenchResult, Contender, TTL};
use leasehold::OwnerToken;
use leasehold::backends::etcd::tools::{Client as EtcdClient, rpc as etcd_rpc};
use std::sync::Arc;
use std::time::Duration;

/// leasehold's raw etcd client on the same connection, sending the requests leasehold's etcd
/// store sends: a conditional put bound to a lease (kept for the whole run) and a delete
/// compared on the create revision.
#[derive(Clone)]
pub(super) struct EtcdRaw {
    client: EtcdClient,
    prefix: String,
    lease: i64,
    owner: String,
    _store: Arc<leasehold::backends::etcd::EtcdStore>,
}

impl EtcdRaw {
    pub(super) async fn connect(url: &leasehold::StoreUrl) -> BenchResult<Self> {
        let store =
            leasehold::backends::etcd::tools::connect(url).await.map_err(|e| e.to_string())?;
        let client = leasehold::backends::etcd::tools::client(&store);
        let lease = client.lease_grant(60).await.map_err(|e| e.to_string())?.id;
        let owner = OwnerToken::generate().map_err(|e| e.to_string())?.to_string();
        Ok(EtcdRaw {
            prefix: store.prefix().to_owned(),
            client,
            lease,
            owner,
            _store: Arc::new(store),
        })
    }

    fn name(&self, key: &str) -> String {
        if self.prefix.is_empty() { key.to_owned() } else { format!("{}/{key}", self.prefix) }
    }
}

impl Contender for EtcdRaw {
    type Guard = (String, i64);
    async fn acquire(&self, key: &str, _wait: Duration) -> BenchResult<Option<Self::Guard>> {
        use etcd_rpc::{Compare, CompareResult, RangeRequest, RequestOp, TxnRequest};
        let pfx = format!("{}/", self.name(key));
        let lock_key = format!("{pfx}{}", self.owner);
        let first = RangeRequest {
            limit: 1,
            ..RangeRequest::prefix(pfx.as_str())
                .sorted(etcd_rpc::SortTarget::Create, etcd_rpc::SortOrder::Ascend)
        };
        let txn = TxnRequest {
            compare: vec![
                Compare::create_revision(pfx.as_str(), CompareResult::Equal, 0).with_prefix(),
            ],
            success: vec![RequestOp::put(lock_key.as_str(), self.owner.as_str(), self.lease)],
            failure: vec![RequestOp::range(first)],
        };
        let r = self.client.txn(txn).await.map_err(|e| e.to_string())?;
        let rev = r.header.map(|h| h.revision).unwrap_or(0);
        Ok(r.succeeded.then_some((lock_key, rev)))
    }
    async fn release(&self, (lock_key, rev): Self::Guard) -> BenchResult<()> {
        use etcd_rpc::{Compare, CompareResult, RequestOp, TxnRequest};
        let txn = TxnRequest {
            compare: vec![Compare::create_revision(lock_key.as_str(), CompareResult::Equal, rev)],
            success: vec![RequestOp::delete(lock_key.as_str())],
            failure: vec![],
        };
        let r = self.client.txn(txn).await.map_err(|e| e.to_string())?;
        if r.succeeded { Ok(()) } else { Err("raw release found the key not ours".into()) }
    }
}

/// etcd's own lock recipe, driven through the server's Lock RPC (etcd's v3lock service runs
/// `concurrency.Mutex`, the code behind `etcdctl lock`), on a lease of its own kept for the run
/// (the recipe names its key after the lease: contenders need one each).
#[derive(Clone)]
pub(super) struct EtcdLockRpc(EtcdRaw);

impl EtcdLockRpc {
    pub(super) async fn new(raw: &EtcdRaw) -> BenchResult<Self> {
        let mut raw = raw.clone();
        raw.lease = raw.client.lease_grant(60).await.map_err(|e| e.to_string())?.id;
        Ok(EtcdLockRpc(raw))
    }
}

impl Contender for EtcdLockRpc {
    type Guard = Vec<u8>;
    async fn acquire(&self, key: &str, wait: Duration) -> BenchResult<Option<Vec<u8>>> {
        let lock = self.0.client.lock(self.0.name(key), self.0.lease);
        match tokio::time::timeout(wait.max(TTL), lock).await {
            Ok(Ok(r)) => Ok(Some(r.key)),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Ok(None),
        }
    }
    async fn release(&self, key: Vec<u8>) -> BenchResult<()> {
        self.0.client.unlock(key).await.map(|_| ()).map_err(|e| e.to_string())
    }
}
