//! The fenced resource on etcd: one key, fenced by the lock key's create revision (no claim
//! step); its unfenced writes go through the store's own client (`leasehold/tools`).

use leasehold::StoreUrl;
use leasehold::backends::etcd::EtcdStore;
use leasehold::backends::etcd::tools::{client, rpc};
use leasehold::fence::Fencing;
use leasehold::fence::etcd::EtcdFence;

use crate::resource::Resource;

/// The resource's key.
const KEY: &str = "leasehold-test/row-1";

/// The resource on one etcd cluster: the fence and the store whose client it writes with.
pub struct EtcdResource(Box<(EtcdFence, EtcdStore)>);

impl EtcdResource {
    /// Opens an `etcd://` URL (the lock store's own).
    pub async fn open(url: &StoreUrl) -> Self {
        let store = leasehold::backends::etcd::tools::connect(url).await.expect("resource etcd");
        EtcdResource(Box::new((EtcdFence::for_store(&store), store)))
    }
}

/// No claim step: the lock key is the fence, nothing to install.
#[async_trait::async_trait]
impl Resource for EtcdResource {
    /// With `fencing`, in one transaction comparing the lock key's create revision; without,
    /// a plain PUT.
    async fn write(&mut self, fencing: Option<&Fencing>, value: &str) -> leasehold::Result<()> {
        match fencing {
            Some(f) => self.0.0.put(f, KEY, value).await,
            None => {
                let put =
                    rpc::PutRequest { key: KEY.into(), value: value.into(), ..Default::default() };
                client(&self.0.1).put(put).await.expect("plain PUT");
                Ok(())
            }
        }
    }

    async fn read(&mut self) -> Option<String> {
        client(&self.0.1)
            .range(rpc::RangeRequest::key(KEY))
            .await
            .expect("GET")
            .kvs
            .first()
            .map(|kv| String::from_utf8_lossy(&kv.value).into_owned())
    }

    /// The key.
    async fn remove(&mut self) -> Result<(), String> {
        let del = rpc::DeleteRangeRequest { key: KEY.into(), ..Default::default() };
        client(&self.0.1).delete_range(del).await.map(drop).map_err(|e| e.to_string())
    }
}
