//! What doctor reads of a PostgreSQL server.

use crate::probe::findings::*;
#[allow(unused_imports)]
use std::time::Duration;

pub(crate) async fn postgres(
    u: &super::PostgresUrl,
    r: &mut Probe,
) -> std::result::Result<(), String> {
    use tokio_postgres::NoTls;
    let (client, conn) = u.cfg.connect(NoTls).await.map_err(|e| e.to_string())?;
    // Ended with the probe, also when its caller's time limit drops it midway.
    struct Driver(tokio::task::AbortHandle);
    impl Drop for Driver {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let driver = Driver(tokio::spawn(conn).abort_handle());
    let show = |name: &'static str| {
        let client = &client;
        async move {
            client
                .query_one(&format!("SHOW {name}"), &[])
                .await
                .map(|row| row.get::<_, String>(0))
                .unwrap_or_else(|_| "unknown".into())
        }
    };
    let version = show("server_version").await;
    let sync_commit = show("synchronous_commit").await;
    let sync_names = show("synchronous_standby_names").await;
    let fsync = show("fsync").await;
    let recovery: bool = client
        .query_one("SELECT pg_is_in_recovery()", &[])
        .await
        .map(|r| r.get(0))
        .unwrap_or(false);
    let standbys = client
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')) \
             FROM pg_stat_replication",
            &[],
        )
        .await
        .map(|row| (row.get::<_, i64>(0), row.get::<_, i64>(1)))
        .ok();
    // A transaction-pooling proxy hands consecutive transactions to different backends.
    let mut pids = Vec::new();
    for _ in 0..4 {
        if let Ok(row) = client.query_one("SELECT pg_backend_pid()", &[]).await {
            pids.push(row.get::<_, i32>(0));
        }
    }
    pids.dedup();
    let pooled = pids.len() > 1;
    let before = now_s();
    let server: Option<f64> = client
        .query_one("SELECT extract(epoch FROM clock_timestamp())::float8", &[])
        .await
        .map(|row| row.get(0))
        .ok();
    let after = now_s();
    let table = format!("\"{}\".\"{}\"", u.opts.schema, u.opts.table);
    let compaction = super::compact::permitted(&client, &table).await;
    drop(driver);

    let session = u.opts.mode == super::Form::Session;
    r.set("version", &version);
    r.set("mode", if session { "session advisory locks" } else { "lease table" });
    r.set("in recovery (standby)", recovery);
    r.set("fsync", &fsync);
    r.set("synchronous_commit", &sync_commit);
    r.set("synchronous_standby_names", format!("{sync_names:?}"));
    match standbys {
        Some((n, s)) => r.set("streaming standbys", format!("{n} ({s} synchronous)")),
        None => r.set("streaming standbys", "unknown (pg_stat_replication not readable)"),
    }
    r.set(
        "transaction-pooling proxy in front",
        if pooled { "yes (backend pid changes between transactions)" } else { "no sign of one" },
    );
    r.clock = server.map(|s| offset(before, after, s));

    if recovery {
        r.verdict("this server is a standby (read-only): grants will fail; point the store at the primary");
    }
    if pooled && session {
        r.verdict(
            "a transaction-pooling proxy (PgBouncer) is in front: session advisory locks are not \
             safe here (the lock stays on a server connection other clients get); use the lease \
             table or with_xact_lock",
        );
        r.change("mode=lease, or connect to PostgreSQL directly for mode=session");
    }
    if session {
        r.verdict(
            "session advisory locks: linearizable; a server restart or failover ends every \
             session and with it every lock, and the holders' lost() fires",
        );
    } else {
        r.verdict(
            "lease table: linearizable (row lock); expiry by the database's now(), no client clock",
        );
    }
    if !session {
        match compaction {
            Ok(Some(Ok(()))) => r.set(
                "lease table compaction",
                "permitted (VACUUM, REINDEX INDEX CONCURRENTLY after pruning, once per horizon)",
            ),
            Ok(Some(Err(why))) => {
                r.set("lease table compaction", "not permitted");
                r.verdict(format!(
                    "lease table compaction: {why}; pruning still deletes idle rows, and the \
                     table stays at its peak size"
                ));
                r.change("connect as the lease table's owner, or make the role a member of it");
            }
            Ok(None) => r.set("lease table compaction", "the lease table does not exist yet"),
            Err(e) => r.set("lease table compaction", format!("unknown ({e})")),
        }
    }
    if fsync == "off" {
        r.verdict(
            "fsync=off: a crash can lose committed grants and fence bumps: a second holder is \
             possible, with a larger fence (clock-backed), so fenced resources refuse the stale one",
        );
        r.change("fsync=on");
    }
    if matches!(sync_commit.as_str(), "off") {
        r.verdict(
            "synchronous_commit=off: a crash can lose the last grants acknowledged to clients",
        );
        r.change("synchronous_commit=on");
    }
    match standbys {
        Some((0, _)) => {
            if !session {
                r.verdict(
                    "no standbys: committed grants survive a crash; losing the server stops every \
                     grant until it is back",
                );
            }
            r.change("a synchronous standby (synchronous_standby_names) to survive the server's loss without a second holder");
        }
        Some((n, s)) if s == 0 || sync_names.trim().is_empty() => {
            r.verdict(format!(
                "{n} asynchronous standby(s): promoting one can lose the latest grants: a second \
                 holder can be admitted, with a larger fence (clock-backed), so fenced resources \
                 refuse the stale one"
            ));
            r.change("synchronous_standby_names (and synchronous_commit=on or remote_apply): a promoted standby has every acknowledged grant");
        }
        Some((n, s)) => {
            r.verdict(format!(
                "{n} standby(s), {s} synchronous: a grant is acknowledged only once a synchronous \
                 standby has it; promoting that standby keeps every grant"
            ));
        }
        None => r.verdict("replication unknown (no permission to read pg_stat_replication)"),
    }
    Ok(())
}
