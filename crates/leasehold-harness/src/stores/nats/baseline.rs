//! NATS JetStream KV's raw baselines for `leasehold bench`: raw async-nats (the library's own
//! client crate and version, through `leasehold::backends::nats::tools`) sending the requests
//! leasehold's NATS store sends for an uncontended acquire and release, and a bare
//! compare-and-set lock without the heartbeat, to show what the heartbeat costs.
//!
//! leasehold's store, uncontended (`crates/leasehold/src/backends/nats/`): acquire is four
//! round trips (read the key's last message in the grants' bucket; put the owner's heartbeat
//! in the TTL's heartbeat bucket, expected last subject sequence 0; read that heartbeat back
//! for the server's timestamp, the fence's clock; put the grant by compare-and-set on the
//! sequence read), release two (a `DEL` marker on the heartbeat at its sequence, then the
//! grant's `DEL` marker carrying its fence, at the grant's sequence).

use std::time::Duration;

use leasehold::backends::nats::tools::{self, async_nats};
use leasehold::store::{Attempt, Store};
use leasehold::{Key, OwnerToken, StoreUrl};

use async_nats::HeaderMap;
use async_nats::jetstream::{self, kv, stream::LastRawMessageErrorKind};

use crate::baseline::{Baseline, Paired, RawClient, RawError, RawHeld};

/// The lease length both contenders ask for (the bench's): it names the heartbeat bucket.
const TTL: Duration = Duration::from_secs(30);

/// A raw async-nats client on the store's own connection, with the grants' bucket and the
/// heartbeat bucket of [`TTL`] opened once.
#[derive(Clone)]
struct Raw {
    js: jetstream::Context,
    bucket: String,
    grants: kv::Store,
    /// `None`: the bare lock, no heartbeat.
    beats: Option<kv::Store>,
}

/// What a raw holder needs to release: the subjects and the sequences its writes got.
struct Held {
    raw: Raw,
    grant: String,
    rev: u64,
    fence: u64,
    beat: Option<(String, u64)>,
}

fn err(what: &str, e: impl std::fmt::Display) -> RawError {
    format!("raw NATS {what}: {e}")
}

impl Raw {
    /// Publishes `payload` on `subject` with `headers`; `Some(sequence)` when stored, `None`
    /// when the expected last subject sequence was another.
    async fn publish(
        &self,
        subject: String,
        headers: HeaderMap,
        payload: String,
    ) -> Result<Option<u64>, RawError> {
        use async_nats::jetstream::context::PublishErrorKind;
        let ack = self
            .js
            .publish_with_headers(subject, headers, payload.into())
            .await
            .map_err(|e| err("publish", e))?;
        match ack.await {
            Ok(a) => Ok(Some(a.sequence)),
            Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => Ok(None),
            Err(e) => Err(err("publish", e)),
        }
    }
}

fn expect_last(seq: u64) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(tools::EXPECTED_LAST, seq.to_string().as_str());
    h
}

#[async_trait::async_trait]
impl RawClient for Raw {
    async fn acquire(&self, key: &str) -> Result<Option<Box<dyn RawHeld>>, RawError> {
        let grant = tools::grant_subject(&self.bucket, key);
        // 1. The key's last message: none, or a release marker with the fence it carries.
        let (rev, prev) = match self.grants.stream.get_last_raw_message_by_subject(&grant).await {
            Ok(m) if m.headers.get(tools::KV_OPERATION).is_some() => {
                let fence =
                    m.headers.get(tools::FENCE_HEADER).and_then(|v| v.as_str().parse().ok());
                (m.sequence, fence.unwrap_or(0))
            }
            Ok(_) => return Ok(None), // a grant: held (the bench's keys are free)
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => (0, 0),
            Err(e) => return Err(err("read", e)),
        };
        let owner = OwnerToken::generate().map_err(|e| err("owner", e))?;
        let (fence, beat) = match &self.beats {
            Some(beats) => {
                // 2. The heartbeat, a first write on its subject; 3. its server timestamp.
                let subject = format!("{}{owner}", beats.prefix);
                let Some(seq) =
                    self.publish(subject.clone(), expect_last(0), String::new()).await?
                else {
                    return Ok(None);
                };
                let m = beats.stream.get_raw_message(seq).await.map_err(|e| err("read back", e))?;
                (tools::next_fence(prev, m.time.unix_timestamp_nanos()), Some((subject, seq)))
            }
            None => (prev + 1, None),
        };
        // 4. The grant, by compare-and-set on the sequence read.
        let value = tools::grant_value(&owner, fence, TTL);
        let Some(rev) = self.publish(grant.clone(), expect_last(rev), value).await? else {
            return Ok(None);
        };
        Ok(Some(Box::new(Held { raw: self.clone(), grant, rev, fence, beat })))
    }
}

