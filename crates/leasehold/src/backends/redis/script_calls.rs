//! Redis's scripts, called: every grant attempt (the mutex's, `scripts.rs`; a reader's and a
//! semaphore slot's, `prims.rs`), a waiting writer's intent and the readers' list, each one
//! script call on a connection that routes it to the node of its first key.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;
use redis::aio::ConnectionLike;

use super::prims::{
    CLEAR_INTENT, GRANT_SHARED, NOTE_INTENT, READERS, SLOT_EPILOGUE, SLOT_PROLOGUE,
};
use super::scripts::{FORGET, GRANT};
use super::{Names, redis_err, ttl_ms};
use crate::store::{AcquireRequest, SlotOf};
use crate::{Error, FenceToken, Holder, HolderInfo, Key, Mode, OwnerToken, Result};

static SHARED: LazyLock<Script> = LazyLock::new(|| Script::new(GRANT_SHARED));
static NOTE: LazyLock<Script> = LazyLock::new(|| Script::new(NOTE_INTENT));
static CLEAR: LazyLock<Script> = LazyLock::new(|| Script::new(CLEAR_INTENT));
static PLAIN: LazyLock<Script> = LazyLock::new(|| Script::new(GRANT));
/// The mutex's grant script, wrapped by the permit check and record.
static SLOT: LazyLock<Script> =
    LazyLock::new(|| Script::new(&format!("{SLOT_PROLOGUE}{}{SLOT_EPILOGUE}", GRANT)));

static READ_READERS: LazyLock<Script> = LazyLock::new(|| Script::new(READERS));

/// `Ok(Ok(fence))` granted, `Ok(Err(wait))` busy.
pub(super) type Answer = std::result::Result<u64, Option<Duration>>;

fn answer((ok, n): (i64, i64)) -> Answer {
    if ok == 1 { Ok(n as u64) } else { Err((n >= 0).then(|| Duration::from_millis(n as u64))) }
}

/// The scripts of every grant, on a connection that routes a script to the node holding its
/// first key (a connection manager to one server or to the primary, a cluster connection).
pub(super) struct On<'a, C> {
    pub conn: C,
    pub names: &'a Names,
    /// For errors.
    pub backend: &'static str,
    /// `PUBLISH`, or `SPUBLISH` on a cluster.
    pub publish: &'static str,
}

