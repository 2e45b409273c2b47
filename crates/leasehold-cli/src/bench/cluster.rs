//! `bench --store redis-cluster://… --single redis://…`: a Redis Cluster against one Redis
//! server in the same run. Uncontended, handoff and many-keys cycles/s through leasehold on
//! each (alternating order per run), the server time per cycle on each master (`INFO
//! commandstats` of the requests leasehold sends, before and after), how bench-style key
//! names spread over the masters, and `redis-benchmark` (`--cluster` on the cluster) for the
//! raw rate. The baseline for what leasehold adds: raw redis-rs sending leasehold's own grant
//! and release scripts, uncontended, on one server's connection and on redis-rs's cluster
//! connection, in the same runs: a cluster node runs the same script slower than a plain
//! server, and redis-rs's cluster routing costs its own, so leasehold's share is its ratio
//! over the raw client's.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::handoff::handoff_run;
use super::many_keys::many;
use super::redis::{Raw, command_stats, redis_benchmark_rps};
use super::{
    BenchResult, LEASEHOLD_REQUESTS, Leasehold, Progress, RunResult, Settings, cycles, median,
    round_to, unique,
};

/// What a sharded subscription adds to [`LEASEHOLD_REQUESTS`] on a cluster.
const SHARD_REQUESTS: &[&str] = &["ssubscribe", "sunsubscribe"];
/// The script calls: one grant and one release per uncontended cycle.
const SCRIPT_CALLS: &[&str] = &["evalsha", "eval"];
/// Bench-style key names sampled for the spread.
const SPREAD_SAMPLE: usize = 10_000;

/// The comparison's figures (`cluster.json`).
#[derive(Debug, Serialize)]
pub struct Comparison {
    pub cluster: String,
    pub single: String,
    pub masters: Vec<String>,
    pub runs: usize,
    pub duration_s: f64,
    pub scenarios: Vec<ScenarioRow>,
    /// Of [`SPREAD_SAMPLE`] bench key names, the share each master serves.
    pub key_share_per_master: Vec<f64>,
    /// redis-benchmark `SET … NX PX` ops/s (median over runs): single, cluster.
    pub redis_benchmark: (f64, f64),
}

/// One scenario on both sides.
#[derive(Debug, Serialize)]
pub struct ScenarioRow {
    pub name: &'static str,
    pub single_cycles_per_s: Vec<f64>,
    pub cluster_cycles_per_s: Vec<f64>,
    /// Median cluster ÷ median single.
    pub ratio: f64,
    /// Server µs per cycle of the single server (median over runs).
    pub single_us_per_cycle: f64,
    /// Server µs per cycle on each master that served cycles (the master's µs over the cycles
    /// it served, counted by its script calls), medians over runs.
    pub cluster_us_per_cycle: BTreeMap<String, f64>,
    /// Share of the script calls each master served (medians over runs).
    pub cycle_share: BTreeMap<String, f64>,
    /// Server µs per cycle over every master together (their µs over the run's cycles),
    /// median over runs: what a cycle costs the cluster wherever its key lives (each run's
    /// key may land on another master, so per-master medians can miss it).
    pub cluster_us_per_cycle_all: f64,
    /// Script calls per cycle (median over runs): single, cluster. Above 2, waiters retried.
    pub scripts_per_cycle: (f64, f64),
}

/// One side: a locker and the nodes whose statistics count.
struct Side {
    locker: leasehold::Locker,
    nodes: Vec<(String, ::redis::aio::MultiplexedConnection)>,
}

impl Side {
    async fn stats(&self) -> BenchResult<Vec<((u64, u64), u64)>> {
        let names: Vec<&str> = LEASEHOLD_REQUESTS.iter().chain(SHARD_REQUESTS).copied().collect();
        let mut out = Vec::new();
        for (_, c) in &self.nodes {
            let mut c = c.clone();
            let all = command_stats(&mut c, &names).await?;
            let scripts = command_stats(&mut c, SCRIPT_CALLS).await?.0;
            out.push((all, scripts));
        }
        Ok(out)
    }
}

