//! How one request reaches JetStream: each bounded by the op timeout (an unanswered write is
//! an unknown outcome, an unanswered read an outage), a publish sent again while no stream
//! answers, a compare-and-set's conflict told from its failure, and NATS errors mapped to
//! leasehold's.

use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use async_nats::jetstream::{self, kv, stream::LastRawMessageErrorKind};
use bytes::Bytes;

use super::NatsStore;
use crate::{Error, Result};

/// A NATS error as leasehold's: refused credentials are configuration, the rest an outage.
pub(super) fn nats_err(what: &str, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    let msg = format!("NATS {what} failed: {e}");
    let text = e.to_string().to_ascii_lowercase();
    if text.contains("authorization") || text.contains("authentication") {
        Error::config(msg, Some(Box::new(e)))
    } else {
        Error::unavailable(msg, Some(Box::new(e)))
    }
}

/// The outcome of a compare-and-set.
pub(super) enum Cas {
    /// Applied, at this revision.
    Applied(u64),
    /// The key's last sequence was another: someone else wrote first.
    Conflict,
}

impl NatsStore {
    /// `fut`, answered within the op timeout, else [`Error::UnknownOutcome`] for a write and
    /// [`Error::Unavailable`] for a read.
    pub(super) async fn bounded<T>(
        &self,
        what: &str,
        write: bool,
        fut: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        let limit = self.op_timeout();
        match tokio::time::timeout(limit, fut).await {
            Ok(r) => r,
            Err(_) if write => {
                Err(Error::UnknownOutcome(format!("NATS {what} got no answer within {limit:?}")))
            }
            Err(_) => {
                Err(Error::unavailable(format!("NATS {what} got no answer within {limit:?}"), None))
            }
        }
    }

    /// The last message on `subject` in `bucket`, read from the stream's leader.
    pub(super) async fn last(
        &self,
        bucket: &kv::Store,
        subject: &str,
    ) -> Result<Option<jetstream::message::StreamMessage>> {
        let read = async {
            match bucket.stream.get_last_raw_message_by_subject(subject).await {
                Ok(m) => Ok(Some(m)),
                Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
                Err(e) => Err(nats_err("read", e)),
            }
        };
        self.bounded("read", false, read).await
    }

    /// Publishes `payload` on `subject` with `headers`; the server's answer is the sequence.
    ///
    /// "No responders" (no stream took the message: a cluster's routes or the stream's leader
    /// coming back) means nothing was stored, so it is sent again until the op timeout.
    pub(super) async fn publish(
        &self,
        subject: String,
        headers: HeaderMap,
        payload: Bytes,
    ) -> Result<Cas> {
        self.publish_sent(subject, headers, payload, &mut Instant::now()).await
    }

    /// [`NatsStore::publish`], setting `sent` to the instant before the send that was stored:
    /// a send answered "no responders" stored nothing, so a heartbeat's server-side expiry
    /// counts from the send that is retried after it, never from an earlier one.
    pub(super) async fn publish_sent(
        &self,
        subject: String,
        headers: HeaderMap,
        payload: Bytes,
        sent: &mut Instant,
    ) -> Result<Cas> {
        use async_nats::jetstream::context::PublishErrorKind;
        let write = async {
            loop {
                let at = Instant::now();
                let ack = self
                    .js
                    .publish_with_headers(subject.clone(), headers.clone(), payload.clone())
                    .await
                    .map_err(|e| nats_err("publish", e))?;
                return match ack.await {
                    Ok(a) => {
                        *sent = at;
                        Ok(Cas::Applied(a.sequence))
                    }
                    Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => Ok(Cas::Conflict),
                    Err(e) if e.kind() == PublishErrorKind::StreamNotFound => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                    Err(e) if e.kind() == PublishErrorKind::TimedOut => Err(Error::UnknownOutcome(
                        format!("NATS publish got no acknowledgement: {e}"),
                    )),
                    Err(e) => Err(nats_err("publish", e)),
                };
            }
        };
        self.bounded("publish", true, write).await
    }
}