impl<C: ConnectionLike + Clone + Send> On<'_, C> {
    /// Any fenced grant attempt: a reader's, a semaphore slot's, or the plain exclusive one.
    pub async fn grant(&self, req: &AcquireRequest<'_>) -> Result<Answer> {
        match (req.mode, req.slot) {
            (Mode::Shared, _) => self.grant_shared(req).await,
            (_, Some(slot)) => self.grant_slot(req, slot).await,
            _ => {
                let (n, k) = (self.names, req.key);
                let line = req.info.map(HolderInfo::encode).unwrap_or_default();
                let r: (i64, i64) = PLAIN
                    .key(n.lease(k))
                    .key(n.fence(k))
                    .key(n.holder(k))
                    .arg(&req.owner.hex()[..])
                    .arg(ttl_ms(req.ttl))
                    .arg(line)
                    .arg(n.horizon_ms())
                    .invoke_async(&mut self.conn.clone())
                    .await
                    .map_err(|e| redis_err(self.backend, "acquire", e))?;
                Ok(answer(r))
            }
        }
    }

    /// A reader's grant attempt.
    async fn grant_shared(&self, req: &AcquireRequest<'_>) -> Result<Answer> {
        let (n, k) = (self.names, req.key);
        let line = req.info.map(HolderInfo::encode).unwrap_or_default();
        let r: (i64, i64) = SHARED
            .key(n.lease(k))
            .key(n.fence(k))
            .key(n.readers(k))
            .key(n.intents(k))
            .arg(&req.owner.hex()[..])
            .arg(ttl_ms(req.ttl))
            .arg(line)
            .arg(n.horizon_ms())
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| redis_err(self.backend, "shared acquire", e))?;
        Ok(answer(r))
    }

    /// A semaphore slot's grant attempt: the mutex's grant, with the permit count checked
    /// and recorded in the same script. The slot's key must be `SEM#I` for the slot's
    /// semaphore and index (so its names share the permit record's hash tag); the locker
    /// always asks so, and anything else is refused as [`Error::InvalidInput`].
    async fn grant_slot(&self, req: &AcquireRequest<'_>, slot: SlotOf<'_>) -> Result<Answer> {
        let (n, k) = (self.names, req.key);
        if k.as_str() != crate::mode::slot_key(slot.semaphore.as_str(), slot.index) {
            return Err(Error::invalid(format!(
                "{:?} is not slot {} of semaphore {:?}",
                k.as_str(),
                slot.index,
                slot.semaphore.as_str()
            )));
        }
        let line = req.info.map(HolderInfo::encode).unwrap_or_default();
        let (ok, v): (i64, i64) = SLOT
            .key(n.lease(k))
            .key(n.fence(k))
            .key(n.holder(k))
            .key(n.permits(slot.semaphore))
            .arg(&req.owner.hex()[..])
            .arg(ttl_ms(req.ttl))
            .arg(line)
            .arg(n.horizon_ms())
            .arg(slot.permits)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| redis_err(self.backend, "semaphore acquire", e))?;
        if ok == 2 {
            return Err(Error::invalid(format!(
                "semaphore {:?} is held with {v} permits; this request named {}",
                slot.semaphore.as_str(),
                slot.permits
            )));
        }
        Ok(answer((ok, v)))
    }

    /// Records a refused writer's intent, for the holders' time left plus its own ttl, if
    /// readers hold the key; whether it did.
    pub async fn note_intent(
        &self,
        req: &AcquireRequest<'_>,
        left: Option<Duration>,
    ) -> Result<bool> {
        let hold = left.unwrap_or(req.ttl) + req.ttl;
        let noted: i64 = NOTE
            .key(self.names.intents(req.key))
            .key(self.names.lease(req.key))
            .arg(&req.owner.hex()[..])
            .arg(ttl_ms(hold))
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| redis_err(self.backend, "writer intent", e))?;
        Ok(noted == 1)
    }

    /// Withdraws `owner`'s intent on `key` (waking the readers it held back).
    pub async fn clear_intent(&self, key: &Key, owner: &OwnerToken) -> Result<()> {
        let _: i64 = CLEAR
            .key(self.names.intents(key))
            .arg(&owner.hex()[..])
            .arg(self.names.channel(key))
            .arg(self.publish)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| redis_err(self.backend, "writer intent", e))?;
        Ok(())
    }

    /// Forgets `key` entirely (its lease, fence counter and release tombstone): `FORGET`.
    pub async fn forget(&self, key: &Key) -> Result<()> {
        let _: i64 = Script::new(FORGET)
            .key(self.names.lease(key))
            .key(self.names.fence(key))
            .key(self.names.released_by(key))
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| redis_err(self.backend, "forget", e))?;
        Ok(())
    }

    /// The live readers of `key` as holders, in fence order, from the readers hash.
    pub async fn readers_of(&self, key: &Key) -> Result<Vec<Holder>> {
        let flat: Vec<String> = READ_READERS
            .key(self.names.readers(key))
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| redis_err(self.backend, "status", e))?;
        let mut out = Vec::new();
        for r in flat.chunks_exact(3) {
            let Ok(owner) = r[0].parse::<OwnerToken>() else { continue };
            let left = Duration::from_millis(r[1].parse().unwrap_or(0));
            let mut parts = r[2].splitn(3, ' ').skip(1);
            let fence: u64 = parts.next().and_then(|f| f.parse().ok()).unwrap_or(0);
            let info = parts.next().and_then(HolderInfo::decode);
            let h = Holder::new(key.clone(), owner, Some(FenceToken::new(fence)), Some(left));
            out.push(h.with_info(info).with_mode(Mode::Shared));
        }
        out.sort_by_key(|h| h.fence);
        Ok(out)
    }
}
