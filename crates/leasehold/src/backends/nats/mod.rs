//! NATS JetStream KV store:
//! `nats://[USER:PASS@]H:P[,H:P…][/BUCKET][?replicas=N&storage=file|memory&horizon=DUR]`.
//!
//! Two kinds of bucket (`docs/design.md`, "NATS JetStream KV"):
//!
//! - **the grants' bucket** `BUCKET` (default `leasehold`, history 1, no `max_age`): the key
//!   `KEY` (as a subject token, `record::token`) holds the grant: the owner token, the fence,
//!   the lease's TTL bucket and the holder's info (`nats kv get leasehold KEY` shows them).
//!   Every grant, renewal and release is a compare-and-set on the key's last sequence
//!   (`Nats-Expected-Last-Subject-Sequence`), so exactly one of two racing writers applies.
//!   A release writes a `DEL` marker (as `nats kv del`) carrying the released grant's fence.
//! - **heartbeat buckets** `BUCKET-ttl-700ms`, one per lease length (NATS 2.9 has no per-key
//!   TTL: a bucket's `max_age` expires its messages): the holder's heartbeat is the key
//!   `OWNER` there, written before each grant and renewal. The server expires it `max_age`
//!   after it was written; a grant whose heartbeat is gone has ended, and a contender may then
//!   replace it by compare-and-set. One grants' bucket for every TTL keeps one place per key,
//!   so leases of different TTLs on one key exclude each other. A TTL whose bucket cannot be
//!   made (a node of a cluster down) uses the smallest existing longer one (`fallback.rs`),
//!   such as a rung of the ladder of buckets (1 s to 1 h) made when the store opens
//!   (`ladder.rs`).
//!
//! The fence is `max(the key's last fence + 1, the server's timestamp of the grant's
//! heartbeat in µs)` (clock-backed, §4.2): the release marker and an expired grant carry the
//! last fence on, and when the chain is lost (the bucket deleted, a stream restored, a marker
//! expired or purged) the server's clock starts it above every fence issued before.
//!
//! Bounded state: a task of the store purges a key's last record once the server stamped it
//! more than the horizon ago (`horizon=`, a day by default; [`crate::horizon`]) and it is a
//! release marker or a dead holder's grant (`prune.rs`).
//!
//! Errors: a user or password the server refuses is [`Error::Config`](crate::Error::Config); a server that cannot be
//! reached, or a request that gets no answer in the op timeout, is [`Error::Unavailable`](crate::Error::Unavailable) /
//! [`Error::UnknownOutcome`](crate::Error::UnknownOutcome).

mod beat;
mod bucket;
mod config;
mod fallback;
mod ladder;
mod probe;
mod prune;
mod record;
mod request;
#[cfg(feature = "tools")]
pub mod tools;
mod watch;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use async_nats::HeaderMap;
use async_nats::jetstream::{self, kv};
use async_trait::async_trait;
use bytes::Bytes;

use self::beat::Beat;
use self::bucket::open_bucket;
use self::config::{Config, Storage, parse_url};
use self::record::{EXPECTED_LAST, FENCE_HEADER, KV_OPERATION, Record};
use self::request::{Cas, nats_err};
use super::Limits;
use super::peer::Speaks;
use crate::store::{AcquireRequest, Attempt, Grant, RenewItem, Watch};
use crate::{FenceRepeat, Guarantees, Holder, Key, LockKind, OwnerToken, Result, Store};

/// The grants' bucket's last message for one key, as leasehold reads it.
#[derive(Debug)]
enum Slot {
    /// No message: never granted, or its chain was lost (purged, bucket recreated).
    Empty,
    /// A release marker (or `nats kv del`/`purge`), with the fence it carries (0 if none).
    Released { rev: u64, fence: u64 },
    /// A grant, live or expired (its heartbeat decides).
    Granted { rev: u64, record: Record },
    /// A value leasehold did not write (`nats kv put`): busy, with no known end.
    Foreign,
}

