//! `run` nested in a `run`, and `run --if-unavailable`.

mod common;

use common::*;
use std::time::{Duration, Instant};

/// A job whose script runs a step that takes the same lock: the step runs at once under the
/// parent's grant, with the parent's fence, instead of waiting on its parent.
#[test]
fn nested_run_of_the_same_key_runs_under_the_parents_grant() {
    let e = Env::new();
    let script = "echo outer=$LEASEHOLD_FENCE; \
        \"$LH\" run --store \"$STORE\" --wait 30s job -- sh -c 'echo inner=$LEASEHOLD_FENCE; exit 4'";
    let started = Instant::now();
    let o = e.run(&["run", "job", "--", "sh", "-c", script]);
    assert_eq!(code(&o), 4, "the inner command's code comes back: {}", stderr(&o));
    assert!(started.elapsed() < Duration::from_secs(25), "the nested run waited on its parent");
    let out = stdout(&o);
    assert_eq!(field(&out, "inner"), field(&out, "outer"), "{out}");
    assert_eq!(e.run(&["status", "--json", "job"]).stdout, b"[]\n", "released at the end");
}

/// A nested run of another key acquires it as usual (its own fence); one of the same key
/// whose environment names a grant the store does not confirm does not borrow it.
#[test]
fn nested_run_of_another_key_or_a_forged_grant_acquires_anew() {
    let e = Env::new();
    let script = "echo outer=$LEASEHOLD_FENCE; \
        \"$LH\" run --store \"$STORE\" other -- sh -c 'echo inner=$LEASEHOLD_KEY:$LEASEHOLD_FENCE'";
    let o = e.run(&["run", "job", "--", "sh", "-c", script]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    let inner = field(&out, "inner");
    let (k, f) = inner.split_once(':').unwrap();
    assert_eq!(k, "other");
    assert_ne!(f, field(&out, "outer"));

    // Someone else holds `job`; a forged environment claiming a grant on it gets nothing.
    let holder = e.run(&["acquire", "--ttl", "30s", "--json", "job"]);
    assert_eq!(code(&holder), 0, "{}", stderr(&holder));
    let h: serde_json::Value = serde_json::from_slice(&holder.stdout).unwrap();
    let forged = e
        .cmd()
        .env("LEASEHOLD_KEY", "job")
        .env("LEASEHOLD_OWNER", "0123456789abcdef0123456789abcdef")
        .env("LEASEHOLD_FENCE", h["fence"].to_string())
        .env("LEASEHOLD_STORE_ID", e.store())
        .args(with_store(&["run", "job", "--", "echo", "ran"], &e.store()))
        .output()
        .unwrap();
    assert_eq!(code(&forged), 75, "busy, not borrowed: {}", stderr(&forged));
    assert!(!stdout(&forged).contains("ran"));
}

fn closed_port() -> String {
    // Bound, then closed: nothing listens there.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    format!("redis://127.0.0.1:{port}")
}

/// An unreachable store fails closed by default (69, the command never runs); with
/// `--if-unavailable run` the command runs without a lease and without LEASEHOLD_FENCE,
/// after one warning line, and its own exit code is returned.
#[test]
fn if_unavailable_run_fails_open_only_when_asked() {
    let e = Env::new();
    let store = closed_port();
    let cmd = ["sh", "-c", "echo fence=${LEASEHOLD_FENCE-unset}; exit 5"];
    let o = e.cmd().args(["run", &format!("--store={store}"), "job", "--"]).args(cmd).output();
    let o = o.unwrap();
    assert_eq!(code(&o), 69, "{}", stderr(&o));
    assert!(!stdout(&o).contains("fence="), "the command ran: {}", stdout(&o));

    let o = e
        .cmd()
        .env("LEASEHOLD_FENCE", "123") // inherited from somewhere: must not leak through
        .args(["run", &format!("--store={store}"), "--if-unavailable", "run", "job", "--"])
        .args(cmd)
        .output()
        .unwrap();
    assert_eq!(code(&o), 5, "{}", stderr(&o));
    assert_eq!(field(&stdout(&o), "fence"), "unset");
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("WITHOUT a lease"), "{err}");
    // Its kind once: "store unavailable (store unavailable: …)" before.
    assert_eq!(err.matches("store unavailable").count(), 1, "{err}");
}

/// Busy is never "unavailable": a held key still exits 75 with `--if-unavailable run`.
#[test]
fn if_unavailable_run_does_not_run_on_busy() {
    let e = Env::new();
    let a = e.run(&["acquire", "--ttl", "30s", "job"]);
    assert_eq!(code(&a), 0, "{}", stderr(&a));
    let o = e.run(&["run", "--if-unavailable", "run", "job", "--", "echo", "ran"]);
    assert_eq!(code(&o), 75, "{}", stderr(&o));
    assert!(!stdout(&o).contains("ran"));
}

/// Outside the parent's process group (here `setsid`, as a daemonised step would be), the
/// parent's SIGTERM on loss would not reach the command: the grant is not borrowed, and the
/// nested run waits for the key like anyone else (busy after its --wait).
#[test]
fn nested_run_outside_the_parents_group_does_not_borrow() {
    let e = Env::new();
    let script =
        "setsid \"$LH\" run --store \"$STORE\" --wait 300ms job -- echo inner; echo code=$?";
    let o = e.run(&["run", "job", "--", "sh", "-c", script]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(!out.contains("inner"), "{out}");
    assert_eq!(field(&out, "code"), "75", "{out}");
}
