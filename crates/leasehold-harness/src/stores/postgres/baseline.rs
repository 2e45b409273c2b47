//! PostgreSQL's baselines for `leasehold bench`: pgbench running leasehold's own statements
//! (and, for session locks, the bare `pg_advisory_lock`) on the same server in the same run,
//! and for session locks the raw tokio-postgres driver (the library's own, through
//! `leasehold::fence::postgres`) sending leasehold's prepared try-lock and unlock.

use std::sync::Arc;
use std::time::Duration;

use leasehold::StoreUrl;
use leasehold::backends::postgres::tools;
use leasehold::fence::postgres::tokio_postgres;

use crate::baseline::{Baseline, NativeLoad, Paired, RawClient, RawError, RawHeld};

fn err(e: impl std::fmt::Display) -> RawError {
    e.to_string()
}

/// pgbench (`-M prepared`, one client) running one script on the store's server.
struct Pgbench {
    label: &'static str,
    script: String,
    /// The URL without leasehold's options, as pgbench takes it.
    url: String,
    /// Session locks: pgbench's connection is set up as leasehold's.
    session: bool,
}

/// The pgbench scripts for `url`: leasehold's statements (`:key`, `:owner`, `:ttl`/`:chan`,
/// `:info` as pgbench variables), and for session locks the bare advisory lock.
pub fn native_loads(url: &StoreUrl) -> Result<Vec<Arc<dyn NativeLoad>>, String> {
    let session = tools::is_session(url).map_err(err)?;
    let vars = |sql: &str, third: &str| {
        let sql = sql.replace("$1", ":key").replace("$2", ":owner").replace("$4", ":info");
        sql.replace("$3", third) + ";\n"
    };
    let scripts: Vec<(&'static str, String)> = if session {
        let st = tools::session_statements(url).map_err(err)?;
        vec![
            (
                "pgbench: leasehold's try-lock and unlock statements",
                vars(&st.try_grant, "") + &vars(&st.unlock, ""),
            ),
            (
                "pgbench: pg_advisory_lock + pg_advisory_unlock",
                "SELECT pg_advisory_lock(hashtextextended(:key, 0));\nSELECT pg_advisory_unlock(hashtextextended(:key, 0));\n".into(),
            ),
        ]
    } else {
        let st = tools::lease_statements(url).map_err(err)?;
        vec![(
            "pgbench: leasehold's grant and release statements",
            vars(&st.grant, ":ttl") + &vars(&st.release, ":chan"),
        )]
    };
    let driver = tools::driver_url(url).map_err(err)?.to_owned();
    Ok(scripts
        .into_iter()
        .map(|(label, script)| {
            Arc::new(Pgbench { label, script, url: driver.clone(), session }) as Arc<dyn NativeLoad>
        })
        .collect())
}

#[async_trait::async_trait]
impl NativeLoad for Pgbench {
    fn label(&self) -> &'static str {
        self.label
    }

    async fn cycles_per_s(&self, key: &str, d: Duration) -> Result<f64, RawError> {
        let dir = std::env::temp_dir().join(format!("leasehold-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(err)?;
        let file = dir.join("script.sql");
        std::fs::write(&file, &self.script).map_err(err)?;
        let chan = "postgres://x/y"
            .parse()
            .and_then(|u| tools::lease_statements(&u))
            .map(|s| s.channel)
            .unwrap_or_default();
        // The password goes to pgbench through its environment, never its argv (`ps`).
        let (url, password) = without_password(&self.url);
        let mut pgbench = tokio::process::Command::new("pgbench");
        if let Some(pw) = password {
            pgbench.env("PGPASSWORD", pw);
        }
        let out = pgbench
            // As leasehold's session connections are set up (SessionStatements::setup); the
            // lease-table statements run with the server's defaults, as leasehold's do.
            .env("PGOPTIONS", if self.session { "-c synchronous_commit=off" } else { "" })
            .args(["-n", "-M", "prepared", "-c", "1", "-j", "1", "-T"])
            .arg(d.as_secs().max(1).to_string())
            .args(["-D", &format!("key={key}"), "-D", "owner=00000000000000000000000000000001"])
            .args(["-D", "ttl=30000", "-D", &format!("chan={chan}")])
            // The holder info a locker keeps beside each grant, as long as the store's.
            .args(["-D", &format!("info={}", leasehold::HolderInfo::this_process().encode())])
            .arg("-f")
            .arg(&file)
            .arg(&url)
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| {
                format!("cannot run pgbench (Debian package postgresql-client or postgresql): {e}")
            })?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .find_map(|l| l.strip_prefix("tps = "))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| {
                format!("pgbench failed: {}{}", text, String::from_utf8_lossy(&out.stderr))
            })
    }
}

