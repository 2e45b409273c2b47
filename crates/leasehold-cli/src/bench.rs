//! `leasehold bench`: leasehold measured side by side with a baseline in the same run.
//!
//! Every scenario runs `--runs` times; within a run the contenders alternate order, and the
//! figures reported are medians over runs (throughput) and percentiles over all samples
//! (latency). Ratios compare contenders measured in the same run, never absolute times.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use leasehold::backends::etcd::{client::Client as EtcdClient, rpc as etcd_rpc};
use leasehold::backends::mysql::mysql_async;
use leasehold::{Locker, OwnerToken, Wait};
use serde_json::{Value, json};

use crate::dur;

/// Which scenarios to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// One task, acquire + release of one free key, back to back.
    Uncontended,
    /// `--tasks` tasks contending for one key with an empty critical section.
    Handoff,
    /// 64 tasks, each on its own key, over one connection.
    ManyKeys,
    /// `--leases` leases held with auto-renew on one connection.
    HoldMany,
    /// All of the above.
    All,
}

/// Settings of one bench invocation.
#[derive(Debug, Clone)]
pub struct Settings {
    pub url: String,
    pub scenario: Scenario,
    pub tasks: usize,
    pub duration: Duration,
    pub runs: usize,
    pub leases: usize,
    /// The tokio runtime everything runs on.
    pub runtime: &'static str,
}

const TTL: Duration = Duration::from_secs(30);

/// What leasehold sends to Redis: scripts and (un)subscriptions.
const LEASEHOLD_REQUESTS: &[&str] = &[
    "evalsha",
    "eval",
    "evalsha_ro",
    "eval_ro",
    "subscribe",
    "unsubscribe",
    "script|load",
    "ping",
];
/// What rslock sends: a plain SET NX PX to lock, a script to unlock.
#[cfg(feature = "peers")]
const RSLOCK_REQUESTS: &[&str] = &["set", "eval", "evalsha"];

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

fn us(d: Duration) -> u64 {
    (d.as_micros() as u64).clamp(1, 60_000_000)
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 { v[m] } else { (v[m - 1] + v[m]) / 2.0 }
}

/// Latency summary in microseconds.
fn pct(h: &Histogram<u64>) -> Value {
    if h.is_empty() {
        return Value::Null;
    }
    json!({
        "p50": h.value_at_quantile(0.5), "p90": h.value_at_quantile(0.9),
        "p99": h.value_at_quantile(0.99), "p99_9": h.value_at_quantile(0.999),
        "max": h.max(), "samples": h.len(),
    })
}

fn pct_text(v: &Value) -> String {
    if v.is_null() {
        return "-".into();
    }
    format!("{}/{}/{}/{}/{}", v["p50"], v["p90"], v["p99"], v["p99_9"], v["max"])
}

/// One contender's results over all runs of a scenario.
#[derive(Default)]
struct Tally {
    per_run: Vec<f64>,
    handoffs_per_run: Vec<f64>,
    acquire: Option<Histogram<u64>>,
    release: Option<Histogram<u64>>,
    handoff: Option<Histogram<u64>>,
    commands_per_acq: Vec<f64>,
}

impl Tally {
    fn add(&mut self, r: RunResult) {
        self.per_run.push(r.ops as f64 / r.elapsed.as_secs_f64());
        if let Some(h) = r.handoffs {
            self.handoffs_per_run.push(h as f64 / r.elapsed.as_secs_f64());
        }
        merge_hists(
            [&mut self.acquire, &mut self.release, &mut self.handoff],
            [r.acquire, r.release, r.handoff],
        );
        if let Some(c) = r.commands {
            self.commands_per_acq.push(c as f64 / r.ops.max(1) as f64);
        }
    }

    fn json(&self, name: &str) -> Value {
        json!({
            "contender": name,
            "ops_per_s_median": median(self.per_run.clone()).round(),
            "ops_per_s_runs": self.per_run.iter().map(|v| v.round()).collect::<Vec<_>>(),
            "handoffs_per_s_median": if self.handoffs_per_run.is_empty() { Value::Null } else { json!(median(self.handoffs_per_run.clone()).round()) },
            "handoffs_per_s_runs": if self.handoffs_per_run.is_empty() { Value::Null } else { json!(self.handoffs_per_run.iter().map(|v| v.round()).collect::<Vec<_>>()) },
            "acquire_us": self.acquire.as_ref().map_or(Value::Null, pct),
            "release_us": self.release.as_ref().map_or(Value::Null, pct),
            "handoff_us": self.handoff.as_ref().map_or(Value::Null, pct),
            "store_commands_per_acquisition": if self.commands_per_acq.is_empty() {
                Value::Null
            } else {
                json!((median(self.commands_per_acq.clone()) * 100.0).round() / 100.0)
            },
        })
    }
}

#[derive(Default)]
struct RunResult {
    ops: u64,
    /// Acquisitions by a different task than the previous holder (handoff scenario).
    handoffs: Option<u64>,
    elapsed: Duration,
    acquire: Option<Histogram<u64>>,
    release: Option<Histogram<u64>>,
    handoff: Option<Histogram<u64>>,
    /// Store commands the server processed during the run (Redis INFO), if known.
    commands: Option<u64>,
}

impl RunResult {
    /// Adds another slice of the same contender's run.
    fn merge(&mut self, o: RunResult) {
        self.ops += o.ops;
        self.elapsed += o.elapsed;
        if let Some(h) = o.handoffs {
            *self.handoffs.get_or_insert(0) += h;
        }
        if let Some(c) = o.commands {
            *self.commands.get_or_insert(0) += c;
        }
        merge_hists(
            [&mut self.acquire, &mut self.release, &mut self.handoff],
            [o.acquire, o.release, o.handoff],
        );
    }
}

/// Adds each histogram of `theirs` into the one of `mine` at the same place.
fn merge_hists<const N: usize>(
    mine: [&mut Option<Histogram<u64>>; N],
    theirs: [Option<Histogram<u64>>; N],
) {
    for (m, t) in mine.into_iter().zip(theirs) {
        match (m.as_mut(), t) {
            (Some(m), Some(t)) => m.add(t).expect("same bounds"),
            (None, Some(t)) => *m = Some(t),
            _ => {}
        }
    }
}

/// In-process contenders of one run take turns in this many slices of the run's duration
/// (rotating who goes first), so a change in the machine's load hits them alike rather than
/// whichever contender's block it fell in.
const SLICES: u32 = 10;

type BenchResult<T> = Result<T, String>;

/// What a Redis URL points at, for baselines.
struct RedisSide {
    #[cfg_attr(not(feature = "peers"), allow(dead_code))]
    url: String,
    host: String,
    port: u16,
    conn: redis::aio::ConnectionManager,
}

impl RedisSide {
    async fn connect(url: &str) -> BenchResult<Self> {
        let base = url.split('?').next().unwrap_or(url).to_string();
        let client = redis::Client::open(base.as_str()).map_err(|e| e.to_string())?;
        let (host, port) = match client.get_connection_info().addr() {
            redis::ConnectionAddr::Tcp(h, p) => (h.clone(), *p),
            other => return Err(format!("unsupported redis address {other:?}")),
        };
        let conn = client.get_connection_manager().await.map_err(|e| e.to_string())?;
        Ok(RedisSide { url: base, host, port, conn })
    }

