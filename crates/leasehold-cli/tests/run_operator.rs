//! `run` as the next operator met it (issue 35): outcomes in the metrics, SIGTERM that
//! escalates, a job that does not get the store's password, refused combinations, man pages
//! groff reads cleanly, a key freed at once after `kill -9`, holder info that can be
//! turned off and keeps secrets out, and a waiter behind an `--at-least` holder that starts
//! when the period ends. Every store URL here goes through $LEASEHOLD_STORE.

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

/// A PostgreSQL URL of the test server with a password in it (the test server trusts, so
/// any password connects).
fn pg_with_password(schema: &str) -> (String, String) {
    let base = leasehold_testkit::postgres_base();
    let (scheme, rest) = base.split_once("://").unwrap();
    let (userinfo, host) = rest.split_once('@').unwrap();
    let (user, pw) = match userinfo.split_once(':') {
        Some((u, p)) => (u.to_owned(), p.to_owned()),
        None => (userinfo.to_owned(), "lh35-s3cret-pw".to_owned()),
    };
    (format!("{scheme}://{user}:{pw}@{host}?schema={schema}"), pw)
}

/// `env` inside the job: LEASEHOLD_STORE used to arrive there, password included. Now the
/// job gets its grant and LEASEHOLD_STORE_ID (password redacted), and neither
/// LEASEHOLD_STORE nor another variable carrying the same URL.
#[test]
fn the_job_gets_neither_the_store_url_nor_its_password() {
    let schema = leasehold_testkit::PgSchema::new();
    let (url, pw) = pg_with_password(&schema.name);
    let e = Env::new();
    let o = e
        .cmd()
        .env("LEASEHOLD_STORE", &url)
        .env("APP_DB_URL", &url)
        .args(["run", "envjob", "--", "sh", "-c", "env > env.txt"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let env = std::fs::read_to_string(e.path("env.txt")).unwrap();
    assert!(!env.contains(&pw), "the password reached the job:\n{env}");
    assert!(!env.lines().any(|l| l.starts_with("LEASEHOLD_STORE=")), "{env}");
    assert!(env.lines().any(|l| l.starts_with("LEASEHOLD_STORE_ID=postgres://")), "{env}");
    assert!(env.lines().any(|l| l.starts_with("LEASEHOLD_FENCE=")), "{env}");
    assert!(stderr(&o).contains("not passing APP_DB_URL"), "{}", stderr(&o));
}

/// A nested run finds no LEASEHOLD_STORE: rather than lock the per-user default store
/// (excluding nothing), it says so (64); through LEASEHOLD_STORE_FILE, which is passed on,
/// it runs under the parent's grant as before.
#[test]
fn a_nested_run_without_its_store_says_so_and_a_store_file_still_nests() {
    let e = Env::new();
    let nested = "\"$LH\" run --wait 5s job -- sh -c 'echo inner=$LEASEHOLD_FENCE'; echo code=$?";
    let script = format!("echo outer=$LEASEHOLD_FENCE; {nested}");
    let o = e.lh_out(&["run", "job", "--", "sh", "-c", &script]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(field(&stdout(&o), "code"), "64", "{}", stderr(&o));
    assert!(stderr(&o).contains("no store is given here"), "{}", stderr(&o));
    std::fs::write(e.path("store.url"), e.store()).unwrap();
    let o = e
        .cmd()
        .env("LEASEHOLD_STORE_FILE", e.path("store.url"))
        .args(["run", "job", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(field(&out, "code"), "0", "{}", stderr(&o));
    assert_eq!(field(&out, "inner"), field(&out, "outer"), "{out}");
}

/// The value of `name` with `label` among its labels in a metrics file, if there is one.
fn metric(text: &str, name: &str, label: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.strip_prefix(name).is_some_and(|r| r.starts_with('{')))
        .find(|l| l.split_once('}').is_some_and(|(labels, _)| labels.contains(label)))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Two hosts with `-E 0 --metrics-file`: the one that finds the key busy used to write exit
/// code 0 and a fresh last success, so "no success in 25 h" never fired while the winner's
/// job failed every night. Now skipped, busy, failed and success are distinct outcomes and
/// only the command's own success moves the last success.
#[test]
fn metrics_tell_a_skip_a_busy_key_a_failure_and_a_success_apart() {
    let e = Env::new();
    let (a, b) = (e.path("a.prom"), e.path("b.prom"));
    let (pa, pb) = (a.to_str().unwrap(), b.to_str().unwrap());
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap();
    const SUCCESS: &str = "leasehold_run_last_success_timestamp_seconds";
    const OUTCOME: &str = "leasehold_run_outcome";
    const LAST: &str = "leasehold_run_last_outcome_timestamp_seconds";
    let hold = "touch started; while [ ! -e stop ]; do sleep 0.02; done; exit 3";
    let winner =
        e.lh_spawn(&["run", "-E", "0", "--metrics-file", pa, "job", "--", "sh", "-c", hold]);
    wait_for(&e.path("started"));
    let loser = e.lh_out(&["run", "-E", "0", "--metrics-file", pb, "job", "--", "touch", "ran"]);
    assert_eq!((code(&loser), stderr(&loser).as_str()), (0, ""), "-E 0 is quiet");
    let text = read(&b);
    assert_eq!(metric(&text, OUTCOME, "outcome=\"skipped\""), Some(1.0), "{text}");
    assert_eq!(metric(&text, OUTCOME, "outcome=\"success\""), Some(0.0), "{text}");
    assert!(metric(&text, LAST, "outcome=\"skipped\"").is_some(), "{text}");
    assert!(!text.contains(SUCCESS), "a skip recorded a success:\n{text}");
    // Without -E, a busy key is its own outcome.
    let busy = e.lh_out(&["run", "--metrics-file", pb, "job", "--", "touch", "ran"]);
    assert_eq!(code(&busy), 75);
    let text = read(&b);
    assert_eq!(metric(&text, OUTCOME, "outcome=\"busy\""), Some(1.0), "{text}");
    assert_eq!(metric(&text, OUTCOME, "outcome=\"skipped\""), Some(0.0), "{text}");
    assert!(metric(&text, LAST, "outcome=\"skipped\"").is_some(), "kept from before: {text}");
    assert!(!e.path("ran").exists());

    std::fs::write(e.path("stop"), "").unwrap();
    let o = wait_child(winner, std::time::Duration::from_secs(30));
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    let text = read(&a);
    assert_eq!(metric(&text, OUTCOME, "outcome=\"failed\""), Some(1.0), "{text}");
    assert!(!text.contains(SUCCESS), "a failed job recorded a success:\n{text}");
    // The command's own success, and only it, moves the last success.
    let ok = e.lh_out(&["run", "-E", "0", "--metrics-file", pa, "job", "--", "true"]);
    assert_eq!(code(&ok), 0, "{}", stderr(&ok));
    let text = read(&a);
    assert_eq!(metric(&text, OUTCOME, "outcome=\"success\""), Some(1.0), "{text}");
    let success = metric(&text, "leasehold_run_last_success_timestamp_seconds", "key=");
    assert!(success.is_some(), "{text}");
    assert!(metric(&text, LAST, "outcome=\"failed\"").is_some(), "kept from before: {text}");
    for want in ["# HELP leasehold_run_outcome ", "# TYPE leasehold_run_outcome gauge"] {
        assert!(text.contains(want), "{want:?} not in {text}");
    }
    // Once per period: the job fails and keeps the key for --at-least; the host that finds
    // it busy records a skip, and neither a success.
    let (c, d) = (e.path("c.prom"), e.path("d.prom"));
    let cron = |p: &std::path::Path, job: &str| {
        let p = p.to_str().unwrap().to_owned();
        e.lh_out(&[
            "run",
            "--at-least",
            "5s",
            "-E",
            "0",
            "--metrics-file",
            &p,
            "period",
            "--",
            "sh",
            "-c",
            job,
        ])
    };
    assert_eq!(code(&cron(&c, "exit 5")), 5);
    assert_eq!(code(&cron(&d, "exit 0")), 0);
    let (tc, td) = (read(&c), read(&d));
    assert_eq!(metric(&tc, OUTCOME, "outcome=\"failed\""), Some(1.0), "{tc}");
    assert_eq!(metric(&td, OUTCOME, "outcome=\"skipped\""), Some(1.0), "{td}");
    assert!(!tc.contains(SUCCESS) && !td.contains(SUCCESS), "{tc}\n{td}");
}

/// Holder info: secrets in the command line are redacted (not only URL passwords), and
/// `--no-holder-info` or LEASEHOLD_NO_HOLDER_INFO records nothing beside the grant.
#[test]
fn holder_info_redacts_secrets_and_can_be_turned_off() {
    let e = Env::new();
    let hold = "touch started; while [ ! -e stop ]; do sleep 0.02; done";
    let info = |extra: &[&str], env_off: bool| -> serde_json::Value {
        let _ = std::fs::remove_file(e.path("started"));
        let _ = std::fs::remove_file(e.path("stop"));
        let mut args = vec!["run"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["held", "--", "sh", "-c", hold, "job"]);
        args.extend_from_slice(&["--password=hunter2", "-p", "hunter3", "TOKEN=hunter4"]);
        let mut cmd = e.lh(&args);
        if env_off {
            cmd.env("LEASEHOLD_NO_HOLDER_INFO", "1");
        }
        let run = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        wait_for(&e.path("started"));
        let s = e.lh_out(&["status", "--json", "held"]);
        let busy = e.lh_out(&["run", "held", "--", "true"]);
        assert_eq!(code(&busy), 75);
        assert!(!stderr(&busy).contains("hunter"), "{}", stderr(&busy));
        std::fs::write(e.path("stop"), "").unwrap();
        let o = wait_child(run, std::time::Duration::from_secs(30));
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let h: serde_json::Value = serde_json::from_slice(&s.stdout).unwrap();
        h[0]["info"].clone()
    };
    let shown = info(&[], false);
    let command = shown["command"].as_str().unwrap();
    assert!(!command.contains("hunter"), "a secret in status: {command}");
    assert!(command.contains("--password=***") && command.contains("TOKEN=***"), "{command}");
    for off in [info(&["--no-holder-info"], false), info(&[], true)] {
        assert!(off.is_null(), "holder info recorded though turned off: {off}");
    }
}

/// `kill -9` of `run`: the supervisor kills the command and, once it is gone, releases the
/// key (owner-checked), so the next host starts at once as with flock instead of waiting out
/// the TTL. The store URL reached the supervisor over its socket: neither its command line
/// nor its environment (nor the job's) holds it.
#[test]
fn kill_9_of_run_frees_the_key_at_once() {
    let e = Env::new();
    kill_9_then_next(&e, &e.store(), None);
}

/// The same on a private Redis and on the PostgreSQL lease table, whose URL carries a
/// password.
#[test]
fn kill_9_of_run_frees_the_key_at_once_on_redis_and_postgres() {
    let redis = leasehold_testkit::stores::redis::server::RedisServer::start();
    let schema = leasehold_testkit::PgSchema::new();
    let (pg, pw) = pg_with_password(&schema.name);
    let e = Env::new();
    kill_9_then_next(&e, &redis.url(), None);
    kill_9_then_next(&e, &pg, Some(&pw));
}

/// The same on etcd and ZooKeeper, whose session locks live on the servers until the
/// session times out (10 s by default, the store's `session_timeout`): the supervisor releases
/// those too, so the next run does not wait the session out.
#[test]
fn kill_9_of_run_frees_the_key_at_once_on_etcd_and_zookeeper() {
    let etcd = leasehold_testkit::stores::etcd::server::EtcdCluster::single();
    let zk = leasehold_testkit::stores::zookeeper::server::ZkServer::start();
    let e = Env::new();
    kill_9_then_next(&e, &etcd.url(""), None);
    kill_9_then_next(&e, &zk.url(""), None);
}

/// A run holding a key on `store` (whose URL holds `password`, if any) is killed with
/// SIGKILL; the next run of the key must start within 3 s of a 10 s ttl.
fn kill_9_then_next(e: &Env, store: &str, password: Option<&str>) {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    use std::time::{Duration, Instant};
    let _ = std::fs::remove_file(e.path("started"));
    let job = "echo $PPID > sup.pid; touch started; sleep 100";
    let mut run = e
        .cmd()
        .env("LEASEHOLD_STORE", store)
        .args(["run", "--ttl", "10s", "job9", "--", "sh", "-c", job])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&e.path("started"));
    let sup = std::fs::read_to_string(e.path("sup.pid")).unwrap().trim().to_owned();
    let cmdline = std::fs::read(format!("/proc/{sup}/cmdline")).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline);
    assert!(cmdline.starts_with("leasehold\0supervise"), "{cmdline}");
    assert!(!cmdline.contains(store), "the store URL in the supervisor's command line");
    let environ = std::fs::read(format!("/proc/{sup}/environ")).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    assert!(!environ.split('\0').any(|v| v.starts_with("LEASEHOLD_STORE=")), "{store}");
    if let Some(pw) = password {
        assert!(!environ.contains(pw), "the password in the supervisor's environment");
    }
    kill(Pid::from_raw(run.id() as i32), Signal::SIGKILL).unwrap();
    let _ = run.wait();
    let killed = Instant::now();
    let next = e
        .cmd()
        .env("LEASEHOLD_STORE", store)
        .args(["run", "--wait", "8s", "job9", "--", "true"])
        .output()
        .unwrap();
    let took = killed.elapsed();
    assert_eq!(code(&next), 0, "{store}: {}", stderr(&next));
    assert!(took < Duration::from_secs(3), "{store}: the next run waited {took:?} (ttl 10s)");
}

/// A waiter behind an `--at-least` holder starts when the period ends, not at the holder's
/// original TTL: shortening the key to the time left used to notify nobody, so on Redis and
/// PostgreSQL a waiter that was already waiting slept until the TTL it read when it started
/// waiting (here 20 s; the period is 4 s).
#[test]
fn a_waiter_behind_at_least_starts_when_the_period_ends_on_redis_and_postgres() {
    let redis = leasehold_testkit::stores::redis::server::RedisServer::start();
    let schema = leasehold_testkit::PgSchema::new();
    let pg = format!(
        "{}{}schema={}",
        leasehold_testkit::postgres_base(),
        if leasehold_testkit::postgres_base().contains('?') { '&' } else { '?' },
        schema.name
    );
    let e = Env::new();
    for store in [redis.url(), pg] {
        waiter_behind_at_least(&e, &store);
    }
}

/// A holder runs a 1 s job under `--ttl 20s --at-least 4s`; a `--wait 60s` waiter starts while
/// the job runs. The waiter's job must start within 2 s of the end of the period.
fn waiter_behind_at_least(e: &Env, store: &str) {
    use std::time::{Duration, Instant};
    for f in ["started", "waited"] {
        let _ = std::fs::remove_file(e.path(f));
    }
    let t0 = Instant::now();
    let mut holder = e.cmd();
    holder
        .env("LEASEHOLD_STORE", store)
        .args(["run", "--ttl", "20s", "--at-least", "4s", "period", "--"])
        .args(["sh", "-c", "touch started; sleep 1"]);
    let holder = std::thread::spawn(move || holder.output().unwrap());
    wait_for(&e.path("started"));
    let waiter = e
        .cmd()
        .env("LEASEHOLD_STORE", store)
        .args(["run", "--wait", "60s", "period", "--", "touch", "waited"])
        .output()
        .unwrap();
    let took = t0.elapsed();
    let holder = holder.join().unwrap();
    assert_eq!(code(&holder), 0, "{store}: {}", stderr(&holder));
    assert_eq!(code(&waiter), 0, "{store}: {}", stderr(&waiter));
    assert!(e.path("waited").exists());
    assert!(took >= Duration::from_millis(3500), "{store}: started inside the period: {took:?}");
    assert!(
        took < Duration::from_secs(6),
        "{store}: the waiter started {took:?} after the holder (period 4 s, ttl 20 s)"
    );
}
