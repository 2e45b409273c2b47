//! The PostgreSQL baselines: pgbench running leasehold's own statements (and `pg_advisory_lock`) on the same server in the same run.

use super::{BenchResult, Contender};
use leasehold::backends::postgres::tools::SessionStatements;
use leasehold::fence::postgres::tokio_postgres;
use std::sync::Arc;
use std::time::Duration;

/// A `postgres://` store, for the pgbench baselines: the same statements leasehold prepares,
/// run by pgbench (`-M prepared`, one client) on the same server in the same run.
pub(super) struct PgSide {
    /// The URL without leasehold's options, as pgbench takes it.
    url: String,
    /// (label, pgbench script) pairs.
    scripts: Vec<(&'static str, String)>,
    /// Session locks: pgbench's connection is set up as leasehold's.
    session: bool,
    /// leasehold's session statements, for the raw-driver baseline.
    session_sql: Option<SessionStatements>,
}

/// leasehold's URL options (everything else is the server's).
const PG_OPTIONS: &[&str] =
    &["mode", "schema", "table", "prefix", "fence", "heartbeat", "pgbouncer", "horizon"];

impl PgSide {
    pub(super) fn new(url: &str) -> BenchResult<Self> {
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let keep: Vec<&str> = query
            .split('&')
            .filter(|p| !p.is_empty())
            .filter(|p| !PG_OPTIONS.contains(&p.split_once('=').map_or(*p, |(k, _)| k)))
            .collect();
        let session = query.split('&').any(|p| p == "mode=session");
        let vars = |sql: &str, third: &str| {
            let sql = sql.replace("$1", ":key").replace("$2", ":owner").replace("$4", ":info");
            sql.replace("$3", third) + ";\n"
        };
        let mut session_sql = None;
        let scripts = if session {
            let st = leasehold::backends::postgres::tools::session_statements(url)
                .map_err(|e| e.to_string())?;
            session_sql = Some(st.clone());
            vec![
                ("pgbench: leasehold's try-lock and unlock statements", vars(&st.try_grant, "") + &vars(&st.unlock, "")),
                (
                    "pgbench: pg_advisory_lock + pg_advisory_unlock",
                    "SELECT pg_advisory_lock(hashtextextended(:key, 0));\nSELECT pg_advisory_unlock(hashtextextended(:key, 0));\n".into(),
                ),
            ]
        } else {
            let st = leasehold::backends::postgres::tools::lease_statements(url)
                .map_err(|e| e.to_string())?;
            vec![(
                "pgbench: leasehold's grant and release statements",
                vars(&st.grant, ":ttl") + &vars(&st.release, ":chan"),
            )]
        };
        let url =
            if keep.is_empty() { base.to_owned() } else { format!("{base}?{}", keep.join("&")) };
        Ok(PgSide { url, scripts, session, session_sql })
    }

    /// The (label, pgbench script) pairs.
    pub(super) fn scripts(&self) -> &[(&'static str, String)] {
        &self.scripts
    }

    /// Cycles (script runs) per second of pgbench over `d` with `script`.
    pub(super) async fn pgbench(&self, script: &str, key: &str, d: Duration) -> BenchResult<f64> {
        let dir = std::env::temp_dir().join(format!("leasehold-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let file = dir.join("script.sql");
        std::fs::write(&file, script).map_err(|e| e.to_string())?;
        let chan = leasehold::backends::postgres::tools::lease_statements("postgres://x/y")
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
/// connections are (`setup`, then the clock-back), sending leasehold's prepared try-lock (with
/// its fence) and unlock statements: what leasehold's session store costs above its driver.
#[derive(Clone)]
pub(super) struct PgRaw {
    client: Arc<tokio_postgres::Client>,
    try_grant: tokio_postgres::Statement,
    unlock: tokio_postgres::Statement,
}

impl PgSide {
    /// For session locks, the raw driver doing leasehold's round trips; else `None`.
    pub(super) async fn raw(&self) -> BenchResult<Option<PgRaw>> {
        if !self.session {
            return Ok(None);
        }
        let st = self.session_sql.as_ref().ok_or("session statements")?;
        let (client, conn) = tokio_postgres::connect(&self.url, tokio_postgres::NoTls)
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        for sql in [&st.setup, &st.clock_back] {
            if !sql.is_empty() {
                client.batch_execute(sql).await.map_err(|e| e.to_string())?;
            }
        }
        let try_grant = client.prepare(&st.try_grant).await.map_err(|e| e.to_string())?;
        let unlock = client.prepare(&st.unlock).await.map_err(|e| e.to_string())?;
        Ok(Some(PgRaw { client: Arc::new(client), try_grant, unlock }))
    }
}

impl PgRaw {
    pub(super) const LABEL: &'static str = "raw tokio-postgres: leasehold's try-lock (with the fence) and unlock statements, one connection";
}

impl Contender for PgRaw {
    type Guard = String;
    async fn acquire(&self, key: &str, _wait: Duration) -> BenchResult<Option<String>> {
        let row =
            self.client.query_one(&self.try_grant, &[&key]).await.map_err(|e| e.to_string())?;
        let fence: i64 = row.get(0);
        Ok((fence >= 0).then(|| key.to_owned()))
    }
    async fn release(&self, key: String) -> BenchResult<()> {
        let row = self.client.query_one(&self.unlock, &[&key]).await.map_err(|e| e.to_string())?;
        if row.get::<_, bool>(0) {
            Ok(())
        } else {
            Err("raw unlock found the lock not ours".into())
        }
    }
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
