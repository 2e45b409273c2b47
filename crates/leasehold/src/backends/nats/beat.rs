//! Heartbeats: the holder's message `OWNER` in the heartbeat bucket of its lease's TTL, whose
//! `max_age` lets the server end the lease. Each write is a compare-and-set on the subject's
//! last sequence, so a renewal and a contender's takeover (a `DEL` marker written where the
//! heartbeat was) exclude each other in the server: once a contender has ended a heartbeat,
//! its owner can never write one again, and a renewal that went first keeps the contender out.

use std::time::{Duration, SystemTime};

use async_nats::HeaderMap;
use async_nats::jetstream::kv;
use bytes::Bytes;

use super::record::{self, EXPECTED_LAST, KV_OPERATION};
use super::request::Cas;
use super::{NatsStore, open_bucket};
use crate::{OwnerToken, Result};

/// A heartbeat as the server has it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Beat {
    /// Written at `seq`, stamped `stamp` by the server, not yet expired.
    Alive { seq: u64, stamp: SystemTime },
    /// Expired by `max_age` (the subject is empty), or its bucket is gone.
    Absent,
    /// Ended by a contender's marker: its owner cannot renew any more.
    Ended,
}

impl NatsStore {
    /// The heartbeat bucket for leases of `ttl_ms`, created on first use.
    pub(super) async fn beats(&self, ttl_ms: u64) -> Result<kv::Store> {
        let mut open = self.beats.lock().await;
        if let Some(b) = open.get(&ttl_ms) {
            return Ok(b.clone());
        }
        let name = record::beat_bucket(&self.cfg.bucket, ttl_ms);
        let opening = open_bucket(&self.js, &self.cfg, &name, Duration::from_millis(ttl_ms));
        let b = self.bounded("open bucket", false, opening).await?;
        open.insert(ttl_ms, b.clone());
        Ok(b)
    }

    /// The heartbeat bucket of `ttl_ms` if it exists (a grant names it; it may have been
    /// deleted since, and then so have its heartbeats). `None` only when the server answers
    /// that its stream does not exist: any other failure to read it (a timeout, a JetStream
    /// API that does not answer, a permission refused) is an error, never "gone", since its
    /// callers would take a live holder's heartbeat for expired and end its lease.
    async fn existing_beats(&self, ttl_ms: u64) -> Result<Option<kv::Store>> {
        if let Some(b) = self.beats.lock().await.get(&ttl_ms) {
            return Ok(Some(b.clone()));
        }
        let name = record::beat_bucket(&self.cfg.bucket, ttl_ms);
        let get = async {
            match self.js.get_key_value(name.as_str()).await {
                Ok(b) => Ok(Some(b)),
                Err(e) if bucket_missing(&e) => Ok(None),
                Err(e) => Err(super::request::nats_err(&format!("open bucket {name:?}"), e)),
            }
        };
        self.bounded("open bucket", false, get).await
    }

    /// `owner`'s heartbeat in the bucket of `ttl_ms`, read from the stream's leader.
    pub(super) async fn beat(&self, owner: &OwnerToken, ttl_ms: u64) -> Result<Beat> {
        let Some(bucket) = self.existing_beats(ttl_ms).await? else {
            return Ok(Beat::Absent);
        };
        let subject = format!("{}{owner}", bucket.prefix);
        Ok(match self.last(&bucket, &subject).await? {
            None => Beat::Absent,
            Some(m) if m.headers.get(KV_OPERATION).is_some() => Beat::Ended,
            Some(m) => {
                let ns = m.time.unix_timestamp_nanos().max(0) as u64;
                Beat::Alive {
                    seq: m.sequence,
                    stamp: SystemTime::UNIX_EPOCH + Duration::from_nanos(ns),
                }
            }
        })
    }

    /// Writes `owner`'s heartbeat iff its subject's last sequence is `expected` (0: a first
    /// heartbeat, or a renewal's check that nobody ended it). When it is stored, `sent` is the
    /// instant before the send that stored it (the lease's deadline counts from there).
    pub(super) async fn write_beat(
        &self,
        owner: &OwnerToken,
        ttl_ms: u64,
        expected: u64,
        sent: &mut std::time::Instant,
    ) -> Result<Cas> {
        let bucket = self.beats(ttl_ms).await?;
        let mut h = HeaderMap::new();
        h.insert(EXPECTED_LAST, expected.to_string().as_str());
        self.publish_sent(format!("{}{owner}", bucket.prefix), h, Bytes::new(), sent).await
    }

    /// When the server stored heartbeat `seq` of the bucket of `ttl_ms`, in ns since 1970 (a
    /// publish acknowledgement carries no time, so it is read back).
    pub(super) async fn stamp(&self, ttl_ms: u64, seq: u64) -> Result<i128> {
        let bucket = self.beats(ttl_ms).await?;
        let read = async {
            bucket
                .stream
                .get_raw_message(seq)
                .await
                .map_err(|e| super::request::nats_err("read back", e))
        };
        Ok(self.bounded("read back", false, read).await?.time.unix_timestamp_nanos())
    }

    /// Whether the holder of the grant `record` is gone for good: its heartbeat was ended by
    /// a contender, or it has expired and this call ends it (a `DEL` marker expecting no
    /// heartbeat there, which the server refuses if one is: a stale read of "gone" from a
    /// deposed leader is never acted on, and no renewal of that owner applies after it).
    pub(super) async fn holder_gone(&self, record: &record::Record) -> Result<bool> {
        Ok(match self.beat(&record.owner, record.ttl_ms).await? {
            Beat::Alive { .. } => false,
            Beat::Ended => true,
            Beat::Absent => {
                matches!(self.end_beat(&record.owner, record.ttl_ms, 0).await?, Cas::Applied(_))
            }
        })
    }

    /// Ends `owner`'s heartbeat iff its subject's last sequence is `expected` (0: it expired):
    /// a `DEL` marker there, after which no renewal of that owner applies.
    pub(super) async fn end_beat(
        &self,
        owner: &OwnerToken,
        ttl_ms: u64,
        expected: u64,
    ) -> Result<Cas> {
        let Some(bucket) = self.existing_beats(ttl_ms).await? else {
            return Ok(Cas::Applied(0)); // the bucket is gone, and its heartbeats with it
        };
        let mut h = HeaderMap::new();
        h.insert(KV_OPERATION, "DEL");
        h.insert(EXPECTED_LAST, expected.to_string().as_str());
        self.publish(format!("{}{owner}", bucket.prefix), h, Bytes::new()).await
    }
}

/// Whether `e` says the bucket's stream does not exist (JetStream's "stream not found"), as
/// opposed to a failure to find out.
fn bucket_missing(e: &async_nats::jetstream::context::KeyValueError) -> bool {
    use async_nats::jetstream::ErrorCode;
    use async_nats::jetstream::context::{GetStreamError, GetStreamErrorKind, KeyValueErrorKind};
    use std::error::Error as _;
    e.kind() == KeyValueErrorKind::GetBucket
        && e.source().and_then(|s| s.downcast_ref::<GetStreamError>()).is_some_and(|g| {
            matches!(g.kind(), GetStreamErrorKind::JetStream(j)
                if j.error_code() == ErrorCode::STREAM_NOT_FOUND)
        })
}
