//! `bench --store URL --single REFERENCE`: a store against a reference store of the same
//! family in the same run (a sharded deployment against one server of its kind), each side
//! as its kit has it ([`leasehold_harness::family::Family`]). Uncontended, handoff and
//! many-keys cycles/s through leasehold on each (alternating order per run), the server time
//! per cycle on each member (the members' request counters, before and after), how bench-style
//! key names spread over the members, and the store's load tool for the raw rate. The baseline
//! for what leasehold adds: the kit's raw client sending leasehold's own grant and release,
//! uncontended, on each side's connection kind, in the same runs: a shard may run the same
//! request slower than a lone server, and the client's routing costs its own, so leasehold's
//! share is its ratio over the raw client's.

use std::collections::BTreeMap;

use leasehold_harness::baseline::Requests;
use leasehold_harness::family::{Family, Side as KitSide};
use serde::Serialize;

use super::handoff::handoff_run;
use super::many_keys::many;
use super::{
    BenchResult, KitRaw, Leasehold, Progress, RunResult, Settings, cycles, median, round_to, unique,
};

/// Bench-style key names sampled for the spread.
const SPREAD_SAMPLE: usize = 10_000;

/// The comparison's figures (`cluster.json`): the measured store is `cluster`, the reference
/// `single`, the members `masters` (the JSON's names from the first family compared).
#[derive(Debug, Serialize)]
pub struct Comparison {
    pub cluster: String,
    pub single: String,
    pub masters: Vec<String>,
    pub runs: usize,
    pub duration_s: f64,
    pub scenarios: Vec<ScenarioRow>,
    /// Of [`SPREAD_SAMPLE`] bench key names, the share each member serves.
    pub key_share_per_master: Vec<f64>,
    /// The load tool's requests/s (median over runs): reference, store.
    pub request_load: (f64, f64),
    /// What counted the requests, for the table.
    #[serde(skip)]
    pub counter: &'static str,
    /// The load tool, and what it adds on the measured side, for the table.
    #[serde(skip)]
    pub load: (&'static str, &'static str),
}

/// One scenario on both sides.
#[derive(Debug, Serialize)]
pub struct ScenarioRow {
    pub name: &'static str,
    pub single_cycles_per_s: Vec<f64>,
    pub cluster_cycles_per_s: Vec<f64>,
    /// Median store ÷ median reference.
    pub ratio: f64,
    /// Server µs per cycle of the reference (median over runs).
    pub single_us_per_cycle: f64,
    /// Server µs per cycle on each member that served cycles (the member's µs over the
    /// cycles it served, counted by its per-cycle requests), medians over runs.
    pub cluster_us_per_cycle: BTreeMap<String, f64>,
    /// Share of the per-cycle requests each member served (medians over runs).
    pub cycle_share: BTreeMap<String, f64>,
    /// Server µs per cycle over every member together (their µs over the run's cycles),
    /// median over runs: what a cycle costs the store wherever its key lives (each run's
    /// key may land on another member, so per-member medians can miss it).
    pub cluster_us_per_cycle_all: f64,
    /// Per-cycle requests per cycle (median over runs): reference, store. Above 2, waiters
    /// retried.
    pub scripts_per_cycle: (f64, f64),
}

/// One side: a locker and the kit's side.
struct Side<'a> {
    locker: leasehold::Locker,
    kit: &'a KitSide,
}

impl Side<'_> {
    /// Per member: the counted requests (calls, µs) and the per-cycle requests' calls.
    async fn stats(&self, f: &dyn Family) -> BenchResult<Vec<(Requests, u64)>> {
        let mut out = Vec::new();
        for m in &self.kit.members {
            let all = m.view.requests(f.counted()).await?;
            let scripts = m.view.requests(f.per_cycle()).await?.calls;
            out.push((all, scripts));
        }
        Ok(out)
    }
}

/// Runs the comparison of the store `s.url` with `reference`, as the store's kit has it.
pub(super) async fn compare(
    s: &Settings,
    reference: &leasehold::StoreUrl,
    p: &Progress,
) -> BenchResult<Comparison> {
    let scheme = s.url.scheme();
    let family =
        leasehold_harness::stores::kit(scheme).compare_with(&s.url, reference).await?.ok_or_else(
            || format!("--single: {}:// has no reference store to compare with", scheme.as_str()),
        )?;
    let f = family.as_ref();
    let [single_kit, cluster_kit] = f.sides();
    let sides = [
        Side { locker: super::connect(reference).await?, kit: single_kit },
        Side { locker: super::connect(&s.url).await?, kit: cluster_kit },
    ];
    let names = ["uncontended", "handoff", "many-keys", f.raw_label()];
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
                let before = sd.stats(f).await?;
                // The raw client names keys as the store does.
                let raw_key = f.key_name(&unique("r"))?;
                let r: RunResult = match sc {
                    0 => cycles(&lh, &unique("u"), s.duration).await?,
                    1 => handoff_run(&lh, &unique("h"), s.tasks, s.duration).await?,
                    2 => many(&lh, 64, s.duration).await?,
                    _ => cycles(&KitRaw(sd.kit.raw.clone()), &raw_key, s.duration).await?,
                };
                let after = sd.stats(f).await?;
                let rate = r.ops as f64 / r.elapsed.as_secs_f64();
                let per_node = before
                    .iter()
                    .zip(&after)
                    .map(|(b, a)| (a.0.since(b.0).usec, a.1.saturating_sub(b.1)))
                    .collect();
                slot[side].push((rate, r.ops, per_node));
            }
        }
        for &side in &order {
            rb[side].push(sides[side].kit.load.requests_per_s(s.duration).await?);
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
        for (i, addr) in sides[1].kit.members.iter().map(|m| &m.addr).enumerate() {
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
    let sample: Vec<String> = (0..SPREAD_SAMPLE).map(|_| unique("mk")).collect();
    let key_share_per_master =
        f.key_share(&sample).await?.into_iter().map(|x| round_to(x, 4)).collect();
    Ok(Comparison {
        cluster: s.url.to_string(),
        single: reference.to_string(),
        masters: cluster_kit.members.iter().map(|m| m.addr.clone()).collect(),
        runs: s.runs,
        duration_s: s.duration.as_secs_f64(),
        scenarios,
        key_share_per_master,
        request_load: (median(rb[0].clone()).round(), median(rb[1].clone()).round()),
        counter: single_kit.members.first().map(|m| m.view.counter()).unwrap_or("?"),
        load: f.load_label(),
    })
}

/// The comparison as text (what BENCHMARKS.md quotes).
pub fn table(c: &Comparison) -> String {
    let mut out = format!(
        "cluster {} (masters {}) vs single {} · {} runs × {} s · cycles/s per run · server µs per cycle ({}), medians over runs\n",
        c.cluster,
        c.masters.join(", "),
        c.single,
        c.runs,
        c.duration_s,
        c.counter
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
            "\nuncontended, leasehold's cluster ÷ single over {}'s: cycles/s {}, server µs per cycle {}\n",
            raw.name.trim_start_matches("uncontended, "),
            round_to(lh.ratio / raw.ratio, 3),
            round_to(us(lh) / us(raw), 3)
        ));
    }
    out.push_str(&format!(
        "\nkey share per master ({SPREAD_SAMPLE} bench key names): {:?}\n{} ops/s: single {}, cluster{} {}\n",
        c.key_share_per_master, c.load.0, c.request_load.0, c.load.1, c.request_load.1
    ));
    out
}
