//! What doctor reads of an etcd cluster.

use crate::probe::findings::*;
#[allow(unused_imports)]
use std::time::Duration;

pub(crate) async fn etcd(
    cfg: &super::config::Config,
    r: &mut Probe,
) -> std::result::Result<(), String> {
    let limits = crate::limits::Limits::default();
    let store = super::EtcdStore::open(cfg, limits).await.map_err(|e| e.to_string())?;
    let client = store.client();
    let members = client.member_list().await.map_err(|e| e.to_string())?.members;
    let status = client.status().await.map_err(|e| e.to_string())?;
    let n = members.len();
    r.set("version", &status.version);
    r.set("members", n);
    for m in &members {
        let leader = if m.id == status.leader { " (leader)" } else { "" };
        r.set(
            &format!("member {}", if m.name.is_empty() { "(unstarted)" } else { &m.name }),
            format!(
                "{}{leader}{}",
                m.client_urls.join(","),
                if m.is_learner { " learner" } else { "" }
            ),
        );
    }
    r.set("raft term", status.raft_term);
    r.set("lock prefix", format!("{:?}", store.prefix()));
    let ttl = format!("{}s{}", cfg.ttl_secs, if cfg.ttl_given { "" } else { " (default)" });
    r.set("session TTL", ttl);
    let voters = members.iter().filter(|m| !m.is_learner).count();
    let tolerate = voters.saturating_sub(1) / 2;
    r.verdict(format!(
        "{voters} voting member(s): linearizable grants; survives the loss of {tolerate} \
         member(s); a leader change keeps every lease (etcd extends leases on election)"
    ));
    if voters == 1 {
        r.verdict(
            "a single member: its loss stops every grant and every keepalive (holders' lost() \
             fires before their sessions could expire); losing its data directory resets \
             revisions, so fences go back and a stale holder would win at the resource: restore \
             from a snapshot, never restart it empty",
        );
        r.change("3 or 5 members: survive 1 or 2 member losses with no second holder");
    } else if voters % 2 == 0 {
        r.verdict(format!(
            "an even member count ({voters}) tolerates no more failures than {} members",
            voters - 1
        ));
        r.change("an odd number of members");
    }
    r.verdict(
        "a holder cut off from the majority cannot confirm keepalives: admit() turns false at \
         once and lost() fires at 0.9 x TTL after the last confirmed one, before the server can \
         expire the session",
    );
    r.verdict("the etcd protocol does not reveal the server's clock; leasehold does not need it");
    Ok(())
}
