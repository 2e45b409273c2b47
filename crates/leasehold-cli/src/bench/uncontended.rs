//! One task, acquire + release of one free key, back to back, against every baseline of the store.

#[cfg(feature = "peers")]
use super::redis;
use super::{
    BenchResult, KitRaw, Leasehold, Progress, Raw, RedisSide, RunResult, SLICES, Settings,
    StoreOnly, Tally, cycles, median, per_run_ratios, report, round_to, unique,
};
use leasehold::Locker;
use leasehold_harness::baseline::{Baseline, NativeLoad};
use std::sync::Arc;
use std::time::Duration;

pub(super) async fn uncontended(
    s: &Settings,
    locker: &Locker,
    raws: &[Baseline],
    native: &[Arc<dyn NativeLoad>],
    redis: Option<&RedisSide>,
    p: &Progress,
) -> BenchResult<report::Uncontended> {
    let mut lh = Tally::default();
    let mut direct = Tally::default();
    let mut raw = Tally::default();
    let mut raw_fenced = Tally::default();
    // The store kit's raw baselines, one tally each; its load tool's cycles/s, run by run.
    let kit_raws: Vec<KitRaw> = raws.iter().map(|b| KitRaw(b.client.clone())).collect();
    let mut kit_t: Vec<Tally> = raws.iter().map(|_| Tally::default()).collect();
    let mut native_t: Vec<Vec<f64>> = vec![Vec::new(); native.len()];
    // Server time per request (INFO commandstats), to show what the fenced grant costs.
    let (mut lh_server_us, mut raw_set_us) = (Vec::new(), Vec::new());
    #[cfg_attr(not(feature = "peers"), allow(unused_mut))]
    let mut peer = Tally::default();
    // Warm up connections and script caches.
    let lh_c = Leasehold(locker.clone());
    let raw_c = redis.map(|r| (Raw::new(r, false), Raw::new(r, true)));
    let warm = Duration::from_millis(200);
    cycles(&lh_c, &unique("warm"), warm).await?;
    for r in &kit_raws {
        cycles(r, &unique("warm"), warm).await?;
    }
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
            let rs = redis::peers::Rslock(rslock::LockManager::new(vec![r.url.clone()]));
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
        // The store's own load tool (a process of its own) runs whole measurements, before
        // the in-process contenders on even runs and after them on odd ones.
        let tools_first = run % 2 == 0;
        if tools_first {
            native_run(native, &key, s.duration, &mut native_t).await?;
        }
        // leasehold, the store trait alone and the kit's raw baselines, all in-process: they
        // take turns in slices of the run (rotating who goes first), as on Redis.
        let direct_c = StoreOnly(locker.store().clone());
        let n = 2 + kit_raws.len();
        let mut acc: Vec<RunResult> = (0..n).map(|_| RunResult::default()).collect();
        let slice = s.duration / SLICES;
        for i in 0..SLICES as usize {
            for turn in 0..n {
                let who = (turn + i + run) % n;
                acc[who].merge(match who {
                    0 => cycles(&lh_c, &key, slice).await?,
                    1 => cycles(&direct_c, &format!("{key}:direct"), slice).await?,
                    k => cycles(&kit_raws[k - 2], &format!("{key}:raw{}", k - 2), slice).await?,
                });
            }
        }
        let mut acc = acc.into_iter();
        for t in [&mut lh, &mut direct].into_iter().chain(kit_t.iter_mut()) {
            t.add(acc.next().expect("one per contender"));
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
        leasehold_time_per_cycle_vs_pgbench: None,
    };
    // Pair the contenders of each run; the headline is the median of those ratios.
    let paired = |base: &Tally| {
        let per_run = per_run_ratios(&base.per_run, &lh.per_run);
        (Some(median(per_run.clone())), Some(per_run))
    };
    if redis.is_some() {
        rows.push(
            raw.row("raw redis-rs: SET NX PX + EVALSHA compare-and-delete, same connection kind"),
        );
        (v.leasehold_time_per_cycle_vs_raw, v.per_run_ratios) = paired(&raw);
        rows.push(raw_fenced.row(
            "raw redis-rs sending leasehold's two scripts: fenced grant (SET NX PX + INCR), release (compare-and-delete + PUBLISH)",
        ));
        (v.leasehold_time_per_cycle_vs_raw_fenced, v.per_run_ratios_fenced) = paired(&raw_fenced);
        v.server_us_per_request = Some(report::ServerTime {
            leasehold_evalsha: round_to(median(lh_server_us.clone()), 2),
            raw_set: round_to(median(raw_set_us.clone()), 2),
        });
    }
    rows.push(direct.row("leasehold store trait alone (no Locker/Lease): try_acquire + release"));
    for (b, t) in raws.iter().zip(&kit_t) {
        rows.push(t.row(b.label));
        if b.same_requests {
            (v.leasehold_time_per_cycle_vs_raw, v.per_run_ratios) = paired(t);
        }
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
        v.leasehold_time_per_cycle_vs_pgbench = Some(ratios);
    }
    if !peer.per_run.is_empty() {
        rows.push(peer.row("rslock 0.10 (lock + unlock)"));
    }
    v.contenders = rows;
    Ok(v)
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