/// The raw tokio-postgres client on one connection, set up as leasehold's session
/// connections are (`setup`, then the clock-back), sending leasehold's prepared try-lock
/// (with its fence) and unlock statements: what leasehold's session store costs above its
/// driver.
struct PgRaw {
    client: tokio_postgres::Client,
    try_grant: tokio_postgres::Statement,
    unlock: tokio_postgres::Statement,
}

/// A session lock [`PgRaw`] holds: its key.
struct Held(Arc<PgRaw>, String);

#[async_trait::async_trait]
impl RawClient for Arc<PgRaw> {
    async fn acquire(&self, key: &str) -> Result<Option<Box<dyn RawHeld>>, RawError> {
        let row = self.client.query_one(&self.try_grant, &[&key]).await.map_err(err)?;
        let fence: i64 = row.get(0);
        Ok((fence >= 0).then(|| Box::new(Held(self.clone(), key.to_owned())) as Box<dyn RawHeld>))
    }
}

#[async_trait::async_trait]
impl RawHeld for Held {
    async fn release(self: Box<Self>) -> Result<(), RawError> {
        let Held(raw, key) = *self;
        let row = raw.client.query_one(&raw.unlock, &[&key]).await.map_err(err)?;
        if row.get::<_, bool>(0) {
            Ok(())
        } else {
            Err("raw unlock found the lock not ours".into())
        }
    }
}

/// For session locks, the raw driver doing leasehold's round trips, connected with the
/// driver configuration the store connects with; none for the lease table (pgbench runs its
/// statements).
pub async fn baselines(url: &StoreUrl) -> Result<Vec<Baseline>, String> {
    if !tools::is_session(url).map_err(err)? {
        return Ok(Vec::new());
    }
    let st = tools::session_statements(url).map_err(err)?;
    let cfg = tools::client_config(url).map_err(err)?;
    let (client, conn) = cfg.connect(tokio_postgres::NoTls).await.map_err(err)?;
    tokio::spawn(conn);
    for sql in [&st.setup, &st.clock_back] {
        if !sql.is_empty() {
            client.batch_execute(sql).await.map_err(err)?;
        }
    }
    let try_grant = client.prepare(&st.try_grant).await.map_err(err)?;
    let unlock = client.prepare(&st.unlock).await.map_err(err)?;
    Ok(vec![Baseline {
        label: "raw tokio-postgres: leasehold's try-lock (with the fence) and unlock statements, one connection",
        paired: Paired::Headline,
        ratio_name: None,
        client: Arc::new(Arc::new(PgRaw { client, try_grant, unlock })),
    }])
}

/// `url` without the password of its user part, and that password (percent-decoding left to
/// libpq's environment, which takes it as written: a bench URL's password is plain).
fn without_password(url: &str) -> (String, Option<String>) {
    let Some((scheme, rest)) = url.split_once("://") else { return (url.to_owned(), None) };
    let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let Some(at) = rest[..auth_end].rfind('@') else { return (url.to_owned(), None) };
    let Some((user, pw)) = rest[..at].split_once(':') else { return (url.to_owned(), None) };
    (format!("{scheme}://{user}{}", &rest[at..]), Some(pw.to_owned()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_password_leaves_the_url() {
        let (u, pw) = super::without_password("postgres://app:s3cret@db:5432/x?sslmode=off");
        assert_eq!(
            (u.as_str(), pw.as_deref()),
            ("postgres://app@db:5432/x?sslmode=off", Some("s3cret"))
        );
        let (u, pw) = super::without_password("postgres://app@db/x");
        assert_eq!((u.as_str(), pw), ("postgres://app@db/x", None));
    }
}
