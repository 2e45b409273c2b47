//! One task, acquire + release of one free key, back to back, against every baseline of the store.

#[cfg(feature = "peers")]
use super::redis;
use super::{
    BenchResult, EtcdLockRpc, EtcdRaw, KitRaw, Leasehold, PgRaw, PgSide, Progress, Raw, RedisSide,
    RunResult, SLICES, Settings, StoreOnly, Tally, cycles, median, per_run_ratios, report,
    round_to, unique,
};
use leasehold::Locker;
use leasehold_harness::baseline::Baseline;
use std::time::Duration;

pub(super) async fn uncontended(
    s: &Settings,
    locker: &Locker,
    raws: &[Baseline],
    redis: Option<&RedisSide>,
    pg: Option<&PgSide>,
    etcd: Option<&EtcdRaw>,
    p: &Progress,
) -> BenchResult<report::Uncontended> {
    let mut lh = Tally::default();
    let mut my_t = Tally::default();
    let mut etcd_lock = Tally::default();
    let mut pgbench: Vec<Vec<f64>> = vec![Vec::new(); pg.map_or(0, |p| p.scripts().len())];
    let mut direct = Tally::default();
    let mut raw = Tally::default();
    let mut raw_fenced = Tally::default();
    let mut pg_raw_t = Tally::default();
    // The store kit's raw baselines, one tally each.
    let kit_raws: Vec<KitRaw> = raws.iter().map(|b| KitRaw(b.client.clone())).collect();
    let mut kit_t: Vec<Tally> = raws.iter().map(|_| Tally::default()).collect();
    // Server time per request (INFO commandstats), to show what the fenced grant costs.
    let (mut lh_server_us, mut raw_set_us) = (Vec::new(), Vec::new());
    #[cfg_attr(not(feature = "peers"), allow(unused_mut))]
    let mut peer = Tally::default();
    // Warm up connections and script caches.
    let lh_c = Leasehold(locker.clone());
    let raw_c = redis.map(|r| (Raw::new(r, false), Raw::new(r, true)));
    let warm = Duration::from_millis(200);
    cycles(&lh_c, &unique("warm"), warm).await?;
    let pg_raw = match pg {
        Some(pg) => pg.raw().await?,
        None => None,
    };
    if let Some(r) = &pg_raw {
        cycles(r, &unique("warm"), warm).await?;
    }
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
        // Rotate the order so none always goes first.
        let turns = 3 + kit_raws.len();
        for turn in 0..turns {
            match (turn + run) % turns {
                0 => lh.add(cycles(&lh_c, &key, s.duration).await?),
                1 if etcd.is_some() => {
                    let etcd = etcd.expect("checked");
                    my_t.add(cycles(etcd, &format!("{key}:raw"), s.duration).await?);
                }
                2 if etcd.is_some() => {
                    let rpc = EtcdLockRpc::new(etcd.expect("checked")).await?;
                    etcd_lock.add(cycles(&rpc, &format!("{key}:lock-rpc"), s.duration).await?);
                }
                2 if pg_raw.is_some() => {
                    let r = pg_raw.as_ref().expect("checked");
                    pg_raw_t.add(cycles(r, &format!("{key}:raw"), s.duration).await?);
                }
                1 if pg.is_some() => {
                    let pg = pg.expect("checked");
                    for (i, (_, script)) in pg.scripts().iter().enumerate() {
                        let k = format!("{key}:pgbench{i}");
                        pgbench[i].push(pg.pgbench(script, &k, s.duration).await?);
                    }
                }
                k if k >= 3 => {
                    let (r, t) = (&kit_raws[k - 3], &mut kit_t[k - 3]);
                    t.add(cycles(r, &format!("{key}:raw{}", k - 3), s.duration).await?);
                }
                _ => {}
            }
        }
        let direct_c = StoreOnly(locker.store().clone());
        direct.add(cycles(&direct_c, &format!("{key}:direct"), s.duration).await?);
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
    if etcd.is_some() {
        let label = "raw etcd gRPC client: leasehold's conditional put (bound to a lease) and create-revision delete";
        rows.push(my_t.row(label));
        (v.leasehold_time_per_cycle_vs_raw, v.per_run_ratios) = paired(&my_t);
    }
    for (b, t) in raws.iter().zip(&kit_t) {
        rows.push(t.row(b.label));
        if b.same_requests {
            (v.leasehold_time_per_cycle_vs_raw, v.per_run_ratios) = paired(t);
        }
    }
    if pg_raw.is_some() {
        rows.push(pg_raw_t.row(PgRaw::LABEL));
        (v.leasehold_time_per_cycle_vs_raw, v.per_run_ratios) = paired(&pg_raw_t);
    }
    if let Some(pg) = pg {
        let mut ratios = Vec::new();
        for ((label, _), tps) in pg.scripts().iter().zip(&pgbench) {
            rows.push(report::Row::throughput(label, tps));
            // Time per cycle of leasehold over that of pgbench, run by run.
            let per_run = per_run_ratios(tps, &lh.per_run);
            ratios.push(report::Ratio {
                baseline: label,
                median: median(per_run.clone()),
                per_run,
            });
        }
        v.leasehold_time_per_cycle_vs_pgbench = Some(ratios);
    }
    if !etcd_lock.per_run.is_empty() {
        rows.push(
            etcd_lock
                .row("etcd's Lock RPC (server-side concurrency.Mutex, as etcdctl lock) + Unlock"),
        );
    }
    if !peer.per_run.is_empty() {
        rows.push(peer.row("rslock 0.10 (lock + unlock)"));
    }
    v.contenders = rows;
    Ok(v)
}
