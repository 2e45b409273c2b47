//! `leasehold` as an operator meets it: once per period with `--at-least`, flock's `-E`,
//! bounded waits behind a frozen store, the exit code after the command started, the store
//! URL from a file, the `status` table, `--metrics-file`, man pages and completion.

mod common;

use common::*;
use std::process::Command;
use std::time::{Duration, Instant};

/// The same cron line in two shells at once, twice in one period, then after it: the job
/// runs once per period, and the busy runs exit 0 quietly (`-E 0`).
#[test]
fn at_least_runs_the_same_cron_line_once_per_period() {
    let e = Env::new();
    let line =
        ["run", "--at-least", "3s", "-E", "0", "nightly", "--", "sh", "-c", "echo $$ >> ran"];
    let period = Instant::now();
    let shells: Vec<_> = (0..2).map(|_| e.spawn(&line)).collect();
    for s in shells {
        let o = wait_child(s, Duration::from_secs(30));
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        assert_eq!(stderr(&o), "", "busy is quiet with -E");
    }
    let again = e.run(&line);
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    let ran = || std::fs::read_to_string(e.path("ran")).unwrap_or_default().lines().count();
    assert_eq!(ran(), 1, "the job ran more than once in the period");
    assert!(period.elapsed() < Duration::from_secs(3), "the runs waited: {:?}", period.elapsed());
    // The key is held, not renewed, until the period ends.
    let s = e.run(&["status", "--json", "nightly"]);
    let h: serde_json::Value = serde_json::from_slice(&s.stdout).unwrap();
    assert!(h[0]["expires_in"].as_u64().unwrap() <= 3000, "{h}");
    while period.elapsed() < Duration::from_millis(3200) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let next = e.run(&line);
    assert_eq!(code(&next), 0, "{}", stderr(&next));
    assert_eq!(ran(), 2, "the next period's run did not run");
}

