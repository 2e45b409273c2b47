//! One task, acquire + release of one free key, back to back, against every baseline of the store.

use super::{
    BenchResult, KitRaw, Leasehold, Progress, RunResult, SLICES, Settings, StoreOnly, Tally,
    counted, cycles, median, per_run_ratios, report, round_to, unique,
};
use leasehold::Locker;
use leasehold_harness::baseline::{Baseline, NativeLoad, Paired, ServerView};
use std::sync::Arc;
use std::time::Duration;

pub(super) async fn uncontended(
    s: &Settings,
    locker: &Locker,
    raws: &[Baseline],
    native: &[Arc<dyn NativeLoad>],
    view: Option<&dyn ServerView>,
    p: &Progress,
) -> BenchResult<report::Uncontended> {
    let mut lh = Tally::default();
    let mut direct = Tally::default();
    // The store kit's raw baselines, one tally each; its load tool's cycles/s, run by run.
    let kit_raws: Vec<KitRaw> = raws.iter().map(|b| KitRaw(b.client.clone())).collect();
    let mut kit_t: Vec<Tally> = raws.iter().map(|_| Tally::default()).collect();
    let mut native_t: Vec<Vec<f64>> = vec![Vec::new(); native.len()];
    // Where the server counts requests: the server time per request of leasehold's grant and
    // release, and of the headline baseline's grant, to show what leasehold's requests cost.
    let headline = raws.iter().position(|b| b.paired == Paired::Headline);
    let timed = view.filter(|_| headline.is_some());
    let (mut lh_server_us, mut raw_server_us) = (Vec::new(), Vec::new());
    // Warm up connections and script caches.
    let lh_c = Leasehold(locker.clone());
    let warm = Duration::from_millis(200);
    cycles(&lh_c, &unique("warm"), warm).await?;
    for r in &kit_raws {
        cycles(r, &unique("warm"), warm).await?;
    }
    for run in 0..s.runs {
        p.step(format!("uncontended run {}/{}", run + 1, s.runs));
        let key = unique("u");
        // The store's own load tool (a process of its own) runs whole measurements, before
        // the in-process contenders on even runs and after them on odd ones.
        let tools_first = run % 2 == 0;
        if tools_first {
            native_run(native, &key, s.duration, &mut native_t).await?;
        }
        // leasehold, the store trait alone and the kit's raw baselines, all in-process: they
        // take turns in slices of the run (rotating who goes first).
        let direct_c = StoreOnly(locker.store().clone());
        let n = 2 + kit_raws.len();
        let mut acc: Vec<RunResult> = (0..n).map(|_| RunResult::default()).collect();
        // (calls, server µs) of leasehold's grants and releases, and of the headline's grants.
        let (mut lh_srv, mut raw_srv) = (Default::default(), Default::default());
        let slice = s.duration / SLICES;
        for i in 0..SLICES as usize {
            for turn in 0..n {
                let who = (turn + i + run) % n;
                let k = who.wrapping_sub(2);
                acc[who].merge(match (who, timed) {
                    (0, Some(v)) => {
                        let (res, c) =
                            counted(v, v.leasehold_timed(), cycles(&lh_c, &key, slice)).await?;
                        lh_srv = add(lh_srv, c);
                        res
                    }
                    (0, None) => cycles(&lh_c, &key, slice).await?,
                    (1, _) => cycles(&direct_c, &format!("{key}:direct"), slice).await?,
                    (_, Some(v)) if Some(k) == headline => {
                        let raw_key = format!("{key}:raw{k}");
                        let run = cycles(&kit_raws[k], &raw_key, slice);
                        let (res, c) = counted(v, v.headline_timed(), run).await?;
                        raw_srv = add(raw_srv, c);
                        res
                    }
                    _ => cycles(&kit_raws[k], &format!("{key}:raw{k}"), slice).await?,
                });
            }
        }
        let mut acc = acc.into_iter();
        for t in [&mut lh, &mut direct].into_iter().chain(kit_t.iter_mut()) {
            t.add(acc.next().expect("one per contender"));
        }
        if timed.is_some() {
            lh_server_us.push(lh_srv.usec as f64 / f64::max(lh_srv.calls as f64, 1.0));
            raw_server_us.push(raw_srv.usec as f64 / f64::max(raw_srv.calls as f64, 1.0));
        }
        if !tools_first {
            native_run(native, &key, s.duration, &mut native_t).await?;
        }
    }
    let mut rows = vec![lh.row("leasehold")];
    let mut v = report::Uncontended {
        what: "one task: acquire + release of one free key, back to back",
        contenders: Vec::new(),
        leasehold_time_per_cycle_vs_raw: None,
        per_run_ratios: None,
        leasehold_time_per_cycle_vs_raw_fenced: None,
        per_run_ratios_fenced: None,
        server_us_per_request: None,
        leasehold_time_per_cycle_vs_native_load: None,
    };
    // Pair the contenders of each run; the headline is the median of those ratios.
    let paired = |base: &Tally| {
        let per_run = per_run_ratios(&base.per_run, &lh.per_run);
        (Some(median(per_run.clone())), Some(per_run))
    };
    rows.push(direct.row("leasehold store trait alone (no Locker/Lease): try_acquire + release"));
    for (b, t) in raws.iter().zip(&kit_t) {
        rows.push(t.row(b.label));
        match b.paired {
            Paired::Headline => (v.leasehold_time_per_cycle_vs_raw, v.per_run_ratios) = paired(t),
            Paired::SameRequests => {
                (v.leasehold_time_per_cycle_vs_raw_fenced, v.per_run_ratios_fenced) = paired(t)
            }
            Paired::No => {}
        }
    }
    if let Some(view) = timed {
        let [lh_words, raw_words] = view.timed_words();
        v.server_us_per_request = Some(report::ServerTime {
            leasehold: round_to(median(lh_server_us), 2),
            raw: round_to(median(raw_server_us), 2),
            words: [view.counter(), lh_words, raw_words],
        });
    }
    if !native.is_empty() {
        let mut ratios = Vec::new();
        for (tool, tps) in native.iter().zip(&native_t) {
            rows.push(report::Row::throughput(tool.label(), tps));
            // Time per cycle of leasehold over that of the tool, run by run.
            let per_run = per_run_ratios(tps, &lh.per_run);
            ratios.push(report::Ratio {
                baseline: tool.label(),
                median: median(per_run.clone()),
                per_run,
            });
        }
        v.leasehold_time_per_cycle_vs_native_load = Some(ratios);
    }
    v.contenders = rows;
    Ok(v)
}

/// Two counts added.
fn add(
    a: leasehold_harness::baseline::Requests,
    b: leasehold_harness::baseline::Requests,
) -> leasehold_harness::baseline::Requests {
    leasehold_harness::baseline::Requests { calls: a.calls + b.calls, usec: a.usec + b.usec }
}

/// One whole measurement of each of the store's load tools on `key`, added to `into`.
async fn native_run(
    native: &[Arc<dyn NativeLoad>],
    key: &str,
    d: Duration,
    into: &mut [Vec<f64>],
) -> BenchResult<()> {
    for (i, (tool, out)) in native.iter().zip(into).enumerate() {
        out.push(tool.cycles_per_s(&format!("{key}:tool{i}"), d).await?);
    }
    Ok(())
}