/// A raw connection to the server at `addr` of the deployment `store` names, with its
/// credentials.
async fn node(
    addr: &str,
    store: &leasehold::StoreUrl,
) -> BenchResult<::redis::aio::MultiplexedConnection> {
    let url =
        leasehold::backends::redis::tools::node_url(store, addr).map_err(|e| e.to_string())?;
    let client = ::redis::Client::open(url).map_err(|e| format!("{addr}: {e}"))?;
    client.get_multiplexed_async_connection().await.map_err(|e| format!("{addr}: {e}"))
}

/// The cluster's masters serving slots, `host:port`, with their slot ranges.
async fn masters(
    seed: &str,
    store: &leasehold::StoreUrl,
) -> BenchResult<Vec<(String, Vec<(u16, u16)>)>> {
    let mut c = node(seed, store).await?;
    let text: String = ::redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut c)
        .await
        .map_err(|e| format!("CLUSTER NODES: {e}"))?;
    let mut out = Vec::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 9 || !f[2].contains("master") || f[2].contains("fail") {
            continue;
        }
        let addr = f[1].split('@').next().unwrap_or_default().to_owned();
        let slots = f[8..]
            .iter()
            .filter_map(|r| {
                let (a, b) = r.split_once('-').unwrap_or((r, r));
                Some((a.parse().ok()?, b.parse().ok()?))
            })
            .collect();
        out.push((addr, slots));
    }
    out.sort();
    Ok(out)
}

