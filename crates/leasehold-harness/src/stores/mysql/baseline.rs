//! MySQL/MariaDB's raw baseline for `leasehold bench`: the raw mysql_async client (the
//! library's own driver, through `leasehold::fence::mysql`) on one connection, sending
//! leasehold's own statements: the lease table's grant and release, or for session mode
//! `GET_LOCK(key, 0)`, the fence bump and `RELEASE_LOCK(key)`.

use std::sync::Arc;

use leasehold::backends::mysql::tools::{
    LeaseStatements, SessionStatements, client_opts, is_session, lease_statements,
    session_statements,
};
use leasehold::fence::mysql::mysql_async::{self, prelude::Queryable};
use leasehold::{OwnerToken, StoreUrl};

use crate::baseline::{Baseline, Paired, RawClient, RawError, RawHeld};

/// The raw client: one connection, and the statements it sends.
struct MyRaw {
    conn: tokio::sync::Mutex<mysql_async::Conn>,
    lease: Option<LeaseStatements>,
    session: Option<SessionStatements>,
    owner: String,
    /// The holder info line sent with each grant, as a locker's.
    info: String,
}

/// A key [`MyRaw`] holds.
struct Held(Arc<MyRaw>, String);

fn err(e: impl std::fmt::Display) -> RawError {
    e.to_string()
}

#[async_trait::async_trait]
impl RawClient for Arc<MyRaw> {
    async fn acquire(&self, key: &str) -> Result<Option<Box<dyn RawHeld>>, RawError> {
        let mut c = self.conn.lock().await;
        let held = || Some(Box::new(Held(self.clone(), key.to_owned())) as Box<dyn RawHeld>);
        match (&self.lease, &self.session) {
            (Some(sql), _) => {
                let params = (key.as_bytes(), &self.owner, 30_000_000u64, self.info.as_bytes());
                c.exec_drop(&sql.grant, params).await.map_err(err)?;
                Ok(if c.affected_rows() > 0 { held() } else { None })
            }
            (None, Some(st)) => {
                let got: Option<i64> =
                    c.exec_first(&st.get_lock, (key, key, key, 0.0f64)).await.map_err(err)?;
                if got != Some(1) {
                    return Ok(None);
                }
                if let Some(fence) = &st.fence {
                    c.exec_drop(fence, (key.as_bytes(),)).await.map_err(err)?;
                }
                Ok(held())
            }
            (None, None) => Err("no statements".into()),
        }
    }
}

#[async_trait::async_trait]
impl RawHeld for Held {
    async fn release(self: Box<Self>) -> Result<(), RawError> {
        let Held(raw, key) = *self;
        let mut c = raw.conn.lock().await;
        let ok = match (&raw.lease, &raw.session) {
            (Some(sql), _) => {
                c.exec_drop(&sql.release, (key.as_bytes(), &raw.owner)).await.map_err(err)?;
                c.affected_rows() == 1
            }
            (None, Some(st)) => {
                let r: Option<i64> =
                    c.exec_first(&st.release_lock, (&key, &key, &key)).await.map_err(err)?;
                r == Some(1)
            }
            (None, None) => false,
        };
        if ok { Ok(()) } else { Err("raw release found the lock not ours".into()) }
    }
}

/// The baseline on the database `url` names, connected with the driver options the store
/// connects with (TCP unless the URL names a socket). An error when the URL's options are
/// not the store's or the connection fails.
pub async fn baselines(url: &StoreUrl) -> Result<Vec<Baseline>, String> {
    let (lease, session) = if is_session(url).map_err(err)? {
        (None, Some(session_statements(url).map_err(err)?))
    } else {
        (Some(lease_statements(url).map_err(err)?), None)
    };
    let opts = client_opts(url).map_err(err)?;
    let conn = mysql_async::Conn::new(opts).await.map_err(err)?;
    let owner = OwnerToken::generate().map_err(err)?.to_string();
    // The holder info a locker keeps beside each grant, as long as the store's.
    let info = leasehold::HolderInfo::this_process().encode();
    let label = if lease.is_some() {
        "raw mysql_async: leasehold's grant and release statements, one connection"
    } else {
        "raw mysql_async: leasehold's GET_LOCK, fence bump and RELEASE_LOCK statements, one connection"
    };
    let raw = MyRaw { conn: tokio::sync::Mutex::new(conn), lease, session, owner, info };
    Ok(vec![Baseline {
        label,
        paired: Paired::Headline,
        ratio_name: None,
        client: Arc::new(Arc::new(raw)),
    }])
}
