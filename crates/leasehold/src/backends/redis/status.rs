//! `status` on Redis: the holders of one key or of all (SCAN of the lease names, plain and
//! slots', [`Names::lease_pattern`]), and the readers of the keys readers hold; a holder read
//! from its lease's keys (shared with the cluster form).

use std::time::Duration;

use redis::Value;

use super::{Names, Node, redis_err};
use crate::{FenceToken, Key, OwnerToken, Result};
use crate::{Holder, HolderInfo};

impl Node {
    /// The exclusive holders, and the keys held by readers (the lease marker `readers`).
    pub(super) async fn holders_and_readers(
        &self,
        names: &Names,
        key: Option<&Key>,
        fenced: bool,
    ) -> Result<(Vec<Holder>, Vec<Key>)> {
        let mut c = self.conn.clone();
        let keys: Vec<String> = match key {
            Some(k) => vec![names.lease(k)],
            None => {
                let pattern = names.lease_pattern();
                let mut found = Vec::new();
                let mut cursor = 0u64;
                loop {
                    let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(&pattern)
                        .arg("COUNT")
                        .arg(1000)
                        .query_async(&mut c)
                        .await
                        .map_err(|e| redis_err("redis", "SCAN", e))?;
                    found.extend(batch);
                    if next == 0 {
                        break;
                    }
                    cursor = next;
                }
                found.sort();
                found.dedup();
                found
            }
        };
        let (mut out, mut read) = (Vec::new(), Vec::new());
        for chunk in keys.chunks(500) {
            let mut pipe = redis::pipe();
            for lk in chunk {
                pipe.get(lk).cmd("PTTL").arg(lk).get(format!("{lk}:fence"));
                pipe.get(format!("{lk}:holder"));
            }
            let vals: Vec<Value> =
                pipe.query_async(&mut c).await.map_err(|e| redis_err("redis", "status", e))?;
            for (lk, v) in chunk.iter().zip(vals.chunks(4)) {
                let owner: Option<String> = redis::from_redis_value(v[0].clone()).ok().flatten();
                if owner.as_deref() == Some("readers") {
                    read.extend(names.key_of(lk));
                    continue;
                }
                out.extend(parse_holder(names, lk, v, fenced));
            }
        }
        Ok((out, read))
    }

    /// Every holder of a fenced form (one server, the Sentinel primary): the exclusive ones
    /// and each reader of the keys readers hold.
    pub(super) async fn holders_with_readers(
        &self,
        names: &Names,
        key: Option<&Key>,
        backend: &'static str,
    ) -> Result<Vec<Holder>> {
        let (mut out, read) = self.holders_and_readers(names, key, true).await?;
        let on = self.on(names, backend);
        for k in read {
            out.extend(on.readers_of(&k).await?);
        }
        Ok(out)
    }
}

/// The holder of lease `lk` from the answers to `GET lk`, `PTTL lk`, `GET lk:fence` and
/// `GET lk:holder` (`None`: not held, or not a lease of this prefix).
pub(super) fn parse_holder(names: &Names, lk: &str, v: &[Value], fenced: bool) -> Option<Holder> {
    let owner: Option<String> = redis::from_redis_value(v.first()?.clone()).ok().flatten();
    let pttl: i64 = redis::from_redis_value(v.get(1)?.clone()).unwrap_or(-2);
    let fence: u64 =
        redis::from_redis_value::<Option<u64>>(v.get(2)?.clone()).ok().flatten().unwrap_or(0);
    let info: Option<String> = redis::from_redis_value(v.get(3)?.clone()).ok().flatten();
    let owner = owner?.parse::<OwnerToken>().ok()?;
    let key = names.key_of(lk)?;
    let left = (pttl >= 0).then(|| Duration::from_millis(pttl as u64));
    Some(
        Holder::new(key, owner, Some(FenceToken::new(if fenced { fence } else { 0 })), left)
            .with_info(info.as_deref().and_then(HolderInfo::decode)),
    )
}