    /// Calls of the named commands so far (INFO commandstats). Commands a script runs
    /// internally are counted under their own names, so passing only what a client sends
    /// counts client requests.
    async fn calls(&self, names: &[&str]) -> BenchResult<u64> {
        Ok(self.stats(names).await?.0)
    }

    /// Calls of the named commands so far and the server time they took, in µs.
    async fn stats(&self, names: &[&str]) -> BenchResult<(u64, u64)> {
        let mut c = self.conn.clone();
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut c)
            .await
            .map_err(|e| e.to_string())?;
        let (mut calls, mut usec) = (0, 0);
        for line in info.lines() {
            let Some(rest) = line.strip_prefix("cmdstat_") else { continue };
            let Some((name, stats)) = rest.split_once(':') else { continue };
            if names.contains(&name) {
                for kv in stats.split(',') {
                    if let Some(v) = kv.strip_prefix("calls=") {
                        calls += v.parse::<u64>().unwrap_or(0);
                    } else if let Some(v) = kv.strip_prefix("usec=") {
                        usec += v.parse::<u64>().unwrap_or(0);
                    }
                }
            }
        }
        Ok((calls, usec))
    }

    /// Runs `f` and returns its output with the named commands' calls and server µs meanwhile.
    async fn timed<T>(
        &self,
        names: &[&str],
        f: impl Future<Output = BenchResult<T>>,
    ) -> BenchResult<(T, (u64, u64))> {
        let (c0, u0) = self.stats(names).await?;
        let out = f.await?;
        let (c1, u1) = self.stats(names).await?;
        Ok((out, (c1.saturating_sub(c0), u1.saturating_sub(u0))))
    }

    async fn version(&self) -> String {
        let mut c = self.conn.clone();
        let info: String =
            redis::cmd("INFO").arg("server").query_async(&mut c).await.unwrap_or_default();
        info.lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .unwrap_or("?")
            .trim()
            .to_string()
    }
}

/// Progress on stderr (drawn only on a terminal).
struct Progress(indicatif::ProgressBar);

impl Progress {
    fn new(total: u64) -> Self {
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Progress(bar)
    }
    fn step(&self, msg: String) {
        self.0.set_message(msg);
        self.0.inc(1);
    }
}

/// A `postgres://` store, for the pgbench baselines: the same statements leasehold prepares,
/// run by pgbench (`-M prepared`, one client) on the same server in the same run.
struct PgSide {
    /// The URL without leasehold's options, as pgbench takes it.
    url: String,
    /// (label, pgbench script) pairs.
    scripts: Vec<(&'static str, String)>,
}

/// leasehold's URL options (everything else is the server's).
const PG_OPTIONS: &[&str] =
    &["mode", "schema", "table", "prefix", "fence", "heartbeat", "pgbouncer"];

impl PgSide {
    fn new(url: &str) -> BenchResult<Self> {
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let keep: Vec<&str> = query
            .split('&')
            .filter(|p| !p.is_empty())
            .filter(|p| !PG_OPTIONS.contains(&p.split_once('=').map_or(*p, |(k, _)| k)))
            .collect();
        let session = query.split('&').any(|p| p == "mode=session");
        let vars = |sql: &str, third: &str| {
            sql.replace("$1", ":key").replace("$2", ":owner").replace("$3", third) + ";\n"
        };
        let scripts = if session {
            let st = leasehold::backends::postgres::session_statements(url)
                .map_err(|e| e.to_string())?;
            vec![
                ("pgbench: leasehold's try-lock and unlock statements", vars(&st.try_grant, "") + &vars(&st.unlock, "")),
                (
                    "pgbench: pg_advisory_lock + pg_advisory_unlock",
                    "SELECT pg_advisory_lock(hashtextextended(:key, 0));\nSELECT pg_advisory_unlock(hashtextextended(:key, 0));\n".into(),
                ),
            ]
        } else {
            let st =
                leasehold::backends::postgres::lease_statements(url).map_err(|e| e.to_string())?;
            vec![(
                "pgbench: leasehold's grant and release statements",
                vars(&st.grant, ":ttl") + &vars(&st.release, ":chan"),
            )]
        };
        let url =
            if keep.is_empty() { base.to_owned() } else { format!("{base}?{}", keep.join("&")) };
        Ok(PgSide { url, scripts })
    }

    /// Cycles (script runs) per second of pgbench over `d` with `script`.
    async fn pgbench(&self, script: &str, key: &str, d: Duration) -> BenchResult<f64> {
        let dir = std::env::temp_dir().join(format!("leasehold-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let file = dir.join("script.sql");
        std::fs::write(&file, script).map_err(|e| e.to_string())?;
        let chan = leasehold::backends::postgres::lease_statements("postgres://x/y")
            .map(|s| s.channel)
            .unwrap_or_default();
        let out = tokio::process::Command::new("pgbench")
            .args(["-n", "-M", "prepared", "-c", "1", "-j", "1", "-T"])
            .arg(d.as_secs().max(1).to_string())
            .args(["-D", &format!("key={key}"), "-D", "owner=00000000000000000000000000000001"])
            .args(["-D", "ttl=30000", "-D", &format!("chan={chan}"), "-f"])
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

/// Runs the bench; returns the report as JSON and prints a table.
pub async fn run(s: Settings) -> BenchResult<Value> {
    let locker = Locker::connect(&s.url).await.map_err(|e| e.to_string())?;
    let redis_side =
        if s.url.starts_with("redis://") { Some(RedisSide::connect(&s.url).await?) } else { None };
    let pg_side = if s.url.starts_with("postgres") { Some(PgSide::new(&s.url)?) } else { None };
    let my_raw =
        if s.url.starts_with("mysql") { Some(MyRaw::connect(&s.url).await?) } else { None };
    let etcd_raw =
        if s.url.starts_with("etcd") { Some(EtcdRaw::connect(&s.url).await?) } else { None };
    let all = s.scenario == Scenario::All;
    let want = |sc: Scenario| all || s.scenario == sc;
    let scenarios: Vec<Scenario> =
        [Scenario::Uncontended, Scenario::Handoff, Scenario::ManyKeys, Scenario::HoldMany]
            .into_iter()
            .filter(|sc| want(*sc))
            .collect();
    let progress = Progress::new((scenarios.len() * s.runs) as u64);
    let mut report = json!({
        "store": s.url,
        "backend": locker.guarantees().backend,
        "runs": s.runs,
        "runtime": s.runtime,
        "duration_s": s.duration.as_secs_f64(),
        "server_version": match &redis_side { Some(r) => json!(r.version().await), None => Value::Null },
        "machine": machine(),
        "scenarios": {},
    });
    for sc in scenarios {
        let v = match sc {
            Scenario::Uncontended => {
                uncontended(
                    &s,
                    &locker,
                    redis_side.as_ref(),
                    pg_side.as_ref(),
                    my_raw.as_ref(),
                    etcd_raw.as_ref(),
                    &progress,
                )
                .await?
            }
            Scenario::Handoff => {
                handoff(&s, &locker, redis_side.as_ref(), etcd_raw.as_ref(), &progress).await?
            }
            Scenario::ManyKeys => many_keys(&s, &locker, redis_side.as_ref(), &progress).await?,
            Scenario::HoldMany => hold_many(&s, &locker, redis_side.as_ref(), &progress).await?,
            Scenario::All => unreachable!("expanded above"),
        };
        report["scenarios"][name(sc)] = v;
    }
    progress.0.finish_and_clear();
    Ok(report)
}

fn name(sc: Scenario) -> &'static str {
    match sc {
        Scenario::Uncontended => "uncontended",
        Scenario::Handoff => "handoff",
        Scenario::ManyKeys => "many-keys",
        Scenario::HoldMany => "hold-many",
        Scenario::All => "all",
    }
}

fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|c| {
        c.lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|m| m.trim_start_matches([' ', '\t', ':']).to_string())
    });
    json!({
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "cpu": cpu,
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|s| s.trim().to_string()),
    })
}