/// On a session store the lock ends with the process: `run` holds it in the foreground
/// until the period is over.
#[test]
fn at_least_on_a_session_store_holds_in_the_foreground() {
    let e = Env::new();
    let store = format!("--store=file://{}/locks", e.dir.path().display());
    let started = Instant::now();
    let first = e
        .cmd()
        .args(["run", &store, "--at-least", "2s", "job", "--", "true"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let busy = e.cmd().args(["run", &store, "job", "--", "true"]).output().unwrap();
    assert_eq!(code(&busy), 75, "{}", stderr(&busy));
    let first = wait_child(first, Duration::from_secs(30));
    assert_eq!(code(&first), 0, "{}", stderr(&first));
    assert!(started.elapsed() >= Duration::from_secs(2), "{:?}", started.elapsed());
    let free = e.cmd().args(["run", &store, "job", "--", "true"]).output().unwrap();
    assert_eq!(code(&free), 0, "{}", stderr(&free));
}

/// `-E N` as flock: busy exits N; the command's own codes pass through unchanged, with no
/// line of leasehold's.
#[test]
fn conflict_exit_code_and_the_commands_own_codes() {
    let e = Env::new();
    assert_eq!(code(&e.run(&["acquire", "--ttl", "30s", "job"])), 0);
    let o = e.run(&["run", "-E", "3", "job", "--", "touch", "ran"]);
    assert_eq!((code(&o), stderr(&o).as_str()), (3, ""));
    let o = e.run(&["run", "job", "--", "touch", "ran"]);
    assert_eq!(code(&o), 75);
    assert!(stderr(&o).starts_with("leasehold: busy"), "{}", stderr(&o));
    assert!(!e.path("ran").exists());
    for c in [69, 75, 79] {
        let o = e.run(&["run", "other", "--", "sh", "-c", &format!("exit {c}")]);
        assert_eq!((code(&o), stderr(&o).as_str()), (c, ""), "the child's own {c}");
    }
}

/// A store that accepts connections and never answers (a frozen TCP peer): every command
/// gives up within --timeout and says unavailable (69); it is an outage, so
/// `--if-unavailable run` runs the command.
#[test]
fn a_frozen_store_is_bounded_by_timeout() {
    let e = Env::new();
    // Bound and listening, never accepting: the handshake completes, nothing answers.
    let frozen = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = frozen.local_addr().unwrap().port();
    for url in [
        format!("redis://127.0.0.1:{port}"),
        format!("postgres://postgres@127.0.0.1:{port}/test"),
        format!("mysql://root@127.0.0.1:{port}/test"),
    ] {
        let store = format!("--store={url}");
        for args in [
            vec!["run", &store, "--timeout", "1s", "job", "--", "touch", "ran"],
            vec!["status", &store, "--timeout", "1s"],
            vec!["acquire", &store, "--timeout", "1s", "job"],
        ] {
            let started = Instant::now();
            let o = e.cmd().args(&args).output().unwrap();
            assert_eq!(code(&o), 69, "{args:?}: {}", stderr(&o));
            assert!(
                started.elapsed() < Duration::from_secs(6),
                "{args:?}: {:?}",
                started.elapsed()
            );
        }
        assert!(!e.path("ran").exists());
        let o = e
            .cmd()
            .args(["run", &store, "--timeout", "1s", "--if-unavailable", "run", "job"])
            .args(["--", "touch", "ran"])
            .output()
            .unwrap();
        assert_eq!(code(&o), 0, "{url}: {}", stderr(&o));
        assert!(e.path("ran").exists(), "{url}: an outage fails open when asked");
        std::fs::remove_file(e.path("ran")).unwrap();
    }
    drop(frozen);
}

/// After the command started, a failed release is a warning and the command's code stands
/// (never 69): here the store's write lock is held elsewhere when the command ends.
#[test]
fn a_failed_release_after_the_command_is_a_warning() {
    use leasehold::fence::sqlite::rusqlite::Connection;
    let e = Env::new();
    let script = "touch ready; while [ ! -e go ]; do sleep 0.01; done; exit 7";
    let run = e.spawn(&["run", "--timeout", "1s", "job", "--", "sh", "-c", script]);
    wait_for(&e.path("ready"));
    let db = Connection::open(e.path("s.db")).unwrap();
    db.execute_batch("BEGIN IMMEDIATE").unwrap();
    std::fs::write(e.path("go"), "").unwrap();
    let o = wait_child(run, Duration::from_secs(30));
    db.execute_batch("ROLLBACK").unwrap();
    assert_eq!(code(&o), 7, "{}", stderr(&o));
    assert!(stderr(&o).contains("warning: release"), "{}", stderr(&o));
}

/// The URL from a file (`--store-file`, `$LEASEHOLD_STORE_FILE`): out of `ps` and history.
#[test]
fn store_file_keeps_the_url_off_the_command_line() {
    use std::os::unix::fs::PermissionsExt;
    let e = Env::new();
    let file = e.path("store.url");
    std::fs::write(&file, format!("{}\n", e.store())).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let f = file.to_str().unwrap();
    let o = e.cmd().args(["run", "--store-file", f, "job", "--", "true"]).output().unwrap();
    assert_eq!((code(&o), stderr(&o).as_str()), (0, ""));
    let a = e.cmd().args(["acquire", "--store-file", f, "held"]).output().unwrap();
    assert_eq!(code(&a), 0, "{}", stderr(&a));
    // The same store through the environment: the key acquired above is there.
    let s = e.cmd().env("LEASEHOLD_STORE_FILE", f).args(["status", "--json"]).output().unwrap();
    assert!(stdout(&s).contains("\"held\""), "{}", stdout(&s));
    // Readable by others, with what looks like a password: a warning.
    let open = e.path("open.url");
    let at = format!("sqlite://{}/u@x.db", e.dir.path().display());
    std::fs::write(&open, &at).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = e.cmd().args(["status", "--store-file", open.to_str().unwrap()]).output().unwrap();
    assert!(stderr(&o).contains("readable by others"), "{}", stderr(&o));
    let missing = e.cmd().args(["status", "--store-file", "/no/such/file"]).output().unwrap();
    assert_eq!(code(&missing), 64, "{}", stderr(&missing));
}

/// A key with a newline and an escape sequence stays on one line of the table; the default
/// store's scope is stated.
#[test]
fn status_escapes_keys_and_states_the_default_stores_scope() {
    let e = Env::new();
    let key = "bad\nkey\u{1b}[2J";
    assert_eq!(code(&e.run(&["acquire", key])), 0);
    let o = e.run(&["status"]);
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.contains("bad\\nkey\\u{1b}[2J"), "{out}");
    let o = e.cmd().args(["status"]).output().unwrap();
    assert!(stderr(&o).contains("per-user default"), "{}", stderr(&o));
}

/// `--metrics-file` for a textfile collector: HELP and TYPE lines, the key as a label, the
/// exit code, the last success (kept through a failed run), buckets up to hours.
#[test]
fn metrics_file_is_fit_for_a_textfile_collector() {
    let e = Env::new();
    let (a, b) = (e.path("a.prom"), e.path("b.prom"));
    let (pa, pb) = (a.to_str().unwrap(), b.to_str().unwrap());
    assert_eq!(code(&e.run(&["run", "--metrics-file", pa, "job-a", "--", "true"])), 0);
    assert_eq!(code(&e.run(&["run", "--metrics-file", pb, "job-b", "--", "true"])), 0);
    let text = std::fs::read_to_string(&a).unwrap();
    for want in [
        "# HELP leasehold_grants_total ",
        "# TYPE leasehold_grants_total counter",
        "leasehold_grants_total{key=\"job-a\",backend=\"sqlite\"} 1\n",
        "# TYPE leasehold_hold_seconds histogram",
        "le=\"86400\"",
        "leasehold_run_exit_code{key=\"job-a\"} 0\n",
        "leasehold_run_duration_seconds{key=\"job-a\"} ",
        "leasehold_run_last_success_timestamp_seconds{key=\"job-a\"} ",
    ] {
        assert!(text.contains(want), "{want:?} not in {text}");
    }
    // Side by side, the two files have no series in common.
    let series = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| l.rsplit_once(' ').unwrap().0.to_owned())
            .collect()
    };
    let sb = series(&std::fs::read_to_string(&b).unwrap());
    assert!(series(&text).iter().all(|s| !sb.contains(s)), "duplicate series");
    let last = |t: &str| {
        t.lines()
            .find(|l| l.starts_with("leasehold_run_last_success_timestamp_seconds"))
            .map(|l| l.rsplit_once(' ').unwrap().1.to_owned())
    };
    let before = last(&text).unwrap();
    let o = e.run(&["run", "--metrics-file", pa, "job-a", "--", "sh", "-c", "exit 4"]);
    assert_eq!(code(&o), 4);
    let text = std::fs::read_to_string(&a).unwrap();
    assert!(text.contains("leasehold_run_exit_code{key=\"job-a\"} 4\n"), "{text}");
    assert_eq!(last(&text), Some(before), "the last success is kept through a failure");
}

