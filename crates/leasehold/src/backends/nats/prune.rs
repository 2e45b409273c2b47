//! Forgetting keys past the horizon (`crate::horizon`, `docs/design.md` §4.6): the grants'
//! bucket (history 1, no `max_age`) keeps each key's last record, a release marker or the
//! grant of a holder that died, until this task purges it.
//!
//! A round walks the grants' stream from a cursor with an ephemeral pull consumer (history
//! 1: the stream holds exactly one message per key, markers included, each with the
//! server's timestamp), deletes the consumer, and then purges a key's record when
//!
//! - the server stamped it more than the horizon `H` before the consumer's creation (the
//!   server's clock now), and
//! - it is a marker (a release's `DEL`, a `PURGE`), or a grant whose holder's heartbeat is
//!   gone: ended by a contender, or expired by its bucket's `max_age` and then ended by this
//!   task as a contender ends it (a `DEL` expecting no heartbeat, refused if one is there,
//!   so a stale read is never acted on). A grant whose heartbeat is alive, and a value
//!   leasehold did not write, are never touched.
//!
//! The purge is JetStream's stream purge on the key's subject up to and including the
//! examined sequence (`{"filter": SUBJECT, "seq": examined + 1}`), never a KV `PURGE` (which
//! leaves a marker behind): a grant written after the examination has a higher sequence and
//! is kept. The buckets are made with `deny_delete` (no single-message delete), which does
//! not refuse a purge (`deny_purge` is separate and off).
//!
//! Why the next fence is still larger: the record's stamp is at or after the last grant's
//! heartbeat stamp `c`, whose fence was at most `c + L` (§4.6); the next grant's fence is at
//! least its own heartbeat's stamp, more than `H` later on the server's clock, so fences grow
//! under [`crate::horizon::HORIZON_ASSUMPTION`].

use std::time::Duration;

use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, pull};
use futures_util::StreamExt;

use super::NatsStore;
use super::record::{KV_OPERATION, Record};
use super::request::nats_err;
use crate::Result;

/// Messages fetched per request of the walk.
const BATCH: usize = 256;

/// How long one fetch waits for the messages it asked for (fewer arrive only when records
/// were purged since the walk began).
const FETCH_WAIT: Duration = Duration::from_millis(500);

/// Purges (and heartbeat checks) in flight at once.
const IN_FLIGHT: usize = 32;

/// Messages one round examines at most: the rest waits for the next round (the cursor).
pub(super) const EXAMINE: u64 = 10_000;

/// The longest one round may take, whatever the server does.
const ROUND_LIMIT: Duration = Duration::from_secs(60);

/// What one round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Round {
    /// Keys' records examined.
    pub examined: u64,
    /// Records purged.
    pub purged: u64,
    /// Where the next round starts: the stream sequence after the last examined, or 0 (the
    /// start) once this round reached the end of the stream.
    pub next: u64,
}

impl NatsStore {
    /// Purges `subject`'s messages up to and including sequence `seq` in the grants' stream:
    /// the record examined there, never one written after it. Returns how many went (0 when
    /// the subject has moved on or is already empty).
    pub(super) async fn purge_through(&self, subject: &str, seq: u64) -> Result<u64> {
        let purge = async {
            let r = self.grants.stream.purge().filter(subject).sequence(seq + 1).await;
            r.map(|r| r.purged).map_err(|e| nats_err("purge", e))
        };
        self.bounded("purge", true, purge).await
    }

    /// Whether `old`, stamped before the cutoff, may be purged: a marker, or a grant whose
    /// holder is gone.
    async fn forgettable(&self, old: &Old) -> Result<bool> {
        match &old.record {
            Kind::Marker => Ok(true),
            Kind::Grant(record) => self.holder_gone(record).await,
            Kind::Foreign => Ok(false),
        }
    }

    /// One round from stream sequence `from` (0: the start), forgetting records stamped more
    /// than `horizon` ago by the server's clock (see the module docs). Examines at most
    /// [`EXAMINE`] records, each request bounded by the op timeout and the round by a minute.
    pub(super) async fn prune_round(&self, horizon: Duration, from: u64) -> Result<Round> {
        let round = async {
            // The walk ends before the purges start: with purges made during the walk, its
            // consumer delivered nothing more (seen on NATS 2.9 with 3,000 keys).
            let (old, mut round) = self.walk(horizon, from).await?;
            let mut failed = None;
            for chunk in old.chunks(IN_FLIGHT) {
                let each = chunk.iter().map(|o| async move {
                    if !self.forgettable(o).await? {
                        return Ok(0);
                    }
                    self.purge_through(&o.subject, o.seq).await
                });
                for r in futures_util::future::join_all(each).await {
                    match r {
                        Ok(n) => round.purged += n,
                        // Tried again by a later round; the others go on.
                        Err(e) => failed = Some(e),
                    }
                }
            }
            if let Some(e) = failed {
                tracing::debug!("NATS pruning: a purge failed: {e}");
            }
            Ok(round)
        };
        crate::limits::within(ROUND_LIMIT, || "NATS pruning round".into(), round).await
    }