fn unique(prefix: &str) -> String {
    format!("bench:{prefix}:{}", OwnerToken::generate().map(|o| o.to_string()).unwrap_or_default())
}

// ---------------------------------------------------------------- uncontended

async fn uncontended(
    s: &Settings,
    locker: &Locker,
    redis: Option<&RedisSide>,
    pg: Option<&PgSide>,
    my: Option<&MyRaw>,
    etcd: Option<&EtcdRaw>,
    p: &Progress,
) -> BenchResult<Value> {
    let mut lh = Tally::default();
    let mut my_t = Tally::default();
    let mut etcd_lock = Tally::default();
    let mut pgbench: Vec<Vec<f64>> = vec![Vec::new(); pg.map_or(0, |p| p.scripts.len())];
    let mut direct = Tally::default();
    let mut raw = Tally::default();
    let mut raw_fenced = Tally::default();
    // Server time per request (INFO commandstats), to show what the fenced grant costs.
    let (mut lh_server_us, mut raw_set_us) = (Vec::new(), Vec::new());
    #[cfg_attr(not(feature = "peers"), allow(unused_mut))]
    let mut peer = Tally::default();
    // Warm up connections and script caches.
    let lh_c = Leasehold(locker.clone());
    let raw_c = redis.map(|r| (Raw::new(r, false), Raw::new(r, true)));
    let warm = Duration::from_millis(200);
    cycles(&lh_c, &unique("warm"), warm).await?;
    if let Some((plain, fenced)) = &raw_c {
        cycles(plain, &unique("warm"), warm).await?;
        cycles(fenced, &unique("warm"), warm).await?;
    }
    for run in 0..s.runs {
        p.step(format!("uncontended run {}/{}", run + 1, s.runs));
        let key = unique("u");
        if let (Some(r), Some((plain, fenced))) = (redis, &raw_c) {
            // Every Redis contender is in-process: interleave them in slices.
            let direct_c = StoreOnly(locker.store().clone());
            #[cfg(feature = "peers")]
            let rs = peers::Rslock(rslock::LockManager::new(vec![r.url.clone()]));
            const N: usize = if cfg!(feature = "peers") { 5 } else { 4 };
            let mut acc: Vec<RunResult> = (0..N).map(|_| RunResult::default()).collect();
            // (calls, server µs) of leasehold's EVALSHAs and of the raw client's SETs.
            let (mut lh_srv, mut set_srv) = ((0, 0), (0, 0));
            let slice = s.duration / SLICES;
            for i in 0..SLICES as usize {
                for turn in 0..N {
                    let who = (turn + i + run) % N;
                    let res = match who {
                        0 => {
                            let (res, (c, u)) =
                                r.timed(&["evalsha"], cycles(&lh_c, &key, slice)).await?;
                            (lh_srv.0, lh_srv.1) = (lh_srv.0 + c, lh_srv.1 + u);
                            res
                        }
                        1 => {
                            let k = format!("{key}:raw");
                            let (res, (c, u)) = r.timed(&["set"], cycles(plain, &k, slice)).await?;
                            (set_srv.0, set_srv.1) = (set_srv.0 + c, set_srv.1 + u);
                            res
                        }
                        2 => cycles(fenced, &format!("{key}:raw-fenced"), slice).await?,
                        3 => cycles(&direct_c, &format!("{key}:direct"), slice).await?,
                        #[cfg(feature = "peers")]
                        _ => cycles(&rs, &format!("{key}:rslock"), slice).await?,
                        #[cfg(not(feature = "peers"))]
                        _ => unreachable!("{N} contenders"),
                    };
                    acc[who].merge(res);
                }
            }
            let mut acc = acc.into_iter();
            for t in [&mut lh, &mut raw, &mut raw_fenced, &mut direct] {
                t.add(acc.next().expect("one per contender"));
            }
            #[cfg(feature = "peers")]
            peer.add(acc.next().expect("one per contender"));
            lh_server_us.push(lh_srv.1 as f64 / f64::max(lh_srv.0 as f64, 1.0));
            raw_set_us.push(set_srv.1 as f64 / f64::max(set_srv.0 as f64, 1.0));
            continue;
        }
        // Rotate the order so none always goes first.
        for turn in 0..3 {
            match (turn + run) % 3 {
                0 => lh.add(cycles(&lh_c, &key, s.duration).await?),
                1 if my.is_some() => {
                    let my = my.expect("checked");
                    my_t.add(cycles(my, &format!("{key}:raw"), s.duration).await?);
                }
                1 if etcd.is_some() => {
                    let etcd = etcd.expect("checked");
                    my_t.add(cycles(etcd, &format!("{key}:raw"), s.duration).await?);
                }
                2 if etcd.is_some() => {
                    let rpc = EtcdLockRpc::new(etcd.expect("checked")).await?;
                    etcd_lock.add(cycles(&rpc, &format!("{key}:lock-rpc"), s.duration).await?);
                }
                1 if pg.is_some() => {
                    let pg = pg.expect("checked");
                    for (i, (_, script)) in pg.scripts.iter().enumerate() {
                        let k = format!("{key}:pgbench{i}");
                        pgbench[i].push(pg.pgbench(script, &k, s.duration).await?);
                    }
                }
                _ => {}
            }
        }
        let direct_c = StoreOnly(locker.store().clone());
        direct.add(cycles(&direct_c, &format!("{key}:direct"), s.duration).await?);
    }
    let mut rows = vec![lh.json("leasehold")];
    let mut v = json!({ "what": "one task: acquire + release of one free key, back to back" });
    if redis.is_some() {
        rows.push(
            raw.json("raw redis-rs: SET NX PX + EVALSHA compare-and-delete, same connection kind"),
        );
        // Pair the contenders of each run; the headline is the median of those ratios.
        let paired = |base: &Tally| -> Vec<f64> {
            base.per_run
                .iter()
                .zip(&lh.per_run)
                .map(|(b, l)| ((b / l) * 1000.0).round() / 1000.0)
                .collect()
        };
        let per_run = paired(&raw);
        v["leasehold_time_per_cycle_vs_raw"] = json!(median(per_run.clone()));
        v["per_run_ratios"] = json!(per_run);
        rows.push(raw_fenced.json(
            "raw redis-rs sending leasehold's two scripts: fenced grant (SET NX PX + INCR), release (compare-and-delete + PUBLISH)",
        ));
        let fenced_runs = paired(&raw_fenced);
        v["leasehold_time_per_cycle_vs_raw_fenced"] = json!(median(fenced_runs.clone()));
        v["per_run_ratios_fenced"] = json!(fenced_runs);
        v["server_us_per_request"] = json!({
            "leasehold_evalsha": (median(lh_server_us.clone()) * 100.0).round() / 100.0,
            "raw_set": (median(raw_set_us.clone()) * 100.0).round() / 100.0,
        });
    }
    rows.push(direct.json("leasehold store trait alone (no Locker/Lease): try_acquire + release"));
    let raw_label = match (my, etcd) {
        (Some(my), _) => Some(my.label()),
        (None, Some(_)) => Some(
            "raw etcd gRPC client: leasehold's conditional put (bound to a lease) and create-revision delete",
        ),
        _ => None,
    };
    if let Some(label) = raw_label {
        rows.push(my_t.json(label));
        let per_run: Vec<f64> = my_t
            .per_run
            .iter()
            .zip(&lh.per_run)
            .map(|(b, l)| ((b / l) * 1000.0).round() / 1000.0)
            .collect();
        v["leasehold_time_per_cycle_vs_raw"] = json!(median(per_run.clone()));
        v["per_run_ratios"] = json!(per_run);
    }
    if let Some(pg) = pg {
        let mut ratios = Vec::new();
        for ((label, _), tps) in pg.scripts.iter().zip(&pgbench) {
            rows.push(json!({
                "contender": label,
                "ops_per_s_median": median(tps.clone()).round(),
                "ops_per_s_runs": tps.iter().map(|v| v.round()).collect::<Vec<_>>(),
            }));
            // Time per cycle of leasehold over that of pgbench, run by run.
            let per_run: Vec<f64> = tps
                .iter()
                .zip(&lh.per_run)
                .map(|(b, l)| ((b / l) * 1000.0).round() / 1000.0)
                .collect();
            ratios.push(
                json!({ "baseline": label, "median": median(per_run.clone()), "per_run": per_run }),
            );
        }
        v["leasehold_time_per_cycle_vs_pgbench"] = json!(ratios);
    }
    if !etcd_lock.per_run.is_empty() {
        rows.push(
            etcd_lock
                .json("etcd's Lock RPC (server-side concurrency.Mutex, as etcdctl lock) + Unlock"),
        );
    }
    if !peer.per_run.is_empty() {
        rows.push(peer.json("rslock 0.10 (lock + unlock)"));
    }
    v["contenders"] = json!(rows);
    Ok(v)
}

