//! 64 tasks, each on its own key, over one connection, against redis-benchmark.

use super::{
    BenchResult, Contender, Leasehold, Progress, Raw, RedisSide, RunResult, SLICES, Settings,
    Tally, cycles, hist, median, redis_benchmark, report, round_to, unique,
};
use leasehold::Locker;
use std::time::Duration;

pub(super) async fn many_keys(
    s: &Settings,
    locker: &Locker,
    redis: Option<&RedisSide>,
    p: &Progress,
) -> BenchResult<report::ManyKeys> {
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
    let mut rows = vec![lh.row("leasehold")];
    if raw_c.is_some() {
        rows.push(raw.row("raw redis-rs: SET NX PX + EVALSHA compare-and-delete, 64 tasks on one connection manager"));
        rows.push(raw_fenced.row("raw redis-rs sending leasehold's two scripts (fenced grant, release + PUBLISH), 64 tasks on one connection manager"));
    }
    let mut v = report::ManyKeys {
        what: format!(
            "{TASKS} tasks, each acquiring and releasing its own key, all over one multiplexed connection"
        ),
        contenders: rows,
        leasehold_cycles_vs_half_redis_benchmark: None,
        raw_cycles_vs_half_redis_benchmark: None,
        raw_fenced_cycles_vs_half_redis_benchmark: None,
        redis_benchmark: None,
    };
    if !rb.is_empty() {
        let rb_med = median(rb.clone());
        // A cycle is two commands: compare with half of redis-benchmark's ops/s. For the raw
        // clients in the same run, that is the ceiling the server sets.
        let half = |t: &Tally| Some(round_to(median(t.per_run.clone()) / (rb_med / 2.0), 3));
        v.leasehold_cycles_vs_half_redis_benchmark = half(&lh);
        v.raw_cycles_vs_half_redis_benchmark = half(&raw);
        v.raw_fenced_cycles_vs_half_redis_benchmark = half(&raw_fenced);
        v.redis_benchmark = Some(report::RedisBenchmark {
            command: "redis-benchmark -c 50 -P 16 -r 1000000 SET bench:rb:__rand_int__ v NX PX 30000",
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
