use super::*;

fn dist(p999_us: u64) -> Distribution {
    Distribution {
        samples: 1000,
        p50_us: p999_us / 4,
        p99_us: p999_us / 2,
        p999_us,
        max_us: p999_us * 2,
    }
}

fn ms_of(us: u64) -> Duration {
    Duration::from_micros(us)
}

/// A recommended figure in whole milliseconds, as the rule computes them.
fn whole_ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

#[test]
fn small_figures_give_the_floor_ttl() {
    // P = 4 ms (the max), R = 10 ms (the max), J = 1 ms: margin = 1 + 2·10 = 21 ms; library
    // ttl ≥ 3·35/0.97 = 108.2 ms, run ttl ≥ 3·35/0.67 = 156.7 ms; both below the 1 s floor.
    let r = recommend(&dist(5_000), &dist(2_000), Some(Duration::from_millis(1)));
    assert_eq!(
        (
            whole_ms(r.ttl),
            whole_ms(r.renew_every),
            whole_ms(r.margin),
            whole_ms(r.grace),
            whole_ms(r.default_margin)
        ),
        (1000, 333, 21, 21, 100)
    );
    assert_eq!(r.job_step.map(whole_ms), Some(1));
}

/// Without a job step the grace is run's default, not a few milliseconds, and the ttl fits
/// it: 3·(4 + 10 + 5000 + 2000 ms)/0.97 = 21.69 s → 22 s.
#[test]
fn without_a_job_the_grace_is_runs_default() {
    let r = recommend(&dist(5_000), &dist(2_000), None);
    assert_eq!((whole_ms(r.margin), whole_ms(r.grace)), (20, RUN_GRACE.as_millis() as u64));
    assert_eq!(whole_ms(r.ttl), 22_000);
    assert_eq!(r.job_step.map(whole_ms), None);
}

/// The longest sample, not a percentile resting on a handful of them, is what the rule uses.
#[test]
fn the_longest_pause_is_used() {
    let mut pauses = dist(1_000);
    pauses.max_us = 132_000; // one outlier among thousands
    let r = recommend(&dist(1_000), &pauses, Some(Duration::ZERO));
    assert!(whole_ms(r.margin) >= 264, "{r:?}");
    assert!(r.arithmetic[0].contains("longest pause = 132.000 ms"), "{:?}", r.arithmetic);
}

#[test]
fn few_samples_are_warned_about() {
    let mut d = dist(1_000);
    d.samples = 5_000; // p99.9 of 5,000 is the 5th-worst sample
    let r = recommend(&dist(1_000), &d, None);
    assert!(
        r.warnings.iter().any(|w| w.contains("pause p99.9 rests on 5000 samples (5 beyond it)")),
        "{:?}",
        r.warnings
    );
    d.samples = 20_000;
    let r = recommend(&dist(1_000), &d, None);
    assert!(!r.warnings.iter().any(|w| w.starts_with("pause")), "{:?}", r.warnings);
    assert!(
        r.warnings.iter().any(|w| w.starts_with("renewal round-trip p99.9")),
        "{:?}",
        r.warnings
    );
    let loaded = Load { average: Some([4.1, 3.0, 2.0]), cpus: 2 };
    assert!(load_warning(&loaded).is_some_and(|w| w.contains("load average 4.10 on 2 CPUs")));
    assert!(load_warning(&Load { average: Some([0.5, 0.5, 0.5]), cpus: 2 }).is_none());
    assert!(load_warning(&Load { average: None, cpus: 2 }).is_none());
}

#[test]
fn a_long_job_step_drives_margin_and_ttl() {
    // P = 40 ms, R = 200 ms (the maxima), J = 5 s: margin = 5 s + 2·200 ms = 5400 ms; library
    // ttl ≥ 3·5640/0.97 = 17443.3 ms; run: ttl/10 would exceed 2 s, so ttl ≥
    // 3·(5640 + 2000)/0.97 = 23628.9 ms, rounded up to whole seconds: 24 s.
    let r = recommend(&dist(100_000), &dist(20_000), Some(Duration::from_secs(5)));
    assert_eq!((whole_ms(r.margin), whole_ms(r.grace)), (5400, 5400));
    assert_eq!((whole_ms(r.ttl), whole_ms(r.renew_every)), (24_000, 8_000));
    assert_eq!(whole_ms(r.default_margin), 2000, "min(ttl/10, 2 s)");
    assert_eq!(r.job_step.map(whole_ms), Some(5000));
}