/// Runs the comparison.
pub(super) async fn compare(
    s: &Settings,
    single: &leasehold::StoreUrl,
    p: &Progress,
) -> BenchResult<Comparison> {
    let seed_list = s.url.hosts();
    let seed = seed_list.first().ok_or("no seed")?;
    let ms = masters(seed, &s.url).await?;
    let mut cluster_nodes = Vec::new();
    for (addr, _) in &ms {
        cluster_nodes.push((addr.clone(), node(addr, &s.url).await?));
    }
    let single_hostport = *single.hosts().first().ok_or("no server")?;
    let sides = [
        Side {
            locker: super::connect(single).await?,
            nodes: vec![(single_hostport.to_owned(), node(single_hostport, single).await?)],
        },
        Side { locker: super::connect(&s.url).await?, nodes: cluster_nodes },
    ];
    let names = ["uncontended", "handoff", "many-keys", "uncontended, raw redis-rs"];
    let raw_single = Raw::on(sides[0].nodes[0].1.clone(), true, "PUBLISH");
    let seed_urls: Vec<String> = seed_list
        .iter()
        .map(|h| leasehold::backends::redis::tools::node_url(&s.url, h))
        .collect::<leasehold::Result<_>>()
        .map_err(|e| e.to_string())?;
    let cluster_conn = ::redis::cluster::ClusterClient::new(seed_urls)
        .map_err(|e| format!("cluster client: {e}"))?
        .get_async_connection()
        .await
        .map_err(|e| format!("cluster connection: {e}"))?;
    let raw_cluster = Raw::on(cluster_conn, true, "SPUBLISH");
    // [scenario][side] → per run (cycles/s, per node (µs, script calls))
    type Sample = (f64, u64, Vec<(u64, u64)>);
    let mut samples: Vec<[Vec<Sample>; 2]> =
        (0..names.len()).map(|_| [Vec::new(), Vec::new()]).collect();
    let mut rb = [Vec::new(), Vec::new()];
    for run in 0..s.runs {
        p.step(format!("cluster vs single run {}/{}", run + 1, s.runs));
        let order = if run % 2 == 0 { [0, 1] } else { [1, 0] };
        for (sc, slot) in samples.iter_mut().enumerate() {
            for &side in &order {
                let sd = &sides[side];
                let lh = Leasehold(sd.locker.clone());
                let before = sd.stats().await?;
                // The raw client names keys as the store does (default prefix, key in braces).
                let raw_key = format!("leasehold:{{{}}}", unique("r"));
                let r: RunResult = match (sc, side) {
                    (0, _) => cycles(&lh, &unique("u"), s.duration).await?,
                    (1, _) => handoff_run(&lh, &unique("h"), s.tasks, s.duration).await?,
                    (2, _) => many(&lh, 64, s.duration).await?,
                    (_, 0) => cycles(&raw_single, &raw_key, s.duration).await?,
                    _ => cycles(&raw_cluster, &raw_key, s.duration).await?,
                };
                let after = sd.stats().await?;
                let rate = r.ops as f64 / r.elapsed.as_secs_f64();
                let per_node = before
                    .iter()
                    .zip(&after)
                    .map(|(b, a)| (a.0.1.saturating_sub(b.0.1), a.1.saturating_sub(b.1)))
                    .collect();
                slot[side].push((rate, r.ops, per_node));
            }
        }
        for &side in &order {
            rb[side].push(raw_rate(&sides[side], side == 1, s.duration).await?);
        }
    }
    let mut scenarios = Vec::new();
    for (sc, slot) in samples.iter().enumerate() {
        let rates = |side: usize| slot[side].iter().map(|x| x.0).collect::<Vec<f64>>();
        // µs per cycle of node i in one run: its µs over the cycles it served (the run's
        // cycles × its share of the script calls).
        let per_cycle = |side: usize, i: usize| -> Vec<f64> {
            slot[side]
                .iter()
                .filter_map(|(_, ops, nodes)| {
                    let total: u64 = nodes.iter().map(|n| n.1).sum();
                    let (us, calls) = nodes[i];
                    let cycles = *ops as f64 * calls as f64 / total as f64;
                    (calls > 0 && total > 0).then(|| us as f64 / cycles)
                })
                .collect()
        };
        let share = |i: usize| -> Vec<f64> {
            slot[1]
                .iter()
                .map(|(_, _, nodes)| {
                    let total: u64 = nodes.iter().map(|n| n.1).sum();
                    nodes[i].1 as f64 / total.max(1) as f64
                })
                .collect()
        };
        let (single_r, cluster_r) = (rates(0), rates(1));
        let all_us = slot[1]
            .iter()
            .map(|(_, ops, nodes)| {
                nodes.iter().map(|n| n.0).sum::<u64>() as f64 / (*ops).max(1) as f64
            })
            .collect();
        let scripts_per_cycle = |side: usize| -> f64 {
            let v = slot[side]
                .iter()
                .map(|(_, ops, nodes)| {
                    nodes.iter().map(|n| n.1).sum::<u64>() as f64 / (*ops).max(1) as f64
                })
                .collect();
            round_to(median(v), 2)
        };
        let mut cluster_us = BTreeMap::new();
        let mut cycle_share = BTreeMap::new();
        for (i, (addr, _)) in sides[1].nodes.iter().enumerate() {
            let sh = median(share(i));
            cycle_share.insert(addr.clone(), round_to(sh, 3));
            let v = per_cycle(1, i);
            // A master that served under 1 % of the calls (a subscription, a stray read)
            // has no per-cycle cost worth stating.
            if !v.is_empty() && sh >= 0.01 {
                cluster_us.insert(addr.clone(), round_to(median(v), 2));
            }
        }
        scenarios.push(ScenarioRow {
            name: names[sc],
            ratio: round_to(median(cluster_r.clone()) / median(single_r.clone()), 3),
            single_cycles_per_s: single_r.iter().map(|x| x.round()).collect(),
            cluster_cycles_per_s: cluster_r.iter().map(|x| x.round()).collect(),
            single_us_per_cycle: round_to(median(per_cycle(0, 0)), 2),
            cluster_us_per_cycle: cluster_us,
            cluster_us_per_cycle_all: round_to(median(all_us), 2),
            cycle_share,
            scripts_per_cycle: (scripts_per_cycle(0), scripts_per_cycle(1)),
        });
    }
    let key_share_per_master = spread(&sides[1], &ms).await?;
    Ok(Comparison {
        cluster: s.url.to_string(),
        single: single.to_string(),
        masters: ms.into_iter().map(|m| m.0).collect(),
        runs: s.runs,
        duration_s: s.duration.as_secs_f64(),
        scenarios,
        key_share_per_master,
        redis_benchmark: (median(rb[0].clone()).round(), median(rb[1].clone()).round()),
    })
}

