//! Waiting for a key: a core NATS subscription to the key's subject in the grants' bucket.
//! JetStream stores what is published there, and the server also delivers each publish to
//! plain subscribers, so every grant, renewal and release (and a refused write, a spurious
//! wake-up) reaches a waiter without a JetStream consumer. A heartbeat's expiry by `max_age`
//! publishes nothing: the waiter's timer at the holder's TTL covers it (`store::acquire_watching`).

use std::time::Instant;

use async_trait::async_trait;
use futures_util::StreamExt;

use crate::store::Watch;
use crate::{Error, Result};

/// One waiter's subscription to one key's subject.
pub(super) struct KeyWatch {
    sub: async_nats::Subscriber,
}

impl KeyWatch {
    /// Subscribes, and waits until the server has the subscription (a round trip after it),
    /// so that a release published after this returns is delivered.
    pub(super) async fn subscribe(client: &async_nats::Client, subject: String) -> Result<Self> {
        let unavailable = |e: String| Error::unavailable(format!("NATS subscribe: {e}"), None);
        let sub = client.subscribe(subject).await.map_err(|e| unavailable(e.to_string()))?;
        client.flush().await.map_err(|e| unavailable(e.to_string()))?;
        Ok(KeyWatch { sub })
    }
}

#[async_trait]
impl Watch for KeyWatch {
    async fn changed(&mut self, until: Instant) {
        let until = tokio::time::Instant::from_std(until);
        // The subscription closed (the connection lost for good): let the caller retry at
        // `until` rather than spin.
        if let Ok(None) = tokio::time::timeout_at(until, self.sub.next()).await {
            tokio::time::sleep_until(until).await;
        }
    }
}