/// A grant: its key, record and revision, and its heartbeat's last sequence (`None` once
/// expired or ended). What this store instance granted is kept, so a renewal is one request.
#[derive(Debug, Clone)]
struct Held {
    key: Key,
    rev: u64,
    record: Record,
    beat: Option<u64>,
}

/// The NATS JetStream KV store. See the module docs for the layout, expiry and fences.
pub struct NatsStore {
    cfg: Config,
    client: async_nats::Client,
    js: jetstream::Context,
    grants: kv::Store,
    /// The heartbeat buckets opened so far, by lease length in ms.
    beats: tokio::sync::Mutex<HashMap<u64, kv::Store>>,
    /// Lease lengths whose bucket could not be made, and the longer one used (`fallback.rs`).
    fallbacks: fallback::Fallbacks,
    /// The ladder's rungs opened so far (`ladder.rs`), shared with the task that opens them.
    rungs: ladder::Rungs,
    held: Mutex<HashMap<OwnerToken, Held>>,
    op_timeout_ms: AtomicU64,
    /// The task that purges keys' records past the horizon (`prune.rs`); ended on drop.
    /// `None` in the handle that task itself runs on.
    pruner: Option<prune::Pruner>,
    /// The task that makes the ladder of heartbeat buckets (`ladder.rs`); ended on drop.
    /// `None` in the handles the store's tasks run on.
    ladder: Option<ladder::Ladder>,
}

impl std::fmt::Debug for NatsStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsStore")
            .field("servers", &self.cfg.servers)
            .field("bucket", &self.cfg.bucket)
            .finish()
    }
}

impl NatsStore {
    /// Connects within [`crate::DEFAULT_CONNECT_TIMEOUT`] and opens (or creates) the grants'
    /// bucket. [`Error::Config`](crate::Error::Config) when the server refuses the user or the password,
    /// [`Error::Unavailable`](crate::Error::Unavailable) when no server answers or JetStream does not.
    pub async fn connect(url: &str) -> Result<NatsStore> {
        Self::open(&parse_url(url)?, Limits::default()).await
    }

    async fn open(cfg: &Config, limits: Limits) -> Result<NatsStore> {
        let cfg = cfg.clone();
        let mut opts = async_nats::ConnectOptions::new()
            .name("leasehold")
            .connection_timeout(limits.connect)
            .request_timeout(Some(limits.op));
        if let Some((user, pass)) = &cfg.user {
            opts = opts.user_and_password(user.clone(), pass.clone());
        }
        let what = format!("connect to {}", cfg.servers.join(","));
        let connect =
            async { opts.connect(cfg.servers.clone()).await.map_err(|e| nats_err(&what, e)) };
        // A URL at another service's port (a Redis, a PostgreSQL) is a configuration error,
        // not an outage: the NATS client only waits there for a greeting that never comes.
        let first = cfg.servers.first().and_then(|s| crate::backends::peer::host_port(s));
        let peer = first.as_ref().map(|(h, p)| (h.as_str(), *p));
        let connect = crate::backends::peer::guarded("nats", Speaks::Nats, peer, connect);
        let opened = async {
            let client = connect.await?;
            let js = jetstream::new(client.clone());
            let grants = open_bucket(&js, &cfg, &cfg.bucket, Duration::ZERO).await?;
            let mut store = NatsStore {
                cfg: cfg.clone(),
                client,
                js,
                grants,
                beats: tokio::sync::Mutex::default(),
                fallbacks: fallback::Fallbacks::default(),
                rungs: ladder::Rungs::default(),
                held: Mutex::default(),
                op_timeout_ms: AtomicU64::new(limits.op.as_millis() as u64),
                pruner: None,
                ladder: None,
            };
            store.pruner = Some(prune::Pruner::start(store.sibling(), cfg.horizon));
            // Beside the open, never before it returns: rungs are for a later outage.
            store.ladder = Some(ladder::Ladder::start(store.sibling()));
            Ok(store)
        };
        crate::limits::within(limits.connect, || format!("NATS {what}"), opened).await
    }