/// One way of taking and giving back a key; the same loops measure every contender.
trait Contender: Clone + Send + Sync + 'static {
    type Guard: Send;
    /// Takes `key`, waiting up to `wait` (zero: one attempt). `Ok(None)`: not granted.
    fn acquire(
        &self,
        key: &str,
        wait: Duration,
    ) -> impl Future<Output = BenchResult<Option<Self::Guard>>> + Send;
    /// Gives it back; an error if it was no longer ours.
    fn release(&self, guard: Self::Guard) -> impl Future<Output = BenchResult<()>> + Send;
}

/// leasehold through `Locker` and `Lease`.
#[derive(Clone)]
struct Leasehold(Locker);

impl Contender for Leasehold {
    type Guard = leasehold::Lease;
    async fn acquire(&self, key: &str, wait: Duration) -> BenchResult<Option<leasehold::Lease>> {
        let w = if wait.is_zero() { Wait::No } else { Wait::For(wait) };
        match self.0.acquire(key, TTL).wait(w).await {
            Ok(l) => Ok(Some(l)),
            Err(leasehold::Error::Busy { .. }) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }
    async fn release(&self, lease: leasehold::Lease) -> BenchResult<()> {
        match lease.release().await {
            Ok(true) => Ok(()),
            Ok(false) => Err("release found the lease not ours".into()),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// The raw mysql_async client on one connection, sending leasehold's lease statements, or
/// for session mode plain `GET_LOCK(key, 0)` / `RELEASE_LOCK(key)`.
#[derive(Clone)]
struct MyRaw {
    conn: Arc<tokio::sync::Mutex<mysql_async::Conn>>,
    lease: Option<leasehold::backends::mysql::LeaseStatements>,
    session: Option<leasehold::backends::mysql::SessionStatements>,
    owner: String,
}

/// leasehold's `mysql://` URL options (everything else is the driver's).
const MY_OPTIONS: &[&str] = &["mode", "table", "prefix", "fence", "heartbeat"];

impl MyRaw {
    async fn connect(url: &str) -> BenchResult<Self> {
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut keep: Vec<&str> = query
            .split('&')
            .filter(|p| !p.is_empty())
            .filter(|p| !MY_OPTIONS.contains(&p.split_once('=').map_or(*p, |(k, _)| k)))
            .collect();
        if !keep.iter().any(|p| p.starts_with("prefer_socket=")) {
            keep.push("prefer_socket=false"); // TCP, as the store uses
        }
        let session = query.split('&').any(|p| p == "mode=session");
        let (lease, session) = if session {
            let st =
                leasehold::backends::mysql::session_statements(url).map_err(|e| e.to_string())?;
            (None, Some(st))
        } else {
            let st =
                leasehold::backends::mysql::lease_statements(url).map_err(|e| e.to_string())?;
            (Some(st), None)
        };
        let conn = mysql_async::Conn::from_url(format!("{base}?{}", keep.join("&")))
            .await
            .map_err(|e| e.to_string())?;
        let owner = OwnerToken::generate().map_err(|e| e.to_string())?.to_string();
        Ok(MyRaw { conn: Arc::new(tokio::sync::Mutex::new(conn)), lease, session, owner })
    }

    fn label(&self) -> &'static str {
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
                c.exec_drop(&sql.grant, (key.as_bytes(), &self.owner, 30_000_000u64))
                    .await
                    .map_err(|e| e.to_string())?;
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

/// leasehold's raw etcd client on the same connection, sending the requests leasehold's etcd
/// store sends: a conditional put bound to a lease (kept for the whole run) and a delete
/// compared on the create revision.
#[derive(Clone)]
struct EtcdRaw {
    client: EtcdClient,
    prefix: String,
    lease: i64,
    owner: String,
    _store: Arc<leasehold::backends::etcd::EtcdStore>,
}

impl EtcdRaw {
    async fn connect(url: &str) -> BenchResult<Self> {
        let store =
            leasehold::backends::etcd::EtcdStore::connect(url).await.map_err(|e| e.to_string())?;
        let client = store.client();
        let lease = client.lease_grant(60).await.map_err(|e| e.to_string())?.id;
        let owner = OwnerToken::generate().map_err(|e| e.to_string())?.to_string();
        Ok(EtcdRaw {
            prefix: store.prefix().to_owned(),
            client,
            lease,
            owner,
            _store: Arc::new(store),
        })
    }

    fn name(&self, key: &str) -> String {
        if self.prefix.is_empty() { key.to_owned() } else { format!("{}/{key}", self.prefix) }
    }
}

impl Contender for EtcdRaw {
    type Guard = (String, i64);
    async fn acquire(&self, key: &str, _wait: Duration) -> BenchResult<Option<Self::Guard>> {
        use etcd_rpc::{Compare, CompareResult, RangeRequest, RequestOp, TxnRequest};
        let pfx = format!("{}/", self.name(key));
        let lock_key = format!("{pfx}{}", self.owner);
        let first = RangeRequest {
            limit: 1,
            ..RangeRequest::prefix(pfx.as_str())
                .sorted(etcd_rpc::SortTarget::Create, etcd_rpc::SortOrder::Ascend)
        };
        let txn = TxnRequest {
            compare: vec![
                Compare::create_revision(pfx.as_str(), CompareResult::Equal, 0).with_prefix(),
            ],
            success: vec![RequestOp::put(lock_key.as_str(), self.owner.as_str(), self.lease)],
            failure: vec![RequestOp::range(first)],
        };
        let r = self.client.txn(txn).await.map_err(|e| e.to_string())?;
        let rev = r.header.map(|h| h.revision).unwrap_or(0);
        Ok(r.succeeded.then_some((lock_key, rev)))
    }
    async fn release(&self, (lock_key, rev): Self::Guard) -> BenchResult<()> {
        use etcd_rpc::{Compare, CompareResult, RequestOp, TxnRequest};
        let txn = TxnRequest {
            compare: vec![Compare::create_revision(lock_key.as_str(), CompareResult::Equal, rev)],
            success: vec![RequestOp::delete(lock_key.as_str())],
            failure: vec![],
        };
        let r = self.client.txn(txn).await.map_err(|e| e.to_string())?;
        if r.succeeded { Ok(()) } else { Err("raw release found the key not ours".into()) }
    }
}

/// etcd's own lock recipe, driven through the server's Lock RPC (etcd's v3lock service runs
/// `concurrency.Mutex`, the code behind `etcdctl lock`), on a lease of its own kept for the run
/// (the recipe names its key after the lease: contenders need one each).
#[derive(Clone)]
struct EtcdLockRpc(EtcdRaw);

impl EtcdLockRpc {
    async fn new(raw: &EtcdRaw) -> BenchResult<Self> {
        let mut raw = raw.clone();
        raw.lease = raw.client.lease_grant(60).await.map_err(|e| e.to_string())?.id;
        Ok(EtcdLockRpc(raw))
    }
}

impl Contender for EtcdLockRpc {
    type Guard = Vec<u8>;
    async fn acquire(&self, key: &str, wait: Duration) -> BenchResult<Option<Vec<u8>>> {
        let lock = self.0.client.lock(self.0.name(key), self.0.lease);
        match tokio::time::timeout(wait.max(TTL), lock).await {
            Ok(Ok(r)) => Ok(Some(r.key)),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Ok(None),
        }
    }
    async fn release(&self, key: Vec<u8>) -> BenchResult<()> {
        self.0.client.unlock(key).await.map(|_| ()).map_err(|e| e.to_string())
    }
}

/// leasehold's store trait called directly: no `Locker`, no `Lease` (one attempt only).
#[derive(Clone)]
struct StoreOnly(Arc<dyn leasehold::Store>);

impl Contender for StoreOnly {
    type Guard = (leasehold::Key, OwnerToken);
    async fn acquire(&self, key: &str, _wait: Duration) -> BenchResult<Option<Self::Guard>> {
        let k = leasehold::Key::new(key).map_err(|e| e.to_string())?;
        let owner = OwnerToken::generate().map_err(|e| e.to_string())?;
        let req = leasehold::AcquireRequest { key: &k, owner: &owner, ttl: TTL, op_timeout: TTL };
        match self.0.try_acquire(&req).await.map_err(|e| e.to_string())? {
            leasehold::Attempt::Granted(_) => Ok(Some((k, owner))),
            _ => Ok(None),
        }
    }
    async fn release(&self, (k, owner): Self::Guard) -> BenchResult<()> {
        self.0.release(&k, &owner).await.map(|_| ()).map_err(|e| e.to_string())
    }
}

const RAW_RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0";

/// Raw redis-rs: plain `SET NX PX`, then EVALSHA compare-and-delete (one attempt only). With
/// `fenced`, the two scripts leasehold sends instead: the grant (SET NX PX + INCR of a fence
/// counter) and the release (compare-and-delete + PUBLISH), so the pairing isolates what the
/// client side costs.
#[derive(Clone)]
struct Raw {
    conn: redis::aio::ConnectionManager,
    fenced: bool,
    grant: Arc<redis::Script>,
    release: Arc<redis::Script>,
}

impl Raw {
    fn new(r: &RedisSide, fenced: bool) -> Self {
        // leasehold's own script texts, so the pairing stays exact if they change.
        let (lh_grant, lh_release) = leasehold::backends::redis::scripts();
        Raw {
            conn: r.conn.clone(),
            fenced,
            grant: Arc::new(redis::Script::new(lh_grant)),
            release: Arc::new(redis::Script::new(if fenced { lh_release } else { RAW_RELEASE })),
        }
    }
}

impl Contender for Raw {
    type Guard = (String, String);
    async fn acquire(&self, key: &str, _wait: Duration) -> BenchResult<Option<Self::Guard>> {
        let mut c = self.conn.clone();
        let owner = OwnerToken::generate().map_err(|e| e.to_string())?.to_string();
        let granted = if self.fenced {
            let (ok, _fence): (i64, i64) = self
                .grant
                .key(key)
                .key(format!("{key}:fence"))
                .arg(&owner)
                .arg(TTL.as_millis() as u64)
                .invoke_async(&mut c)
                .await
                .map_err(|e| e.to_string())?;
            ok == 1
        } else {
            let ok: Option<String> = redis::cmd("SET")
                .arg(key)
                .arg(&owner)
                .arg("NX")
                .arg("PX")
                .arg(TTL.as_millis() as u64)
                .query_async(&mut c)
                .await
                .map_err(|e| e.to_string())?;
            ok.is_some()
        };
        Ok(granted.then(|| (key.to_owned(), owner)))
    }
    async fn release(&self, (key, owner): Self::Guard) -> BenchResult<()> {
        let mut c = self.conn.clone();
        let mut inv = self.release.key(&key);
        inv.arg(&owner);
        if self.fenced {
            inv.arg(format!("{key}:released"));
        }
        let deleted: i64 = inv.invoke_async(&mut c).await.map_err(|e| e.to_string())?;
        if deleted == 1 { Ok(()) } else { Err("raw release found the key not ours".into()) }
    }
}

/// Back-to-back acquire + release of a free `key` for `d`.
async fn cycles<C: Contender>(c: &C, key: &str, d: Duration) -> BenchResult<RunResult> {
    let (mut acq, mut rel) = (hist(), hist());
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed() < d {
        let t0 = Instant::now();
        let g = c.acquire(key, Duration::ZERO).await?.ok_or("a free key was busy")?;
        let t1 = Instant::now();
        c.release(g).await?;
        acq.record(us(t1 - t0)).ok();
        rel.record(us(t1.elapsed())).ok();
        n += 1;
    }
    Ok(RunResult {
        ops: n,
        elapsed: start.elapsed(),
        acquire: Some(acq),
        release: Some(rel),
        ..Default::default()
    })
}

// ---------------------------------------------------------------- handoff

async fn handoff(
    s: &Settings,
    locker: &Locker,
    redis: Option<&RedisSide>,
    etcd: Option<&EtcdRaw>,
    p: &Progress,
) -> BenchResult<Value> {
    let mut lh = Tally::default();
    let mut separate = Tally::default();
    let mut etcd_lock = Tally::default();
    // Waiters in other processes are woken by the store's notification (NOTIFY, pub/sub),
    // not by this process's queue: measure that path with one store connection per task.
    let per_task: Vec<Leasehold> =
        if ["postgres", "etcd", "zk"].iter().any(|scheme| s.url.starts_with(scheme)) {
            let mut v = Vec::new();
            for _ in 0..s.tasks {
                v.push(Leasehold(Locker::connect(&s.url).await.map_err(|e| e.to_string())?));
            }
            v
        } else {
            Vec::new()
        };
    #[cfg_attr(not(feature = "peers"), allow(unused_mut))]
    let mut peer = Tally::default();
    for run in 0..s.runs {
        p.step(format!("handoff run {}/{}", run + 1, s.runs));
        if !per_task.is_empty() {
            separate.add(handoff_each(per_task.clone(), &unique("h"), s.duration).await?);
        }
        let before = match redis {
            Some(r) => Some(r.calls(LEASEHOLD_REQUESTS).await?),
            None => None,
        };
        let mut r =
            handoff_run(&Leasehold(locker.clone()), &unique("h"), s.tasks, s.duration).await?;
        if let (Some(rs), Some(b)) = (redis, before) {
            r.commands = Some(rs.calls(LEASEHOLD_REQUESTS).await?.saturating_sub(b));
        }
        lh.add(r);
        if let Some(etcd) = etcd {
            let mut each = Vec::new();
            for _ in 0..s.tasks {
                each.push(EtcdLockRpc::new(etcd).await?);
            }
            etcd_lock.add(handoff_each(each, &unique("h"), s.duration).await?);
        }
        #[cfg(feature = "peers")]
        if let Some(rs) = redis {
            let b = rs.calls(RSLOCK_REQUESTS).await?;
            let peer_c = peers::Rslock(rslock::LockManager::new(vec![rs.url.clone()]));
            let mut r = handoff_run(&peer_c, &unique("h"), s.tasks, s.duration).await?;
            r.commands = Some(rs.calls(RSLOCK_REQUESTS).await?.saturating_sub(b));
            peer.add(r);
        }
    }
    let mut rows = vec![lh.json("leasehold (wait forever, notified)")];
    if !separate.per_run.is_empty() {
        rows.push(
            separate.json(
                "leasehold, one store connection per task (woken by the store's notification)",
            ),
        );
    }
    let mut v = json!({
        "what": format!(
            "{} tasks on one key, empty critical section. A handoff is an acquisition by another task than the previous holder; handoff wait runs from the holder calling release to the next waiter's acquire returning.{}",
            s.tasks,
            if redis.is_some() { " Store requests are client requests counted by INFO commandstats." } else { "" }
        ),
    });
    if !etcd_lock.per_run.is_empty() {
        rows.push(etcd_lock.json(
            "etcd's Lock RPC (server-side concurrency.Mutex, as etcdctl lock), one lease per task",
        ));
        let ratio =
            median(lh.handoffs_per_run.clone()) / median(etcd_lock.handoffs_per_run.clone());
        v["leasehold_handoffs_vs_etcd_lock"] = json!((ratio * 100.0).round() / 100.0);
    }
    if !peer.per_run.is_empty() {
        rows.push(peer.json("rslock 0.10 (acquire_no_guard: retries with 0-200 ms sleeps)"));
        let ratio = median(lh.handoffs_per_run.clone()) / median(peer.handoffs_per_run.clone());
        v["leasehold_handoffs_vs_peer"] = json!((ratio * 10.0).round() / 10.0);
    }
    v["contenders"] = json!(rows);
    Ok(v)
}

/// `tasks` tasks taking turns on `key` for `d`, each acquiring with a wait.
async fn handoff_run<C: Contender>(
    c: &C,
    key: &str,
    tasks: usize,
    d: Duration,
) -> BenchResult<RunResult> {
    handoff_each(vec![c.clone(); tasks], key, d).await
}

/// Like [`handoff_run`] with one contender per task (e.g. one store connection each).
async fn handoff_each<C: Contender>(cs: Vec<C>, key: &str, d: Duration) -> BenchResult<RunResult> {
    let base = Instant::now();
    let deadline = base + d;
    // Nanoseconds since `base` at which the current holder started its release.
    let released_at = Arc::new(AtomicU64::new(0));
    let last_holder = Arc::new(AtomicU64::new(u64::MAX));
    let mut handles = Vec::new();
    for (task, c) in cs.into_iter().enumerate() {
        let task = task as u64;
        let (key, released_at, last_holder) =
            (key.to_string(), released_at.clone(), last_holder.clone());
        handles.push(tokio::spawn(async move {
            let (mut acq, mut hand) = (hist(), hist());
            let (mut n, mut changes) = (0u64, 0u64);
            while Instant::now() < deadline {
                let t0 = base.elapsed().as_nanos() as u64;
                let wait =
                    deadline.saturating_duration_since(Instant::now()) + Duration::from_secs(2);
                let Some(guard) = c.acquire(&key, wait).await? else { break };
                let got = base.elapsed().as_nanos() as u64;
                acq.record(((got - t0) / 1000).max(1)).ok();
                let rel = released_at.load(Ordering::SeqCst);
                if rel > t0 && got >= rel {
                    hand.record(((got - rel) / 1000).max(1)).ok();
                }
                n += 1;
                if last_holder.swap(task, Ordering::SeqCst) != task {
                    changes += 1;
                }
                released_at.store(base.elapsed().as_nanos() as u64, Ordering::SeqCst);
                c.release(guard).await?;
            }
            Ok::<_, String>((n, changes, acq, hand))
        }));
    }
    let (mut ops, mut changes, mut acq, mut hand) = (0, 0, hist(), hist());
    for h in handles {
        let (n, ch, a, hd) = h.await.map_err(|e| e.to_string())??;
        ops += n;
        changes += ch;
        acq.add(a).ok();
        hand.add(hd).ok();
    }
    Ok(RunResult {
        ops,
        handoffs: Some(changes),
        elapsed: base.elapsed(),
        acquire: Some(acq),
        handoff: Some(hand),
        ..Default::default()
    })
}

// ---------------------------------------------------------------- many keys

async fn many_keys(
    s: &Settings,
    locker: &Locker,
    redis: Option<&RedisSide>,
    p: &Progress,
) -> BenchResult<Value> {
    const TASKS: usize = 64;
    let mut lh = Tally::default();
    let (mut raw, mut raw_fenced) = (Tally::default(), Tally::default());
    let mut rb = Vec::new();
    // One raw client (one multiplexed connection) shared by its 64 tasks, like leasehold's.
    let raw_c = redis.map(|r| (Raw::new(r, false), Raw::new(r, true)));
    let lh_c = Leasehold(locker.clone());
    for run in 0..s.runs {
        p.step(format!("many-keys run {}/{}", run + 1, s.runs));
        let Some((r, (plain, fenced))) = redis.zip(raw_c.as_ref()) else {
            lh.add(many(&lh_c, TASKS, s.duration).await?);
            continue;
        };
        // redis-benchmark, a separate process, runs before or after the in-process three,
        // which take turns in slices.
        if run % 2 == 0 {
            rb.push(redis_benchmark(r, s.duration).await?);
        }
        let mut acc: Vec<RunResult> = (0..3).map(|_| RunResult::default()).collect();
        let slice = s.duration / SLICES;
        for i in 0..SLICES as usize {
            for turn in 0..3 {
                let who = (turn + i + run) % 3;
                acc[who].merge(match who {
                    0 => many(&lh_c, TASKS, slice).await?,
                    1 => many(plain, TASKS, slice).await?,
                    _ => many(fenced, TASKS, slice).await?,
                });
            }
        }
        let mut acc = acc.into_iter();
        for t in [&mut lh, &mut raw, &mut raw_fenced] {
            t.add(acc.next().expect("one per contender"));
        }
        if run % 2 == 1 {
            rb.push(redis_benchmark(r, s.duration).await?);
        }
    }
    let mut rows = vec![lh.json("leasehold")];
    if raw_c.is_some() {
        rows.push(raw.json("raw redis-rs: SET NX PX + EVALSHA compare-and-delete, 64 tasks on one connection manager"));
        rows.push(raw_fenced.json("raw redis-rs sending leasehold's two scripts (fenced grant, release + PUBLISH), 64 tasks on one connection manager"));
    }
    let mut v = json!({
        "what": format!("{TASKS} tasks, each acquiring and releasing its own key, all over one multiplexed connection"),
        "contenders": rows,
    });
    if !rb.is_empty() {
        let rb_med = median(rb.clone());
        let lh_med = median(lh.per_run.clone());
        let half =
            |t: &Tally| ((median(t.per_run.clone()) / (rb_med / 2.0)) * 1000.0).round() / 1000.0;
        // The ceiling the server sets: the same figure for raw clients in the same run.
        v["raw_cycles_vs_half_redis_benchmark"] = json!(half(&raw));
        v["raw_fenced_cycles_vs_half_redis_benchmark"] = json!(half(&raw_fenced));
        v["redis_benchmark"] = json!({
            "command": "redis-benchmark -c 50 -P 16 -r 1000000 SET bench:rb:__rand_int__ v NX PX 30000",
            "ops_per_s_median": rb_med.round(),
            "ops_per_s_runs": rb.iter().map(|v| v.round()).collect::<Vec<_>>(),
        });
        // A cycle is two commands: compare with half of redis-benchmark's ops/s.
        v["leasehold_cycles_vs_half_redis_benchmark"] =
            json!(((lh_med / (rb_med / 2.0)) * 1000.0).round() / 1000.0);
    }
    Ok(v)
}

/// `tasks` tasks, each running [`cycles`] on its own key at the same time.
async fn many<C: Contender>(c: &C, tasks: usize, d: Duration) -> BenchResult<RunResult> {
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { cycles(&c, &unique("mk"), d).await })
        })
        .collect();
    let mut total =
        RunResult { acquire: Some(hist()), release: Some(hist()), ..Default::default() };
    for h in handles {
        let r = h.await.map_err(|e| e.to_string())??;
        total.ops += r.ops;
        total.elapsed = total.elapsed.max(r.elapsed);
        for (sum, part) in [(&mut total.acquire, r.acquire), (&mut total.release, r.release)] {
            if let (Some(s), Some(p)) = (sum.as_mut(), part) {
                s.add(p).ok();
            }
        }
    }
    Ok(total)
}

/// `redis-benchmark` doing `SET … NX PX` with 50 clients and 16-deep pipelines, for about
/// `d`. Returns requests per second.
async fn redis_benchmark(r: &RedisSide, d: Duration) -> BenchResult<f64> {
    // Size the request count from a short probe so the run lasts about `d`.
    let probe = run_redis_benchmark(r, 100_000).await?;
    let n = ((probe * d.as_secs_f64()) as u64).clamp(100_000, 50_000_000);
    run_redis_benchmark(r, n).await
}

async fn run_redis_benchmark(r: &RedisSide, n: u64) -> BenchResult<f64> {
    let out = tokio::process::Command::new("redis-benchmark")
        .args(["-h", &r.host, "-p", &r.port.to_string(), "-c", "50", "-P", "16", "-r", "1000000"])
        .args([
            "-n",
            &n.to_string(),
            "-q",
            "SET",
            "bench:rb:__rand_int__",
            "v",
            "NX",
            "PX",
            "30000",
        ])
        .output()
        .await
        .map_err(|e| format!("cannot run redis-benchmark (package redis-tools): {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // The last line with "requests per second" holds the final figure.
    text.split(['\r', '\n'])
        .rfind(|l| l.contains("requests per second"))
        .and_then(|l| l.split(" requests per second").next())
        .and_then(|l| l.split_whitespace().next_back())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("cannot read redis-benchmark output: {text}"))
}

// ---------------------------------------------------------------- hold many

async fn hold_many(
    s: &Settings,
    locker: &Locker,
    redis: Option<&RedisSide>,
    p: &Progress,
) -> BenchResult<Value> {
    let ttl = Duration::from_secs(3);
    let mut runs = Vec::new();
    for run in 0..s.runs {
        p.step(format!("hold-many run {}/{} ({} leases)", run + 1, s.runs, s.leases));
        let rss_before = rss_bytes();
        let prefix = unique("hm");
        let t0 = Instant::now();
        let leases = acquire_many(locker, &prefix, s.leases, ttl).await?;
        let acquire_s = t0.elapsed().as_secs_f64();
        let rss_held = rss_bytes();
        // Hold for at least three TTLs, sampling how long ago random leases were renewed.
        let hold = s.duration.max(ttl * 3);
        let mut oldest_renewal = Duration::ZERO;
        let mut samples = 0u64;
        let end = Instant::now() + hold;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ (run as u64);
        while Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if let Some(r) = redis {
                let mut pipe = redis::pipe();
                let mut keys = Vec::new();
                for _ in 0..50 {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let i = (seed % leases.len() as u64) as usize;
                    keys.push(i);
                    pipe.cmd("PTTL").arg(format!("leasehold:{{{}}}", leases[i].key().as_str()));
                }
                let mut c = r.conn.clone();
                let pttls: Vec<i64> = pipe.query_async(&mut c).await.map_err(|e| e.to_string())?;
                for p in pttls {
                    samples += 1;
                    let left = Duration::from_millis(p.max(0) as u64);
                    oldest_renewal = oldest_renewal.max(ttl.saturating_sub(left));
                }
            }
        }
        let lost = leases.iter().filter(|l| l.is_lost()).count();
        let rss_end = rss_bytes();
        release_many(leases).await?;
        runs.push(json!({
            "leases": s.leases,
            "acquire_all_s": (acquire_s * 100.0).round() / 100.0,
            "held_s": hold.as_secs_f64(),
            "lost": lost,
            "oldest_renewal_seen_ms": if samples > 0 { json!(oldest_renewal.as_millis() as u64) } else { Value::Null },
            "pttl_samples": samples,
            "renew_interval_ms": (ttl / 3).as_millis() as u64,
            "rss_mb_before": rss_before.map(|b| b / 1_000_000),
            "rss_mb_holding": rss_held.map(|b| b / 1_000_000),
            "rss_mb_end": rss_end.map(|b| b / 1_000_000),
        }));
    }
    Ok(json!({
        "what": format!("{} leases, ttl {}, auto-renew every ttl/3 (batched: one round trip per tick)", s.leases, dur::human(ttl)),
        "runs": runs,
    }))
}

async fn acquire_many(
    locker: &Locker,
    prefix: &str,
    n: usize,
    ttl: Duration,
) -> BenchResult<Vec<leasehold::Lease>> {
    const PAR: usize = 64;
    let mut handles = Vec::new();
    for t in 0..PAR {
        let (locker, prefix) = (locker.clone(), prefix.to_string());
        handles.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for i in (t..n).step_by(PAR) {
                let lease = locker
                    .acquire(&format!("{prefix}:{i}"), ttl)
                    .auto_renew(true)
                    .await
                    .map_err(|e| e.to_string())?;
                out.push(lease);
            }
            Ok::<_, String>(out)
        }));
    }
    let mut all = Vec::with_capacity(n);
    for h in handles {
        all.extend(h.await.map_err(|e| e.to_string())??);
    }
    Ok(all)
}

