//! What doctor reads of a NATS deployment: the server, JetStream's account, and the grants'
//! bucket's stream (replicas, storage, its Raft group's leader and peers), and which rungs of
//! the ladder of heartbeat buckets exist (`ladder.rs`).

use async_nats::jetstream::stream::StorageType;

use crate::probe::findings::Probe;

pub(crate) async fn nats(cfg: &super::Config, r: &mut Probe) -> std::result::Result<(), String> {
    let limits = crate::backends::Limits::default();
    let store = super::NatsStore::open(cfg, limits).await.map_err(|e| e.to_string())?;
    let server = store.client.server_info();
    r.set("server", format!("{} ({})", server.server_name, server.version));
    r.set("jetstream", server.jetstream);
    // async-nats reads account details in a newer server's form; a 2.9 server's is skipped.
    if let Ok(account) = store.js.query_account().await {
        r.set("account streams", account.streams);
    }
    let info = store.grants.stream.get_info().await.map_err(|e| e.to_string())?;
    let replicas = info.config.num_replicas.max(1);
    let memory = info.config.storage == StorageType::Memory;
    r.set(
        "grants bucket",
        format!("{:?} ({} keys' messages)", store.bucket(), info.state.messages),
    );
    r.set("replicas", replicas);
    r.set("storage", if memory { "memory" } else { "file" });
    if let Some(c) = &info.cluster {
        r.set("cluster", c.name.as_deref().unwrap_or("(none)"));
        r.set("leader", c.leader.as_deref().unwrap_or("(none)"));
        for p in &c.replicas {
            let state = if p.offline {
                "offline".to_owned()
            } else if p.current {
                "current".to_owned()
            } else {
                format!("behind by {} operations", p.lag.unwrap_or(0))
            };
            r.set(&format!("peer {}", p.name), state);
        }
    }
    if memory {
        r.verdict(
            "memory storage: a restarted server forgets every grant, so a second holder can be \
             granted while the first still holds; fences stay above the old ones only by the \
             server's clock",
        );
        r.change("storage=file (a new bucket: nats://…/BUCKET?storage=file)");
    }
    if replicas < 3 {
        r.verdict(format!(
            "{replicas} replica(s): the server holding the bucket is a single point of failure; \
             its crash stops every grant, and with file storage can lose its last writes"
        ));
        r.change("replicas=3 on a 3-node JetStream cluster (a new bucket)");
    } else {
        r.verdict(format!(
            "{replicas} replicas: each grant is acknowledged after a majority stored it; the \
             loss of {} server(s) keeps every acknowledged grant",
            (replicas - 1) / 2
        ));
    }
    // The ladder, made here rather than beside the open so that what is reported is settled
    // (the rungs at once, all within the op timeout; one stream-info request each that exists).
    let rungs = &super::ladder::RUNGS_MS;
    let missing = tokio::time::timeout(limits.op, store.make_rungs(rungs)).await;
    let missing = missing.unwrap_or_else(|_| rungs.to_vec());
    let have = rungs.len() - missing.len();
    r.set("heartbeat ladder", format!("{have} of {} rungs", rungs.len()));
    if !missing.is_empty() {
        let list: Vec<String> = missing.iter().map(|ms| format!("{ms} ms")).collect();
        r.verdict(format!(
            "heartbeat rungs missing or not answering within the op timeout ({}): while a \
             node is down, a lease length never used before whose bucket cannot be placed \
             has no longer bucket to fall back to and is refused",
            list.join(", ")
        ));
        r.change("run doctor again when every node is up: it makes the missing rungs");
    }
    r.verdict(
        "expiry is the heartbeat buckets' max_age (one bucket per TTL, BUCKET-ttl-Nms), \
         decided by the server holding each bucket; fences are clock-backed by the server's \
         message timestamps",
    );
    Ok(())
}