    /// A handle on the same connection and grants' bucket, with nothing granted and no
    /// tasks of its own: what the pruning and ladder tasks run on, so that dropping the store
    /// (which aborts the tasks) ends both.
    fn sibling(&self) -> NatsStore {
        NatsStore {
            cfg: self.cfg.clone(),
            client: self.client.clone(),
            js: self.js.clone(),
            grants: self.grants.clone(),
            beats: tokio::sync::Mutex::default(),
            fallbacks: fallback::Fallbacks::default(),
            rungs: self.rungs.clone(),
            held: Mutex::default(),
            op_timeout_ms: AtomicU64::new(self.op_timeout_ms.load(Ordering::Relaxed)),
            pruner: None,
            ladder: None,
        }
    }

    /// The grants' bucket (the URL's path; `leasehold` by default).
    pub fn bucket(&self) -> &str {
        &self.cfg.bucket
    }

    /// The subject of `key`'s grant in the grants' bucket.
    fn subject(&self, key: &Key) -> String {
        format!("$KV.{}.{}", self.cfg.bucket, record::token(key.as_str()))
    }

    fn op_timeout(&self) -> Duration {
        Duration::from_millis(self.op_timeout_ms.load(Ordering::Relaxed))
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<OwnerToken, Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The grants' bucket's view of `key`.
    async fn slot(&self, key: &Key) -> Result<Slot> {
        let Some(m) = self.last(&self.grants, &self.subject(key)).await? else {
            return Ok(Slot::Empty);
        };
        let rev = m.sequence;
        if m.headers.get(KV_OPERATION).is_some() {
            let fence = m.headers.get(FENCE_HEADER).and_then(|v| v.as_str().parse().ok());
            return Ok(Slot::Released { rev, fence: fence.unwrap_or(0) });
        }
        Ok(match Record::decode(&m.payload) {
            Some(record) => Slot::Granted { rev, record },
            None => Slot::Foreign,
        })
    }

    /// Writes `record` as `key`'s grant iff the key's last revision is still `rev`.
    async fn put_record(&self, key: &Key, rev: u64, record: &Record) -> Result<Cas> {
        let mut h = HeaderMap::new();
        h.insert(EXPECTED_LAST, rev.to_string().as_str());
        self.publish(self.subject(key), h, Bytes::from(record.encode())).await
    }

    /// The grant `owner` holds on `key` and its heartbeat's last sequence (`None` when it
    /// has expired or was ended): from this store's memory, else as the buckets say.
    async fn owned(&self, key: &Key, owner: &OwnerToken) -> Result<Option<Held>> {
        if let Some(h) = self.held().get(owner)
            && h.key == *key
        {
            return Ok(Some(h.clone()));
        }
        let Slot::Granted { rev, record } = self.slot(key).await? else { return Ok(None) };
        if record.owner != *owner {
            return Ok(None);
        }
        let beat = match self.beat(owner, record.ttl_ms).await? {
            Beat::Alive { seq, .. } => Some(seq),
            Beat::Absent | Beat::Ended => None,
        };
        Ok(Some(Held { key: key.clone(), rev, record, beat }))
    }

    /// One grant attempt: read the key; if it is free, or its holder's heartbeat has expired
    /// (then ended by a marker, so that holder can no longer renew), write this owner's
    /// heartbeat, read its stamp for the fence, and write the grant by compare-and-set on the
    /// revision read.
    async fn attempt(&self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        let ttl_ms = record::bucket_ttl_ms(req.ttl);
        let (rev, prev) = match self.slot(req.key).await? {
            Slot::Empty => (0, 0),
            Slot::Released { rev, fence } => (rev, fence),
            Slot::Foreign => return Ok(Attempt::Busy { holder_expires_in: None }),
            Slot::Granted { record, .. } if record.owner == *req.owner => {
                // Our own earlier attempt, whose answer was lost: renew it.
                let sent = Instant::now();
                let fence = record.fence_token();
                return Ok(match self.renew(req.key, req.owner, req.ttl).await? {
                    true => Attempt::Granted(Grant::new(fence, sent)),
                    false => Attempt::Busy { holder_expires_in: None },
                });
            }
            Slot::Granted { rev, record } => {
                let busy =
                    Attempt::Busy { holder_expires_in: Some(Duration::from_millis(record.ttl_ms)) };
                match self.beat(&record.owner, record.ttl_ms).await? {
                    Beat::Alive { .. } => return Ok(busy),
                    Beat::Ended => {}
                    // Expired: end it, unless its holder renewed meanwhile.
                    Beat::Absent => {
                        if let Cas::Conflict =
                            self.end_beat(&record.owner, record.ttl_ms, 0).await?
                        {
                            return Ok(busy);
                        }
                    }
                }
                (rev, record.fence)
            }
        };
        // The heartbeat bucket exists before the clock starts: creating it (a new stream, on
        // a cluster a new Raft group) can take longer than a short lease, and the server's
        // expiry counts from the heartbeat's write, not from the bucket's creation. One that
        // cannot be made (a node of the cluster down) is replaced by a longer one (fallback.rs).
        let ttl_ms = self.beats_for(ttl_ms).await?.0;
        let mut sent = Instant::now();
        let beat = match self.write_beat(req.owner, ttl_ms, 0, &mut sent).await? {
            Cas::Applied(seq) => seq,
            // This acquisition's earlier attempt left a heartbeat (its grant lost the race).
            Cas::Conflict => match self.beat(req.owner, ttl_ms).await? {
                Beat::Alive { seq, .. } => {
                    match self.write_beat(req.owner, ttl_ms, seq, &mut sent).await? {
                        Cas::Applied(seq) => seq,
                        Cas::Conflict => return Ok(Attempt::Busy { holder_expires_in: None }),
                    }
                }
                Beat::Absent | Beat::Ended => return Ok(Attempt::Busy { holder_expires_in: None }),
            },
        };
        let stamp = self.stamp(ttl_ms, beat).await?;
        let record = Record {
            owner: *req.owner,
            fence: record::next_fence(prev, stamp),
            ttl_ms,
            info: req.info.cloned(),
        };
        let mut cas = self.put_record(req.key, rev, &record).await?;
        if let Cas::Conflict = cas
            && rev != 0
            && let Slot::Empty = self.slot(req.key).await?
        {
            // The pruning task purged the record we read (a purge publishes nothing a waiter
            // would wake on): the key is free, and our fence is still above the purged one.
            cas = self.put_record(req.key, 0, &record).await?;
        }
        match cas {
            Cas::Applied(rev) => {
                let fence = record.fence_token();
                let held = Held { key: req.key.clone(), rev, record, beat: Some(beat) };
                self.held().insert(*req.owner, held);
                Ok(Attempt::Granted(Grant::new(fence, sent)))
            }
            Cas::Conflict => Ok(Attempt::Busy { holder_expires_in: None }),
        }
    }
}

#[async_trait]
impl Store for NatsStore {
    fn guarantees(&self) -> Guarantees {
        let memory = self.cfg.storage == Storage::Memory;
        Guarantees {
            backend: "nats",
            kind: LockKind::Lease,
            exclusion: "compare-and-set on the key's last sequence in the grants' bucket \
                        (Nats-Expected-Last-Subject-Sequence), one bucket for every TTL; \
                        JetStream replicates each write through its stream's Raft group before \
                        acknowledging it",
            store_failure: if memory {
                "memory storage: a restarted server has forgotten every grant, so a second \
                 holder can be granted while the first still holds; fences stay above the \
                 old ones by the server's clock"
            } else {
                "file storage: a single replica's crash can lose its last writes, a deleted or \
                 restored bucket forgets or rewinds grants: a second holder can be granted; with \
                 3 replicas the loss of one server keeps every acknowledged grant"
            },
            expiry: "the server: the holder's heartbeat message in a bucket whose max_age is \
                     the lease's TTL (rounded up to two significant digits of ms, at least \
                     100 ms), written again by each renewal",
            fence: "max(last fence + 1, the server's timestamp of the grant's heartbeat in \
                    µs), kept in the grant and carried on by the release marker",
            fence_repeat: FenceRepeat::ClockBacked,
            failure_admits_second_holder: true,
            holders_know_fence: true,
            holders_know_info: true,
            waiting: "a NATS subscription to the key's subject (each grant, renewal and \
                      release is published on it), and a timer at the holder's TTL (max_age \
                      expiry is not announced)",
            primitives: crate::Primitives {
                note: "mutex and several keys; semaphores and readers are refused in this \
                       version (one KV key holds one grant)",
                ..crate::Primitives::MUTEX
            },
        }
    }

