//! A private PostgreSQL primary with a synchronous streaming standby, killed on drop: every
//! commit the primary acknowledges has been flushed on the standby.

use std::time::{Duration, Instant};

use crate::failure::{FailingStore, Plan, query};
use crate::spawn::blocking;
use crate::stores::postgres::server::PgServer;

/// The `application_name` (the standby's `cluster_name`) the primary waits for.
pub const SYNC_NAME: &str = "standby1";

/// A primary (`synchronous_standby_names = 'standby1'`, `synchronous_commit = on`, `fsync =
/// on`) and its synchronous standby, on free loopback ports.
pub struct PgSyncPair {
    /// The primary.
    pub primary: PgServer,
    /// The synchronous standby (`cluster_name = standby1`).
    pub standby: PgServer,
}

impl PgSyncPair {
    /// Starts both and waits (bounded) until `pg_stat_replication` says the standby is `sync`.
    pub fn start() -> Self {
        let names = format!("synchronous_standby_names={SYNC_NAME}");
        let primary = PgServer::start_with(&[
            "-c",
            &names,
            "-c",
            "synchronous_commit=on",
            // A server that promises kept commits says so to doctor; a killed process loses
            // nothing either way.
            "-c",
            "fsync=on",
        ]);
        let cluster = format!("cluster_name={SYNC_NAME}");
        let standby = PgServer::standby_of_with(&primary, &["-c", &cluster]);
        let pair = PgSyncPair { primary, standby };
        let deadline = Instant::now() + Duration::from_secs(30);
        while pair.sync_state() != format!("{SYNC_NAME}|sync") {
            assert!(
                Instant::now() < deadline,
                "the standby never became synchronous (pg_stat_replication: {:?})",
                pair.sync_state()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        pair
    }

    /// `application_name|sync_state` of every standby the primary streams to, one a line.
    pub fn sync_state(&self) -> String {
        self.primary.sql(
            "SELECT application_name || '|' || sync_state FROM pg_stat_replication \
             ORDER BY application_name",
        )
    }

    /// Kills the primary (-9) and promotes the standby (waiting until it takes writes).
    pub fn fail_over(&mut self) {
        self.primary.kill9();
        self.standby.promote();
    }
}

/// `failover` on a fresh synchronous pair.
pub(crate) fn plan() -> Plan {
    Plan {
        start: || Box::new(PgSyncPair::start()),
        setup: "a private PostgreSQL primary (synchronous_standby_names = standby1, \
                synchronous_commit = on) and its synchronous streaming standby, fresh for each \
                trial; the primary was killed (-9) during the hold and the standby promoted \
                (pg_promote); the successor uses the promoted standby, the holder keeps its \
                connection to the dead primary",
    }
}

impl FailingStore for PgSyncPair {
    fn url(&self, suffix: &str) -> String {
        self.primary.url(query(suffix))
    }
    fn kill9(&mut self) {
        self.primary.kill9();
    }
    fn restart(&mut self) {
        self.primary.restart();
    }
    fn fail_over(&mut self, suffix: &str) -> (String, String) {
        let state = self.sync_state().replace('\n', ", ");
        PgSyncPair::fail_over(self);
        (
            format!(
                "primary :{} killed (pg_stat_replication just before: {state}), standby :{} \
                 promoted",
                self.primary.port(),
                self.standby.port()
            ),
            self.standby.url(query(suffix)),
        )
    }
}

/// doctor's verdict on a fresh synchronous pair, checked against `pg_stat_replication`: the
/// line for the report, or an error when they disagree.
pub async fn doctor_agrees() -> Result<String, String> {
    let pair = blocking(PgSyncPair::start).await?;
    let url: leasehold::StoreUrl = pair.primary.url("").parse().map_err(|e| format!("{e}"))?;
    let probe = leasehold::probe::probe(&url).await.map_err(|e| format!("doctor: {e}"))?;
    let state = blocking(move || pair.sync_state()).await?;
    let verdict = probe
        .verdicts
        .iter()
        .find(|v| v.contains("standby"))
        .cloned()
        .unwrap_or_else(|| "no verdict on standbys".into());
    let says_sync = verdict.contains("1 synchronous") && verdict.contains("keeps every grant");
    let is_sync = state == format!("{SYNC_NAME}|sync");
    if says_sync != is_sync {
        return Err(format!(
            "doctor says {verdict:?} but pg_stat_replication says {state:?} (application_name|\
             sync_state)"
        ));
    }
    Ok(format!("doctor on this deployment: {verdict:?}; pg_stat_replication: {state} (they agree)"))
}