#[async_trait::async_trait]
impl RawHeld for Held {
    async fn release(self: Box<Self>) -> Result<(), RawError> {
        if let Some((subject, seq)) = &self.beat {
            let mut h = expect_last(*seq);
            h.insert(tools::KV_OPERATION, "DEL");
            if self.raw.publish(subject.clone(), h, String::new()).await?.is_none() {
                return Err("raw NATS release: the heartbeat was no longer ours".into());
            }
        }
        let mut h = expect_last(self.rev);
        h.insert(tools::KV_OPERATION, "DEL");
        h.insert(tools::FENCE_HEADER, self.fence.to_string().as_str());
        match self.raw.publish(self.grant.clone(), h, String::new()).await? {
            Some(_) => Ok(()),
            None => Err("raw NATS release: the grant was no longer ours".into()),
        }
    }
}

/// The baselines on the store `url` names: the same requests as leasehold's store, and the
/// bare lock. Opens the store once through the library (so the grants' bucket and the
/// heartbeat bucket exist, made as leasehold makes them) and shares its connection.
pub async fn baselines(url: &StoreUrl) -> Result<Vec<Baseline>, String> {
    let store = tools::connect(url).await.map_err(|e| e.to_string())?;
    // One grant and release through the store creates the heartbeat bucket of `TTL`.
    let key = Key::new("bench-raw-setup").map_err(|e| e.to_string())?;
    let owner = OwnerToken::generate().map_err(|e| e.to_string())?;
    let req = crate::baseline::mutex_request(&key, &owner, TTL);
    match store.try_acquire(&req).await.map_err(|e| e.to_string())? {
        Attempt::Granted(_) => {
            store.release(&key, &owner).await.map_err(|e| e.to_string())?;
        }
        _ => return Err("the raw baseline's setup key bench-raw-setup is held".into()),
    }
    let js = jetstream::new(tools::client(&store));
    let bucket = store.bucket().to_owned();
    let open = |name: String| {
        let js = js.clone();
        async move { js.get_key_value(&name).await.map_err(|e| err(&format!("open {name}"), e)) }
    };
    let grants = open(bucket.clone()).await?;
    let beats = open(tools::heartbeat_bucket(&bucket, TTL).0).await?;
    let raw = Raw { js, bucket, grants, beats: Some(beats) };
    let bare = Raw { beats: None, ..raw.clone() };
    Ok(vec![
        Baseline {
            label: "raw async-nats sending leasehold's requests: read the key's last message, \
                    heartbeat put, its stamp read back, grant compare-and-set; release: \
                    heartbeat DEL, grant DEL marker (both by expected sequence)",
            paired: Paired::Headline,
            ratio_name: None,
            client: std::sync::Arc::new(raw),
        },
        Baseline {
            label: "raw async-nats, no heartbeat (no expiry: a crashed holder's key stays held): \
                    read the key's last message, grant compare-and-set; release: DEL marker",
            paired: Paired::No,
            ratio_name: None,
            client: std::sync::Arc::new(bare),
        },
    ])
}
