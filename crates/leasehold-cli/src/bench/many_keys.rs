//! 64 tasks, each on its own key, over one connection, against the store kit's raw clients
//! (each shared by its 64 tasks) and its load tool's request rate.

use super::{
    BenchResult, Contender, KitRaw, Leasehold, Progress, RunResult, SLICES, Settings, Tally,
    cycles, hist, median, report, round_to, unique,
};
use leasehold::Locker;
use leasehold_harness::baseline::{Baseline, Paired, RequestLoad};
use std::time::Duration;

pub(super) async fn many_keys(
    s: &Settings,
    locker: &Locker,
    raws: &[Baseline],
    load: Option<&dyn RequestLoad>,
    p: &Progress,
) -> BenchResult<report::ManyKeys> {
    const TASKS: usize = 64;
    let mut lh = Tally::default();
    // One raw client (one multiplexed connection) shared by its 64 tasks, like leasehold's.
    let kit_raws: Vec<KitRaw> = raws.iter().map(|b| KitRaw(b.client.clone())).collect();
    let mut kit_t: Vec<Tally> = raws.iter().map(|_| Tally::default()).collect();
    let mut rb = Vec::new();
    let lh_c = Leasehold(locker.clone());
    let n = 1 + kit_raws.len();
    for run in 0..s.runs {
        p.step(format!("many-keys run {}/{}", run + 1, s.runs));
        // The load tool, a separate process, runs before or after the in-process contenders,
        // which take turns in slices.
        if let (Some(l), 0) = (load, run % 2) {
            rb.push(l.requests_per_s(s.duration).await?);
        }
        let mut acc: Vec<RunResult> = (0..n).map(|_| RunResult::default()).collect();
        // Alone, leasehold runs the whole duration at once, as it always has.
        let (slices, slice) = if n == 1 { (1, s.duration) } else { (SLICES, s.duration / SLICES) };
        for i in 0..slices as usize {
            for turn in 0..n {
                let who = (turn + i + run) % n;
                acc[who].merge(match who {
                    0 => many(&lh_c, TASKS, slice).await?,
                    k => many(&kit_raws[k - 1], TASKS, slice).await?,
                });
            }
        }
        let mut acc = acc.into_iter();
        for t in std::iter::once(&mut lh).chain(kit_t.iter_mut()) {
            t.add(acc.next().expect("one per contender"));
        }
        if let (Some(l), 1) = (load, run % 2) {
            rb.push(l.requests_per_s(s.duration).await?);
        }
    }
    let mut rows = vec![lh.row("leasehold")];
    rows.extend(raws.iter().zip(&kit_t).map(|(b, t)| t.row(b.label)));
    let mut v = report::ManyKeys {
        what: format!(
            "{TASKS} tasks, each acquiring and releasing its own key, all over one multiplexed connection"
        ),
        contenders: rows,
        leasehold_cycles_vs_half_request_load: None,
        raw_cycles_vs_half_request_load: None,
        raw_fenced_cycles_vs_half_request_load: None,
        request_load: None,
        ratio_names: [""; 3],
    };
    if let (Some(l), false) = (load, rb.is_empty()) {
        let rb_med = median(rb.clone());
        // A cycle is two requests: compare with half of the load tool's requests/s. For the
        // raw clients in the same run, that is the ceiling the server sets.
        let half = |t: &Tally| Some(round_to(median(t.per_run.clone()) / (rb_med / 2.0), 3));
        v.leasehold_cycles_vs_half_request_load = half(&lh);
        v.ratio_names[0] = l.name();
        for (b, t) in raws.iter().zip(&kit_t) {
            let name = b.ratio_name.unwrap_or(b.label);
            match b.paired {
                Paired::Headline => {
                    v.raw_cycles_vs_half_request_load = half(t);
                    v.ratio_names[1] = name;
                }
                Paired::SameRequests => {
                    v.raw_fenced_cycles_vs_half_request_load = half(t);
                    v.ratio_names[2] = name;
                }
                Paired::No => {}
            }
        }
        v.request_load = Some(report::LoadRate {
            command: l.command(),
            ops_per_s_median: rb_med.round(),
            ops_per_s_runs: rb.iter().map(|v| v.round()).collect(),
        });
    }
    Ok(v)
}

/// `tasks` tasks, each running [`cycles`] on its own key at the same time.
pub(super) async fn many<C: Contender>(c: &C, tasks: usize, d: Duration) -> BenchResult<RunResult> {
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
