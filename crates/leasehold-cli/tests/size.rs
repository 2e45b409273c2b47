//! `leasehold size`: the measured distributions and the recommendation drawn from them.

mod common;

use common::*;

/// On the default store (SQLite under `$XDG_STATE_HOME`): the JSON carries both
/// distributions and a recommendation consistent with them, and the probe key is gone.
#[test]
fn size_json_recommends_from_the_printed_distributions() {
    let e = Env::new();
    let o = e.cmd().args(["size", "--json", "--for", "1s", "--job", "20ms"]).output().unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let n = |p: &str| v.pointer(p).and_then(|x| x.as_u64()).unwrap_or_else(|| panic!("{p}: {v}"));
    assert!(v["store"].as_str().unwrap().ends_with("leasehold/leasehold.db"), "{v}");
    for d in ["rtt", "pauses"] {
        let s = |f: &str| n(&format!("/{d}/{f}"));
        assert!(s("samples") >= 1, "{d}: {v}");
        assert!(s("p50_us") <= s("p99_us") && s("p99_us") <= s("p999_us"), "{d}: {v}");
        assert!(s("p999_us") <= s("max_us"), "{d}: {v}");
    }
    let (ttl, renew, margin, grace) =
        (n("/ttl_ms"), n("/renew_every_ms"), n("/margin_ms"), n("/grace_ms"));
    let (p, r) = (n("/pauses/p999_us") as f64 / 1000.0, n("/rtt/p999_us") as f64 / 1000.0);
    assert_eq!(n("/job_step_ms"), 20);
    assert!(margin as f64 >= 20.0 + 2.0 * p.max(r), "margin covers J + 2·max(P, R): {v}");
    assert!(grace as f64 >= 20.0 + 2.0 * p.max(r), "{v}");
    assert!(ttl > margin && renew < ttl && renew == ttl / 3, "{v}");
    let ttl = ttl as f64;
    let room = ttl * 0.99 - margin as f64 - 2.0 * ttl / 3.0;
    assert!(room >= p + r, "a renewal at 2·ttl/3 still lands before the deadline: {v}");
    let run_margin = (ttl / 10.0).min(2000.0) + grace as f64;
    assert!(ttl * 0.99 - run_margin - 2.0 * ttl / 3.0 >= p + r, "and under run: {v}");
    assert!(v["arithmetic"].as_array().is_some_and(|a| a.len() >= 5), "{v}");
    assert!(v["note"].as_str().unwrap().contains("fencing stays required"), "{v}");
    let s = e.cmd().args(["status", "--json"]).output().unwrap();
    assert_eq!(stdout(&s).trim(), "[]", "the probe key was released");
}

/// The table shows the distributions, the arithmetic and the caveat.
#[test]
fn size_prints_the_arithmetic() {
    let e = Env::new();
    let o = e.run(&["size", "--for", "300ms"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    for want in [
        "renewal round trip",
        "pause (1 ms sleeps)",
        "margin = J + 2·max(P, R)",
        "renew every ttl/3",
        "no observed percentile bounds a future pause",
        "fencing stays required",
    ] {
        assert!(out.contains(want), "{want:?} missing from:\n{out}");
    }
}

#[test]
fn size_refuses_bad_input_and_hides_passwords() {
    let e = Env::new();
    let o = e.run(&["size", "--for", "0"]);
    assert_eq!(code(&o), 64, "{}", stderr(&o));
    let o = e.run(&["size", "--job", "soon"]);
    assert_eq!(code(&o), 64, "{}", stderr(&o));
    let o = e
        .cmd()
        .args(["size", "--for", "1s", "--store", "postgres://u:hunter2@127.0.0.1:1/db"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 69, "{}", stderr(&o));
    assert!(!stderr(&o).contains("hunter2") && !stdout(&o).contains("hunter2"), "{}", stderr(&o));
}
