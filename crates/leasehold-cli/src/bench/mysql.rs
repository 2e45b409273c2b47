//! The MySQL/MariaDB baseline: the raw mysql_async client sending leasehold's own statements.

use super::{BenchResult, Contender};
use leasehold::OwnerToken;
use leasehold::backends::mysql::tools::{
    LeaseStatements, SessionStatements, lease_statements, session_statements,
};
use leasehold::fence::mysql::mysql_async;
use std::sync::Arc;
use std::time::Duration;

/// The raw mysql_async client on one connection, sending leasehold's lease statements, or
/// for session mode plain `GET_LOCK(key, 0)` / `RELEASE_LOCK(key)`.
#[derive(Clone)]
pub(super) struct MyRaw {
    conn: Arc<tokio::sync::Mutex<mysql_async::Conn>>,
    lease: Option<LeaseStatements>,
    session: Option<SessionStatements>,
    owner: String,
    /// The holder info line sent with each grant, as a locker's.
    info: String,
}

impl MyRaw {
    pub(super) async fn connect(store: &leasehold::StoreUrl) -> BenchResult<Self> {
        use leasehold::backends::mysql::tools::{client_opts, is_session};
        let (lease, session) = if is_session(store).map_err(|e| e.to_string())? {
            let st = session_statements(store).map_err(|e| e.to_string())?;
            (None, Some(st))
        } else {
            let st = lease_statements(store).map_err(|e| e.to_string())?;
            (Some(st), None)
        };
        // The driver options the store connects with (TCP unless the URL names a socket).
        let opts = client_opts(store).map_err(|e| e.to_string())?;
        let conn = mysql_async::Conn::new(opts).await.map_err(|e| e.to_string())?;
        let owner = OwnerToken::generate().map_err(|e| e.to_string())?.to_string();
        // The holder info a locker keeps beside each grant, as long as the store's.
        let info = leasehold::HolderInfo::this_process().encode();
        Ok(MyRaw { conn: Arc::new(tokio::sync::Mutex::new(conn)), lease, session, owner, info })
    }

    pub(super) fn label(&self) -> &'static str {
        if self.lease.is_some() {
            "raw mysql_async: leasehold's grant and release statements, one connection"
        } else {
            "raw mysql_async: leasehold's GET_LOCK, fence bump and RELEASE_LOCK statements, one connection"
        }
    }
}

impl Contender for MyRaw {
    type Guard = String;
    async fn acquire(&self, key: &str, _wait: Duration) -> BenchResult<Option<String>> {
        use mysql_async::prelude::Queryable;
        let mut c = self.conn.lock().await;
        match &self.lease {
            Some(sql) => {
                let params = (key.as_bytes(), &self.owner, 30_000_000u64, self.info.as_bytes());
                c.exec_drop(&sql.grant, params).await.map_err(|e| e.to_string())?;
                Ok((c.affected_rows() > 0).then(|| key.to_owned()))
            }
            None => {
                let st = self.session.as_ref().expect("session statements");
                let got: Option<i64> = c
                    .exec_first(&st.get_lock, (key, key, key, 0.0f64))
                    .await
                    .map_err(|e| e.to_string())?;
                if got != Some(1) {
                    return Ok(None);
                }
                if let Some(fence) = &st.fence {
                    c.exec_drop(fence, (key.as_bytes(),)).await.map_err(|e| e.to_string())?;
                }
                Ok(Some(key.to_owned()))
            }
        }
    }
    async fn release(&self, key: String) -> BenchResult<()> {
        use mysql_async::prelude::Queryable;
        let mut c = self.conn.lock().await;
        let ok = match &self.lease {
            Some(sql) => {
                c.exec_drop(&sql.release, (key.as_bytes(), &self.owner))
                    .await
                    .map_err(|e| e.to_string())?;
                c.affected_rows() == 1
            }
            None => {
                let st = self.session.as_ref().expect("session statements");
                let r: Option<i64> = c
                    .exec_first(&st.release_lock, (&key, &key, &key))
                    .await
                    .map_err(|e| e.to_string())?;
                r == Some(1)
            }
        };
        if ok { Ok(()) } else { Err("raw release found the lock not ours".into()) }
    }
}