    /// The records from `from` stamped more than `horizon` ago, read through an ephemeral
    /// pull consumer (deleted afterwards), and the round so far.
    async fn walk(&self, horizon: Duration, from: u64) -> Result<(Vec<Old>, Round)> {
        let deliver_policy = match from {
            0 => DeliverPolicy::All,
            start_sequence => DeliverPolicy::ByStartSequence { start_sequence },
        };
        let config = pull::Config {
            deliver_policy,
            ack_policy: AckPolicy::None,
            filter_subject: format!("$KV.{}.>", self.cfg.bucket),
            // The server removes it if this round dies before deleting it.
            inactive_threshold: Duration::from_secs(30),
            ..Default::default()
        };
        let stream = &self.grants.stream;
        let create = async {
            stream.create_consumer(config).await.map_err(|e| nats_err("create consumer", e))
        };
        let mut consumer = self.bounded("create consumer", false, create).await?;
        // The server's clock now: when it created the consumer.
        let created = consumer.cached_info().created;
        let name = consumer.cached_info().name.clone();
        // What the stream held for it then: the walk asks for no more, so it never waits
        // out a fetch for messages that are not there (a `run` of a short job exits within
        // milliseconds of its first round).
        let pending = consumer.cached_info().num_pending;
        let cutoff = created.unix_timestamp_nanos() - horizon.as_nanos() as i128;
        let walked = self.walk_with(&mut consumer, cutoff, from, pending).await;
        let delete =
            async { stream.delete_consumer(&name).await.map_err(|e| nats_err("delete", e)) };
        let _ = self.bounded("delete consumer", false, delete).await;
        walked
    }

    async fn walk_with(
        &self,
        consumer: &mut async_nats::jetstream::consumer::PullConsumer,
        cutoff: i128,
        from: u64,
        mut pending: u64,
    ) -> Result<(Vec<Old>, Round)> {
        let mut round = Round { next: from, ..Round::default() };
        let mut old = Vec::new();
        loop {
            let want = BATCH.min(usize::try_from(pending).unwrap_or(BATCH));
            if want == 0 {
                round.next = 0; // the walk reached the end: the next round starts over
                return Ok((old, round));
            }
            let fetch = async {
                // Ended as soon as `want` arrived, or by the server's timeout when fewer are
                // left (records purged meanwhile).
                let batch = consumer.batch().max_messages(want).expires(FETCH_WAIT);
                let batch = batch.messages().await;
                let mut batch = batch.map_err(|e| nats_err("fetch", e))?;
                let mut out = Vec::with_capacity(BATCH);
                while let Some(m) = batch.next().await {
                    let fetched = |e: async_nats::Error| format!("NATS fetch failed: {e}");
                    out.push(m.map_err(|e| crate::Error::unavailable(fetched(e), None))?);
                }
                Ok(out)
            };
            let batch = self.bounded("fetch", false, fetch).await?;
            round.examined += batch.len() as u64;
            pending = pending.saturating_sub(batch.len() as u64);
            let mut last_seq = None;
            for m in &batch {
                let Ok(info) = m.info() else { continue };
                last_seq = Some(info.stream_sequence);
                if info.published.unix_timestamp_nanos() >= cutoff {
                    continue;
                }
                let marker = m.headers.as_ref().is_some_and(|h| h.get(KV_OPERATION).is_some());
                let record = match Record::decode(&m.payload) {
                    _ if marker => Kind::Marker,
                    Some(r) => Kind::Grant(r),
                    None => Kind::Foreign,
                };
                old.push(Old { subject: m.subject.to_string(), seq: info.stream_sequence, record });
            }
            // A short batch: the server had no more.
            match last_seq {
                Some(seq) if batch.len() == want && pending > 0 => round.next = seq + 1,
                _ => {
                    round.next = 0; // the next round starts over
                    return Ok((old, round));
                }
            }
            if round.examined >= EXAMINE {
                return Ok((old, round));
            }
        }
    }
}

/// What a key's record is.
enum Kind {
    /// A release's `DEL` or a `PURGE`.
    Marker,
    /// A grant, live or not.
    Grant(Record),
    /// A value leasehold did not write: never purged.
    Foreign,
}

/// A record stamped before the round's cutoff.
struct Old {
    subject: String,
    seq: u64,
    record: Kind,
}

/// The pruning task of one store, ended when the store is dropped.
#[derive(Debug)]
pub(super) struct Pruner(tokio::task::AbortHandle);

impl Pruner {
    /// Starts the task on `store` (a handle sharing the store's connection and buckets): a
    /// round at once, then every [`crate::horizon::prune_period`], errors ignored until the next (a server that cannot be
    /// reached now is tried again then; nothing here is needed for safety).
    pub(super) fn start(store: NatsStore, horizon: Duration) -> Pruner {
        Pruner(
            tokio::spawn(async move {
                let mut from = 0;
                // The first round at once: a process that lives less than a period (a `run`
                // of a short job) still forgets what earlier processes left past the horizon.
                loop {
                    match store.prune_round(horizon, from).await {
                        Ok(r) => from = r.next,
                        Err(e) => tracing::debug!("NATS pruning round failed: {e}"),
                    }
                    tokio::time::sleep(crate::horizon::prune_period(horizon)).await;
                }
            })
            .abort_handle(),
        )
    }
}

impl Drop for Pruner {
    fn drop(&mut self) {
        self.0.abort();
    }
}