/// Over a grid of inputs: the recommendation satisfies the rule it states, with the
/// library's margin and with `leasehold run`'s.
#[test]
fn recommendations_satisfy_the_rule() {
    let us = [0u64, 1, 500, 3_000, 40_000, 700_000, 9_000_000];
    let jobs = [None, Some(Duration::from_millis(1)), Some(Duration::from_secs(30))];
    for &p in &us {
        for &r in &us {
            for &j in &jobs {
                let rec = recommend(&dist(r), &dist(p), j);
                let ctx = format!("P={p}µs R={r}µs J={j:?}: {rec:?}");
                let ttl = whole_ms(rec.ttl) as f64;
                let pr = (p + r) as f64 / 1000.0;
                assert!(whole_ms(rec.ttl) >= MIN_TTL.as_millis() as u64, "{ctx}");
                assert_eq!(whole_ms(rec.renew_every), whole_ms(rec.ttl) / 3, "{ctx}");
                assert!(whole_ms(rec.renew_every) < whole_ms(rec.ttl), "{ctx}");
                let slack = HEADROOM * p.max(r) as f64 / 1000.0;
                let job = j.map_or(0.0, |d| d.as_secs_f64() * 1000.0);
                assert!(whole_ms(rec.margin) as f64 >= job + slack, "{ctx}");
                assert!((whole_ms(rec.margin) as f64) < ttl * (1.0 - DRIFT), "{ctx}: no time left");
                // After a failed renewal at ttl/3, the one at 2·ttl/3 has P + R of room.
                let room = ttl * (1.0 - DRIFT) - whole_ms(rec.margin) as f64 - 2.0 * ttl / 3.0;
                assert!(room >= pr, "{ctx}: room {room}");
                let run_margin = (ttl / 10.0).min(2000.0) + whole_ms(rec.grace) as f64;
                assert!(run_margin <= ttl / 2.0, "{ctx}: run caps its margin at ttl/2");
                let room = ttl * (1.0 - DRIFT) - run_margin - 2.0 * ttl / 3.0;
                assert!(room >= pr, "{ctx}: run room {room}");
            }
        }
    }
}

#[test]
fn longer_pauses_never_shorten_the_lease() {
    let mut last = 0;
    for p in [0, 10_000, 100_000, 1_000_000, 10_000_000] {
        let r = recommend(&dist(1_000), &dist(p), None);
        assert!(whole_ms(r.ttl) >= last, "{p}: {} < {last}", whole_ms(r.ttl));
        last = whole_ms(r.ttl);
    }
    assert!(last > MIN_TTL.as_millis() as u64, "a 10 s pause must lift the ttl off the floor");
}

#[test]
fn the_arithmetic_and_the_caveat_are_printed() {
    let r = recommend(&dist(5_000), &dist(2_000), Some(ms_of(1_500)));
    let text = r.to_string();
    assert!(text.contains("margin = J + 2·max(P, R)"), "{text}");
    assert!(text.contains("ttl ≥ 3·(P + R + margin)"), "{text}");
    assert!(text.contains("renew every ttl/3 = 333 ms"), "{text}");
    assert!(text.contains(NO_BOUND), "{text}");
}

#[test]
fn distributions_from_samples() {
    let d = Distribution::from_samples((1..=1000).map(ms_of));
    assert_eq!((d.samples, d.p50_us, d.p99_us, d.p999_us, d.max_us), (1000, 500, 990, 999, 1000));
    assert_eq!(Distribution::from_samples([]), Distribution::default());
    // Beyond the histogram's range: clamped, not dropped, no panic.
    let d = Distribution::from_samples([Duration::MAX]);
    assert_eq!((d.samples, d.max_us >= HIGHEST_US), (1, true));
}

/// A blocked runtime is the runtime's lag, not a host pause: the only runtime thread is
/// blocked while the runtime sampler sleeps, so its next wake-up is at least that late, while
/// the OS thread goes on sampling the host.
#[tokio::test(flavor = "current_thread")]
async fn a_blocked_runtime_is_lag_not_a_host_pause() {
    let m = PauseMonitor::spawn(Duration::from_millis(50)).unwrap();
    // Let the samplers run and the task start a sleep.
    tokio::time::sleep(Duration::from_millis(5)).await;
    std::thread::sleep(Duration::from_millis(200));
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(m.runtime_lag().max_us >= 150_000, "{:?}", m.runtime_lag());
    assert!(m.pauses().samples > m.runtime_lag().samples, "the OS thread sampled meanwhile");
}

#[test]
fn the_monitor_needs_a_runtime() {
    let e = PauseMonitor::spawn(Duration::from_millis(1)).unwrap_err();
    assert!(matches!(e, crate::Error::InvalidInput(_)), "{e}");
}