    async fn try_acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        self.attempt(req).await
    }

    async fn acquire(&self, req: &AcquireRequest<'_>, until: Option<Instant>) -> Result<Attempt> {
        let subject = self.subject(req.key);
        crate::store::acquire_watching(self, req, until, || async {
            let w = watch::KeyWatch::subscribe(&self.client, subject).await?;
            Ok(Box::new(w) as Box<dyn Watch>)
        })
        .await
    }

    async fn renew(&self, key: &Key, owner: &OwnerToken, ttl: Duration) -> Result<bool> {
        let Some(mut held) = self.owned(key, owner).await? else { return Ok(false) };
        let Some(last) = held.beat else {
            self.held().remove(owner);
            return Ok(false); // expired, or ended by a contender
        };
        let ttl_ms = self.renewal_ttl_ms(record::bucket_ttl_ms(ttl), held.record.ttl_ms).await?;
        if ttl_ms == held.record.ttl_ms {
            // One request: a heartbeat that applies only if nobody ended the last one.
            let mut last = Some(last);
            while let Some(expected) = last.take() {
                match self.write_beat(owner, ttl_ms, expected, &mut Instant::now()).await? {
                    Cas::Applied(seq) => {
                        held.beat = Some(seq);
                        self.held().insert(*owner, held);
                        return Ok(true);
                    }
                    // Only this owner writes anything but a contender's `DEL` there: a live
                    // heartbeat at another sequence is our own renewal whose answer was lost.
                    Cas::Conflict => match self.beat(owner, ttl_ms).await? {
                        Beat::Alive { seq, .. } if seq != expected => last = Some(seq),
                        _ => {}
                    },
                }
            }
            self.held().remove(owner);
            return Ok(false);
        }
        // Another TTL: a heartbeat in its bucket, then the grant names that bucket
        // (compare-and-set, so a contender that ended the old heartbeat wins or loses whole).
        let Cas::Applied(seq) = self.write_beat(owner, ttl_ms, 0, &mut Instant::now()).await?
        else {
            return Ok(false);
        };
        let record = Record { ttl_ms, ..held.record.clone() };
        match self.put_record(key, held.rev, &record).await? {
            Cas::Applied(rev) => {
                let held = Held { key: key.clone(), rev, record, beat: Some(seq) };
                self.held().insert(*owner, held);
                Ok(true)
            }
            Cas::Conflict => {
                self.held().remove(owner);
                Ok(false)
            }
        }
    }

