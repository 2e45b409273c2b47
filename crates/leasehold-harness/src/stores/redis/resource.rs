//! The fenced resource on a Redis server: a value key beside leasehold's fence hash, both
//! under the store URL's prefix; a fenced write is one atomic step (no transaction to hold).

use leasehold::StoreUrl;
use leasehold::fence::Fencing;
use leasehold::fence::redis::RedisFence;
use leasehold::fence::redis::redis::{self, aio::ConnectionManager};

use crate::resource::Resource;
use crate::row::NAME;

/// The resource on one Redis server: the fence, a plain connection, and the value key.
pub struct RedisResource {
    fence: RedisFence,
    conn: ConnectionManager,
    key: String,
}

/// The value key, under the store URL's prefix.
fn value_key(prefix: &str) -> String {
    format!("{prefix}{{{NAME}}}:value")
}

impl RedisResource {
    /// Opens a `redis://` or `rediss://` URL (the lock store's own: its prefix option names
    /// the fence hash and the value key).
    pub async fn open(url: &StoreUrl) -> Self {
        use leasehold::backends::redis::tools;
        let fence = tools::fence(url).await.expect("connect resource redis");
        let key = value_key(fence.prefix());
        let client = tools::client(url).expect("redis url");
        let conn = client.get_connection_manager().await.expect("connect resource redis");
        RedisResource { fence, conn, key }
    }
}

#[async_trait::async_trait]
impl Resource for RedisResource {
    async fn claim(&mut self, fencing: &Fencing) -> leasehold::Result<()> {
        self.fence.claim(NAME, fencing).await
    }

    /// With `fencing`, only if its fence is still the installed one (one script); without, a
    /// plain `SET`.
    async fn write(&mut self, fencing: Option<&Fencing>, value: &str) -> leasehold::Result<()> {
        match fencing {
            Some(f) => self.fence.set(NAME, f, &self.key, value).await,
            None => {
                let _: () = redis::cmd("SET")
                    .arg(&self.key)
                    .arg(value)
                    .query_async(&mut self.conn)
                    .await
                    .expect("plain SET");
                Ok(())
            }
        }
    }

    async fn read(&mut self) -> Option<String> {
        redis::cmd("GET").arg(&self.key).query_async(&mut self.conn).await.expect("GET")
    }

    /// The value key and the fence hash.
    async fn remove(&mut self) -> Result<(), String> {
        let fence = self.fence.fence_key(NAME);
        redis::cmd("DEL")
            .arg(&self.key)
            .arg(fence)
            .query_async::<i64>(&mut self.conn)
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }
}