/// `leasehold man --dir` writes a page per command, each with environment, signals and exit
/// status; the top page names only pages that exist; internal commands stay out of pages,
/// completion and help.
#[test]
fn man_pages_completion_and_help_name_only_public_commands() {
    let e = Env::new();
    let dir = e.path("man");
    let o = Command::new(BIN).args(["man", "--dir", dir.to_str().unwrap()]).output().unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let top = std::fs::read_to_string(dir.join("leasehold.1")).unwrap();
    for sub in ["run", "status", "acquire", "doctor", "chaos", "fence-proxy"] {
        let page = std::fs::read_to_string(dir.join(format!("leasehold-{sub}.1"))).unwrap();
        for section in [".SH OPTIONS", ".SH ENVIRONMENT", ".SH SIGNALS", ".SH EXIT STATUS"] {
            assert!(page.contains(section), "leasehold-{sub}.1 has no {section}");
        }
        let named = format!("leasehold\\-{}(1)", sub.replace('-', "\\-"));
        assert!(top.contains(&named), "the top page does not name {sub}");
    }
    // Every page the top page names exists.
    for line in top.lines().filter(|l| l.starts_with("leasehold\\-") && l.ends_with("(1)")) {
        let name = line.trim_end_matches("(1)").replace("\\-", "-");
        assert!(dir.join(format!("{name}.1")).exists(), "{name}(1) is named but not written");
    }
    let run = std::fs::read_to_string(dir.join("leasehold-run.1")).unwrap();
    assert!(run.contains("at\\-least") && run.contains("LEASEHOLD_STORE_FILE"), "{run:.400}");
    for hidden in ["supervise", "chaos\\-worker"] {
        assert!(!top.contains(&format!("leasehold\\-{hidden}")), "{hidden} in the man page");
        assert!(!dir.join(format!("leasehold-{}.1", hidden.replace('\\', ""))).exists());
    }
    let o = Command::new(BIN).args(["man", "run"]).output().unwrap();
    assert!(stdout(&o).contains(".TH leasehold-run"), "{}", stdout(&o));
    for shell in ["bash", "zsh", "fish"] {
        let o = Command::new(BIN).args(["completions", shell]).output().unwrap();
        let script = stdout(&o);
        assert!(script.contains("fence-proxy"), "{shell}");
        assert!(!script.contains("chaos-worker") && !script.contains("supervise"), "{shell}");
    }
    let help = stdout(&Command::new(BIN).arg("--help").output().unwrap());
    for form in [
        "sqlite://",
        "file://",
        "redis://",
        "rediss://",
        "redlock://",
        "postgres://",
        "mysql://",
        "etcd://",
        "zk://",
    ] {
        assert!(help.contains(form), "{form} not in --help");
    }
    assert!(help.contains("per user") && help.contains("sqlite:///var/lib/leasehold"), "{help}");
}

/// Durations that make no sense say so, in one line, with 64.
#[test]
fn negative_and_tiny_durations_are_refused_clearly() {
    let e = Env::new();
    for (args, says) in [
        (vec!["run", "--ttl", "-5s", "k", "--", "true"], "negative"),
        (vec!["run", "--grace", "-1s", "k", "--", "true"], "negative"),
        (vec!["run", "--ttl", "1ms", "k", "--", "true"], "too short"),
        (vec!["run", "--ttl", "3s", "--grace", "5s", "k", "--", "true"], "does not fit"),
        (vec!["status", "--timeout", "0"], "zero"),
    ] {
        let o = e.run(&args);
        assert_eq!(code(&o), 64, "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{args:?}: {}", stderr(&o));
    }
}