/// Shares of [`SPREAD_SAMPLE`] bench key names (as the store names them) per master, by
/// `CLUSTER KEYSLOT` and the masters' slot ranges.
async fn spread(side: &Side, ms: &[(String, Vec<(u16, u16)>)]) -> BenchResult<Vec<f64>> {
    let mut pipe = ::redis::pipe();
    for _ in 0..SPREAD_SAMPLE {
        pipe.cmd("CLUSTER").arg("KEYSLOT").arg(format!("leasehold:{{{}}}", unique("mk")));
    }
    let mut c = side.nodes[0].1.clone();
    let slots: Vec<u16> = pipe.query_async(&mut c).await.map_err(|e| e.to_string())?;
    let mut count = vec![0usize; ms.len()];
    for slot in slots {
        if let Some(i) = ms.iter().position(|m| m.1.iter().any(|&(a, b)| a <= slot && slot <= b)) {
            count[i] += 1;
        }
    }
    Ok(count.iter().map(|&n| round_to(n as f64 / SPREAD_SAMPLE as f64, 4)).collect())
}

/// redis-benchmark `SET … NX PX` (50 clients, 16-deep pipelines) for about `d`; with
/// `--cluster` on the cluster (its `{tag}` keys go to every master).
async fn raw_rate(side: &Side, cluster: bool, d: Duration) -> BenchResult<f64> {
    let (host, port) = side.nodes[0].0.rsplit_once(':').ok_or("node address")?;
    let probe = redis_benchmark_rps(host, port, cluster, 100_000).await?;
    let n = ((probe * d.as_secs_f64()) as u64).clamp(100_000, 50_000_000);
    redis_benchmark_rps(host, port, cluster, n).await
}

/// The comparison as text (what BENCHMARKS.md quotes).
pub fn table(c: &Comparison) -> String {
    let mut out = format!(
        "cluster {} (masters {}) vs single {} · {} runs × {} s · cycles/s per run · server µs per cycle (INFO commandstats), medians over runs\n",
        c.cluster,
        c.masters.join(", "),
        c.single,
        c.runs,
        c.duration_s
    );
    for r in &c.scenarios {
        out.push_str(&format!(
            "\n[{}]\n  single  cycles/s {:?}  µs/cycle {}  scripts/cycle {}\n  cluster cycles/s {:?}  µs/cycle {} (all masters), per master {:?}  share of script calls {:?}  scripts/cycle {}\n  → cluster ÷ single cycles/s: {}\n",
            r.name,
            r.single_cycles_per_s,
            r.single_us_per_cycle,
            r.scripts_per_cycle.0,
            r.cluster_cycles_per_s,
            r.cluster_us_per_cycle_all,
            r.cluster_us_per_cycle,
            r.cycle_share,
            r.scripts_per_cycle.1,
            r.ratio
        ));
    }
    if let (Some(lh), Some(raw)) = (c.scenarios.first(), c.scenarios.get(3)) {
        let us = |r: &ScenarioRow| r.cluster_us_per_cycle_all / r.single_us_per_cycle;
        out.push_str(&format!(
            "\nuncontended, leasehold's cluster ÷ single over raw redis-rs's: cycles/s {}, server µs per cycle {}\n",
            round_to(lh.ratio / raw.ratio, 3),
            round_to(us(lh) / us(raw), 3)
        ));
    }
    out.push_str(&format!(
        "\nkey share per master ({SPREAD_SAMPLE} bench key names): {:?}\nredis-benchmark -c 50 -P 16 SET NX PX ops/s: single {}, cluster (--cluster) {}\n",
        c.key_share_per_master, c.redis_benchmark.0, c.redis_benchmark.1
    ));
    out
}