async fn release_many(leases: Vec<leasehold::Lease>) -> BenchResult<()> {
    let mut chunks: Vec<Vec<leasehold::Lease>> = (0..64).map(|_| Vec::new()).collect();
    for (i, l) in leases.into_iter().enumerate() {
        chunks[i % 64].push(l);
    }
    let handles: Vec<_> = chunks
        .into_iter()
        .map(|c| {
            tokio::spawn(async move {
                for l in c {
                    l.release().await.map_err(|e| e.to_string())?;
                }
                Ok::<_, String>(())
            })
        })
        .collect();
    for h in handles {
        h.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}

fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

// ---------------------------------------------------------------- output

/// A plain-text table of a report.
pub fn table(r: &Value) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "store {} ({}{}) · {} runs × {} s · tokio {} runtime · throughput = median over runs · latency µs p50/p90/p99/p99.9/max over all samples\n",
        r["store"].as_str().unwrap_or("?"),
        r["backend"].as_str().unwrap_or("?"),
        r["server_version"].as_str().map(|v| format!(" {v}")).unwrap_or_default(),
        r["runs"],
        r["duration_s"],
        r["runtime"].as_str().unwrap_or("?"),
    ));
    let Some(scs) = r["scenarios"].as_object() else { return out };
    for (name, sc) in scs {
        out.push_str(&format!("\n[{name}] {}\n", sc["what"].as_str().unwrap_or("")));
        if let Some(rows) = sc["contenders"].as_array() {
            for c in rows {
                out.push_str(&format!("  {}\n", c["contender"].as_str().unwrap_or("?")));
                out.push_str(&format!(
                    "      acquisitions/s {} (runs {})",
                    c["ops_per_s_median"], c["ops_per_s_runs"]
                ));
                if !c["handoffs_per_s_median"].is_null() {
                    out.push_str(&format!(
                        "  handoffs/s {} (runs {})",
                        c["handoffs_per_s_median"], c["handoffs_per_s_runs"]
                    ));
                }
                for (k, label) in [
                    ("acquire_us", "acquire"),
                    ("release_us", "release"),
                    ("handoff_us", "handoff wait"),
                ] {
                    if !c[k].is_null() {
                        out.push_str(&format!("  {label} {}", pct_text(&c[k])));
                    }
                }
                if !c["store_commands_per_acquisition"].is_null() {
                    out.push_str(&format!(
                        "  store requests/acquisition {}",
                        c["store_commands_per_acquisition"]
                    ));
                }
                out.push('\n');
            }
        }
        for (k, label) in [
            (
                "leasehold_time_per_cycle_vs_raw",
                "leasehold time per cycle ÷ the raw client's (first raw row above), median of per-run ratios",
            ),
            (
                "leasehold_time_per_cycle_vs_raw_fenced",
                "leasehold time per cycle ÷ raw client's sending leasehold's two scripts",
            ),
            ("leasehold_handoffs_vs_peer", "leasehold handoffs/s ÷ peer's"),
            (
                "leasehold_cycles_vs_half_redis_benchmark",
                "leasehold cycles/s ÷ (redis-benchmark ops/s ÷ 2)",
            ),
            (
                "raw_cycles_vs_half_redis_benchmark",
                "raw redis-rs (SET NX PX + compare-and-delete) cycles/s ÷ (redis-benchmark ops/s ÷ 2)",
            ),
            (
                "raw_fenced_cycles_vs_half_redis_benchmark",
                "raw redis-rs sending leasehold's scripts, cycles/s ÷ (redis-benchmark ops/s ÷ 2)",
            ),
        ] {
            if !sc[k].is_null() {
                out.push_str(&format!("  → {label}: {}\n", sc[k]));
            }
        }
        for (k, label) in [
            ("per_run_ratios", "vs the raw client"),
            ("per_run_ratios_fenced", "vs leasehold's scripts sent raw"),
        ] {
            if !sc[k].is_null() {
                out.push_str(&format!("    per-run ratios {label}: {}\n", sc[k]));
            }
        }
        if let Some(list) = sc["leasehold_time_per_cycle_vs_pgbench"].as_array() {
            for r in list {
                out.push_str(&format!(
                    "  → leasehold time per cycle ÷ {}'s: {} (per run {})\n",
                    r["baseline"].as_str().unwrap_or("?"),
                    r["median"],
                    r["per_run"]
                ));
            }
        }
        if !sc["server_us_per_request"].is_null() {
            let u = &sc["server_us_per_request"];
            out.push_str(&format!(
                "  server time per request (INFO commandstats, median over runs): leasehold EVALSHA (grant or release) {} µs, raw bare SET {} µs\n",
                u["leasehold_evalsha"], u["raw_set"]
            ));
        }
        if !sc["redis_benchmark"].is_null() {
            let rb = &sc["redis_benchmark"];
            out.push_str(&format!(
                "  redis-benchmark: {} ops/s (runs {}) — {}\n",
                rb["ops_per_s_median"],
                rb["ops_per_s_runs"],
                rb["command"].as_str().unwrap_or("")
            ));
        }
        if let Some(runs) = sc["runs"].as_array() {
            for (i, run) in runs.iter().enumerate() {
                let renewal = if run["oldest_renewal_seen_ms"].is_null() {
                    "no PTTL sampling on this store".to_string()
                } else {
                    format!(
                        "oldest renewal seen {} ms (renew interval {} ms, {} samples)",
                        run["oldest_renewal_seen_ms"],
                        run["renew_interval_ms"],
                        run["pttl_samples"]
                    )
                };
                out.push_str(&format!(
                    "  run {}: {} leases acquired in {} s, held {} s: lost {}, {renewal}, RSS {} MB before → {} MB holding → {} MB at end\n",
                    i + 1, run["leases"], run["acquire_all_s"], run["held_s"], run["lost"],
                    run["rss_mb_before"], run["rss_mb_holding"], run["rss_mb_end"],
                ));
            }
        }
    }
    out
}

#[cfg(feature = "peers")]
mod peers {
    //! The peer crate, driven the way its documentation shows.
    use super::*;
    use rslock::LockManager;

    /// rslock: `lock` (3 tries, 0-200 ms apart) for one attempt, `acquire_no_guard` (loops on
    /// `lock`) to wait, `unlock` to release.
    #[derive(Clone)]
    pub struct Rslock(pub LockManager);

    impl Contender for Rslock {
        type Guard = rslock::Lock;
        async fn acquire(&self, key: &str, wait: Duration) -> BenchResult<Option<rslock::Lock>> {
            if wait.is_zero() {
                return self.0.lock(key.as_bytes(), TTL).await.map(Some).map_err(|e| e.to_string());
            }
            match tokio::time::timeout(wait, self.0.acquire_no_guard(key.as_bytes(), TTL)).await {
                Ok(r) => r.map(Some).map_err(|e| e.to_string()),
                Err(_) => Ok(None),
            }
        }
        async fn release(&self, lock: rslock::Lock) -> BenchResult<()> {
            self.0.unlock(&lock).await;
            Ok(())
        }
    }
}
