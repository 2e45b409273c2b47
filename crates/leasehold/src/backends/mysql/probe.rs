//! What doctor reads of a MySQL/MariaDB server.

use crate::probe::findings::*;
#[allow(unused_imports)]
use std::time::Duration;

pub(crate) async fn mysql(u: &super::MysqlUrl, r: &mut Probe) -> std::result::Result<(), String> {
    use mysql_async::{self, prelude::Queryable};
    let mut c = mysql_async::Conn::new(u.opts.clone()).await.map_err(|e| e.to_string())?;
    let (version, flush, sync_binlog, read_only, log_bin): (
        String,
        String,
        String,
        String,
        String,
    ) = c
        .query_first(
            "SELECT VERSION(), CAST(@@innodb_flush_log_at_trx_commit AS CHAR), \
             CAST(@@sync_binlog AS CHAR), CAST(@@read_only AS CHAR), CAST(@@log_bin AS CHAR)",
        )
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no answer")?;
    let is_replica =
        !c.query::<mysql_async::Row, _>("SHOW SLAVE STATUS").await.unwrap_or_default().is_empty();
    let replicas = c.query::<mysql_async::Row, _>("SHOW SLAVE HOSTS").await.ok().map(|v| v.len());
    let semi: Option<String> = c
        .query_first::<(String, String), _>("SHOW VARIABLES LIKE 'rpl_semi_sync_master_enabled'")
        .await
        .ok()
        .flatten()
        .map(|(_, v)| v);
    let before = now_s();
    let server: Option<String> =
        c.query_first("SELECT CAST(UNIX_TIMESTAMP(NOW(6)) AS CHAR)").await.ok().flatten();
    let after = now_s();
    let _ = c.disconnect().await;

    let session = u.o.session;
    r.set("version", &version);
    r.set("horizon", format!("{:?}", u.o.horizon));
    r.set("mode", if session { "GET_LOCK session locks" } else { "lease table" });
    r.set("innodb_flush_log_at_trx_commit", &flush);
    r.set("sync_binlog", &sync_binlog);
    r.set("read_only", &read_only);
    r.set("binary log", &log_bin);
    r.set("this server replicates from a primary", is_replica);
    r.set(
        "registered replicas",
        replicas.map(|n| n.to_string()).unwrap_or("unknown (no privilege)".into()),
    );
    r.set("semi-synchronous replication", semi.as_deref().unwrap_or("not installed"));
    r.clock = server.and_then(|s| s.parse::<f64>().ok()).map(|s| offset(before, after, s));

    if matches!(read_only.as_str(), "1" | "ON") || is_replica {
        r.verdict("this server is a replica or read-only: grants will fail; point the store at the primary");
    }
    if session {
        r.verdict(
            "GET_LOCK session locks: linearizable on this server; they are not replicated: a \
             failover or restart ends every lock and fires the holders' lost()",
        );
    } else {
        r.verdict(
            "lease table: linearizable (InnoDB row lock); expiry by the server's UTC_TIMESTAMP(6)",
        );
        if flush != "1" {
            r.verdict(format!(
                "innodb_flush_log_at_trx_commit={flush}: a crash can lose up to a second of \
                 committed grants: a second holder is possible, with a larger fence (clock-backed)"
            ));
            r.change("innodb_flush_log_at_trx_commit=1");
        }
        match replicas {
            Some(0) | None if !is_replica => r.verdict(
                "no replicas registered: losing the server stops every grant until it is back",
            ),
            Some(n) if semi.as_deref() != Some("ON") => {
                r.verdict(format!(
                    "{n} asynchronous replica(s): promoting one can lose the latest grants: a \
                     second holder is possible, with a larger fence (clock-backed), so fenced \
                     resources refuse the stale one"
                ));
                r.change("semi-synchronous replication (rpl_semi_sync_master_enabled=ON)");
            }
            _ => {}
        }
    }
    Ok(())
}