    /// All at once: the requests are pipelined on the one connection, so a batch costs about
    /// a renewal's two round trips, not two per lease.
    async fn renew_many(&self, items: &[RenewItem]) -> Result<Vec<bool>> {
        let each = items.iter().map(|it| self.renew(&it.key, &it.owner, it.ttl));
        futures_util::future::join_all(each).await.into_iter().collect()
    }

    async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool> {
        let Some(held) = self.owned(key, owner).await? else {
            self.held().remove(owner);
            return Ok(false);
        };
        // Still ours only if the heartbeat had neither expired nor been ended: ending it
        // ourselves says so in one request, and no renewal of it applies after.
        let ttl_ms = held.record.ttl_ms;
        let mut live = false;
        let mut last = held.beat;
        while let Some(seq) = last.take() {
            match self.end_beat(owner, ttl_ms, seq).await? {
                Cas::Applied(_) => live = true,
                // A renewal of ours in flight moved it on: end that one.
                Cas::Conflict => match self.beat(owner, ttl_ms).await? {
                    Beat::Alive { seq: now, .. } if now != seq => last = Some(now),
                    _ => {}
                },
            }
        }
        let mut rev = held.rev;
        let mut h = HeaderMap::new();
        h.insert(KV_OPERATION, "DEL");
        h.insert(FENCE_HEADER, held.record.fence.to_string().as_str());
        for _ in 0..2 {
            h.insert(EXPECTED_LAST, rev.to_string().as_str());
            match self.publish(self.subject(key), h.clone(), Bytes::new()).await? {
                Cas::Applied(_) => {
                    self.held().remove(owner);
                    return Ok(live);
                }
                // A revision this store did not see (another handle's write): read it again.
                Cas::Conflict => match self.slot(key).await? {
                    Slot::Granted { rev: now, record } if record.owner == *owner => rev = now,
                    _ => break,
                },
            }
        }
        self.held().remove(owner);
        // Replaced by a successor: after our own end of the heartbeat (a clean handover, the
        // successor's grant continuing our fence), or after it had expired (not clean).
        Ok(live)
    }

