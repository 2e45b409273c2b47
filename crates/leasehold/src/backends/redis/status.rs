//! `status` on Redis: the holders of one key or of all (SCAN), and which keys readers hold.

use std::time::Duration;

use redis::Value;

use super::{Names, Node, glob_escape, redis_err};
use crate::store::{Holder, HolderInfo};
use crate::{FenceToken, Key, OwnerToken, Result};

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
                let pattern = format!("{}{{*}}", glob_escape(&names.prefix));
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
                let pttl: i64 = redis::from_redis_value(v[1].clone()).unwrap_or(-2);
                let fence: u64 = redis::from_redis_value::<Option<u64>>(v[2].clone())
                    .ok()
                    .flatten()
                    .unwrap_or(0);
                let info: Option<String> = redis::from_redis_value(v[3].clone()).ok().flatten();
                let (Some(owner), Some(key)) = (owner, names.key_of(lk)) else { continue };
                if owner == "readers" {
                    read.push(key);
                    continue;
                }
                let Ok(owner) = owner.parse::<OwnerToken>() else { continue };
                let left = (pttl >= 0).then(|| Duration::from_millis(pttl as u64));
                out.push(
                    Holder::new(
                        key,
                        owner,
                        Some(FenceToken::new(if fenced { fence } else { 0 })),
                        left,
                    )
                    .with_info(info.as_deref().and_then(HolderInfo::decode)),
                );
            }
        }
        Ok((out, read))
    }
}
