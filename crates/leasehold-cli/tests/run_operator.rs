//! `run` as the next operator met it (issue 35): outcomes in the metrics, SIGTERM that
//! escalates, a job that does not get the store's password, refused combinations, man pages
//! groff reads cleanly, a key freed at once after `kill -9`, and holder info that can be
//! turned off and keeps secrets out. Every store URL here goes through $LEASEHOLD_STORE.

mod common;

use common::*;
use std::process::Command;

/// `--shared --permits 2` used to drop `--shared` silently; now it is refused, in one line.
#[test]
fn shared_with_permits_is_refused_with_64() {
    let e = Env::new();
    for args in [
        ["run", "--shared", "--permits", "2", "k", "--", "touch", "ran"],
        ["run", "--permits", "2", "-s", "k", "--", "touch", "ran"],
    ] {
        let o = e.lh_out(&args);
        assert_eq!(code(&o), 64, "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
        assert!(stderr(&o).contains("--shared") && stderr(&o).contains("--permits"));
        assert!(!e.path("ran").exists(), "the command ran");
    }
}

/// `man --dir` into a directory man does not search says so on stderr; one it searches
/// (man1 under a MANPATH entry) gets no note.
#[test]
fn man_dir_outside_the_man_path_gets_a_hint() {
    let e = Env::new();
    let root = e.path("share/man");
    std::fs::create_dir_all(&root).unwrap();
    let man = |dir: &std::path::Path| {
        Command::new(BIN).env("MANPATH", &root).args(["man", "--dir"]).arg(dir).output().unwrap()
    };
    let o = man(&e.path("man"));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("will not find") && stderr(&o).contains("MANPATH"),
        "{}",
        stderr(&o)
    );
    let o = man(&root.join("man1"));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stderr(&o), "", "a searched directory needs no note");
    assert!(root.join("man1/leasehold-run.1").exists());
}

/// The pages are ASCII (non-ASCII characters as groff escapes), and groff reads them
/// without a warning.
#[test]
fn man_pages_are_ascii_and_groff_reads_them_without_warnings() {
    let e = Env::new();
    let dir = e.path("man1");
    let o = Command::new(BIN).args(["man", "--dir"]).arg(&dir).output().unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let groff = Command::new("groff").arg("-v").output().is_ok_and(|o| o.status.success());
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let page = std::fs::read(&path).unwrap();
        let bad = page.iter().position(|b| !b.is_ascii());
        assert!(bad.is_none(), "{} has non-ASCII at byte {bad:?}", path.display());
        if groff {
            let o = Command::new("sh")
                .arg("-c")
                .arg("groff -man -Tutf8 -ww \"$1\" >/dev/null")
                .arg("sh")
                .arg(&path)
                .output()
                .unwrap();
            assert_eq!(stderr(&o), "", "groff warns on {}", path.display());
        }
    }
    let run = std::fs::read_to_string(dir.join("leasehold-run.1")).unwrap();
    assert!(run.contains("\\[u2264]"), "≤ as an escape");
}

/// A job that ignores SIGTERM: two SIGTERMs to `run` used to leave it holding the key for
/// good. Now SIGKILL follows --grace after the first, and the key is released.
#[test]
fn sigterm_to_run_escalates_to_sigkill_after_grace() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    use std::time::{Duration, Instant};
    let e = Env::new();
    let job = "trap '' TERM; touch started; while :; do sleep 0.05; done";
    let run = e.lh_spawn(&["run", "--grace", "700ms", "stubborn", "--", "sh", "-c", job]);
    wait_for(&e.path("started"));
    let pid = Pid::from_raw(run.id() as i32);
    let sent = Instant::now();
    kill(pid, Signal::SIGTERM).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    kill(pid, Signal::SIGTERM).unwrap();
    let o = wait_child(run, Duration::from_secs(15));
    let took = sent.elapsed();
    assert_eq!(code(&o), 128 + 9, "the job died of SIGKILL: {}", stderr(&o));
    assert!(took >= Duration::from_millis(700), "SIGKILL before --grace: {took:?}");
    assert!(took < Duration::from_secs(4), "a second SIGTERM postponed it: {took:?}");
    assert!(stderr(&o).contains("after SIGTERM; SIGKILL"), "{}", stderr(&o));
    assert_eq!(stdout(&e.lh_out(&["status", "--json", "stubborn"])).trim(), "[]", "released");
}