    async fn holders(&self, key: Option<&Key>) -> Result<Vec<Holder>> {
        let keys = match key {
            Some(k) => vec![k.clone()],
            None => {
                use futures_util::TryStreamExt;
                let list = async {
                    let keys = self.grants.keys().await.map_err(|e| nats_err("list keys", e))?;
                    keys.try_collect::<Vec<String>>().await.map_err(|e| nats_err("list keys", e))
                };
                let tokens = self.bounded("list keys", false, list).await?;
                let mut keys: Vec<Key> = tokens
                    .iter()
                    .filter_map(|t| record::key_of(t))
                    .filter_map(|k| Key::new(k).ok())
                    .collect();
                keys.sort();
                keys
            }
        };
        let mut out = Vec::new();
        for k in keys {
            let Slot::Granted { record, .. } = self.slot(&k).await? else { continue };
            let Beat::Alive { stamp, .. } = self.beat(&record.owner, record.ttl_ms).await? else {
                continue;
            };
            // Time left by the server's stamp, read against this host's clock.
            let end = stamp + Duration::from_millis(record.ttl_ms);
            let left = end.duration_since(SystemTime::now()).unwrap_or_default();
            let fence = Some(record.fence_token());
            out.push(Holder::new(k, record.owner, fence, Some(left)).with_info(record.info));
        }
        Ok(out)
    }

    fn set_op_timeout(&self, op_timeout: Duration) {
        self.op_timeout_ms.store(op_timeout.as_millis().max(1) as u64, Ordering::Relaxed);
    }

    async fn forget(&self, key: &Key) -> Result<()> {
        let rev = match self.slot(key).await? {
            Slot::Empty | Slot::Foreign => return Ok(()),
            Slot::Released { rev, .. } => rev,
            Slot::Granted { rev, record } => {
                if !self.holder_gone(&record).await? {
                    return Ok(()); // still held
                }
                rev
            }
        };
        // The record read, and nothing written after it (prune.rs): unlike a KV `PURGE`,
        // which leaves a marker, this leaves the subject empty.
        self.purge_through(&self.subject(key), rev).await.map(drop)
    }
}

/// `nats://H1:P1[,H2:P2…][/BUCKET][?replicas=N&storage=file|memory]`.
pub(crate) const STORE: super::Descriptor = super::Descriptor {
    form: "nats://H1:P1[,H2:P2…][/BUCKET][?replicas=1&storage=file&horizon=DUR]",
    usage: "nats://[USER:PASS@]H1:P1[,H2:P2…][/BUCKET][?replicas=1&storage=file&horizon=DUR]",
    summary: "NATS JetStream KV",
    parse: |url| super::parsed(parse_url(url)),
};

impl super::StoreConfig for Config {
    fn open(&self, limits: Limits) -> super::Boxed<'_, Result<Arc<dyn Store>>> {
        super::opened(NatsStore::open(self, limits))
    }

    fn probe<'a>(
        &'a self,
        p: &'a mut crate::probe::findings::Probe,
    ) -> super::Boxed<'a, std::result::Result<(), String>> {
        Box::pin(probe::nats(self, p))
    }
}
