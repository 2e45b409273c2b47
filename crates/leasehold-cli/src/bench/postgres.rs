//! The PostgreSQL baselines: pgbench running leasehold's own statements (and `pg_advisory_lock`) on the same server in the same run.

use super::BenchResult;
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
}

/// leasehold's URL options (everything else is the server's).
const PG_OPTIONS: &[&str] =
    &["mode", "schema", "table", "prefix", "fence", "heartbeat", "pgbouncer"];

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
        let scripts = if session {
            let st = leasehold::backends::postgres::tools::session_statements(url)
                .map_err(|e| e.to_string())?;
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
        Ok(PgSide { url, scripts, session })
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
        let out = tokio::process::Command::new("pgbench")
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
            .arg(&self.url)
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
