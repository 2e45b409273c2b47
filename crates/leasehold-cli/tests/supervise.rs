//! The job never outlives its lease holder: `kill -9` of `run` takes the command and every
//! process it started; what the command leaves behind is killed before the release; the
//! supervisor keeps the deadline even when `run` is stalled; the terminal goes to the job.

mod common;

use common::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Whether `pid` is a live process (not gone, not a zombie).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next());
            !matches!(state, Some("Z" | "X") | None)
        }
        Err(_) => false,
    }
}

fn pid_in(path: &Path) -> i32 {
    wait_for(path);
    let start = Instant::now();
    loop {
        if let Ok(p) = std::fs::read_to_string(path).map(|s| s.trim().parse::<i32>())
            && let Ok(p) = p
        {
            return p;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no pid in {}", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |s| s.lines().count())
}

/// Waits until every pid is gone; panics after `limit`.
fn all_gone(pids: &[i32], limit: Duration) {
    let start = Instant::now();
    while pids.iter().any(|&p| alive(p)) {
        let left: Vec<_> = pids.iter().filter(|&&p| alive(p)).collect();
        assert!(start.elapsed() < limit, "still running after {limit:?}: {left:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The children of `pid` (from /proc).
fn children(pid: u32) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else { continue };
        let ppid = stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().nth(1));
        if ppid == Some(&pid.to_string()) {
            out.push(p);
        }
    }
    out
}

/// A job script: a writer grandchild, a `sleep` grandchild and a writer that left the
/// process group (setsid), each recording its pid.
const JOB: &str = r#"#!/bin/sh
sh -c 'echo $$ > writer.pid; while :; do echo x >> out; sleep 0.02; done' &
sleep 1000 &
echo $! > sleep.pid
setsid sh -c 'echo $$ > escaped.pid; while :; do echo y >> out2; sleep 0.02; done' &
touch started
wait
"#;

fn job(e: &Env) -> String {
    let path = e.path("job.sh");
    std::fs::write(&path, JOB).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

#[test]
fn kill_9_of_run_kills_the_job_and_every_process_it_started() {
    let e = Env::new();
    let script = job(&e);
    let mut run = e.spawn(&["run", "job", "--", &script]);
    wait_for(&e.path("started"));
    let pids = [
        pid_in(&e.path("writer.pid")),
        pid_in(&e.path("sleep.pid")),
        pid_in(&e.path("escaped.pid")),
    ];
    while lines(&e.path("out")) < 3 || lines(&e.path("out2")) < 3 {
        std::thread::sleep(Duration::from_millis(10));
    }
    // The password-free command line of what `ps` shows: leasehold supervise, then the job.
    let sup = children(run.id());
    assert_eq!(sup.len(), 1, "one supervisor under run: {sup:?}");
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", sup[0])).unwrap();
    assert!(String::from_utf8_lossy(&cmdline).starts_with("leasehold\0supervise"));

    kill(Pid::from_raw(run.id() as i32), Signal::SIGKILL).unwrap();
    let _ = run.wait();
    all_gone(&pids, Duration::from_secs(5));
    all_gone(&sup, Duration::from_secs(5));
    let (a, b) = (lines(&e.path("out")), lines(&e.path("out2")));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!((lines(&e.path("out")), lines(&e.path("out2"))), (a, b), "the files still grow");
}

/// What the command leaves running when it exits is killed before the key is released.
#[test]
fn processes_the_command_leaves_behind_end_before_the_release() {
    let e = Env::new();
    let script = "sh -c 'echo $$ > writer.pid; trap \"\" TERM; while :; do echo x >> out; sleep 0.02; done' & \
                  while [ ! -s writer.pid ]; do sleep 0.01; done; exit 3";
    let o = e.run(&["run", "--grace", "300ms", "job", "--", "sh", "-c", script]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(stderr(&o).contains("process(es) running"), "{}", stderr(&o));
    let writer = pid_in(&e.path("writer.pid"));
    assert!(!alive(writer), "the leftover writer outlived the run");
    assert_eq!(stdout(&e.run(&["status", "--json", "job"])).trim(), "[]");
}

/// `run` frozen (SIGSTOP) while its command ignores SIGTERM: the supervisor keeps the local
/// deadline itself, so the command is dead before the store grants the key to a successor.
#[test]
fn a_stalled_run_still_kills_its_command_before_the_successor_is_granted() {
    let e = Env::new();
    let old = "trap '' TERM; touch started; while :; do date +%s%N >> old; sleep 0.01; done";
    let run = e.spawn(&["run", "--ttl", "2s", "--grace", "300ms", "job", "--", "sh", "-c", old]);
    wait_for(&e.path("started"));
    let run_pid = Pid::from_raw(run.id() as i32);
    kill(run_pid, Signal::SIGSTOP).unwrap();
    let succ = e.run(&[
        "run",
        "--wait",
        "20s",
        "job",
        "--",
        "sh",
        "-c",
        "date +%s%N > new; echo fence=$LEASEHOLD_FENCE",
    ]);
    assert_eq!(code(&succ), 0, "{}", stderr(&succ));
    let granted: u128 = std::fs::read_to_string(e.path("new")).unwrap().trim().parse().unwrap();
    let last_old: u128 = std::fs::read_to_string(e.path("old"))
        .unwrap()
        .lines()
        .filter_map(|l| l.parse().ok())
        .max()
        .unwrap();
    assert!(
        last_old < granted,
        "the old command wrote {} ms after the successor's grant",
        (last_old - granted) / 1_000_000
    );
    kill(run_pid, Signal::SIGCONT).unwrap();
    let o = wait_child(run, Duration::from_secs(30));
    assert_eq!(code(&o), 79, "{}", stderr(&o));
    assert!(stderr(&o).contains("SIGKILL"), "{}", stderr(&o));
}

/// The store says the key is not ours: another holder may have it already, so the command
/// gets SIGKILL at once, not after the grace.
#[test]
fn not_ours_is_answered_with_sigkill_at_once() {
    let e = Env::new();
    let script = r#""$LH" release --store "$STORE" --owner "$LEASEHOLD_OWNER" "$LEASEHOLD_KEY"; trap "" TERM; sleep 60"#;
    let started = Instant::now();
    // The first renewal comes ttl/6 (5 s) after the grant; the grace alone would be 7 s more.
    let o = e.run(&["run", "--ttl", "30s", "--grace", "7s", "job", "--", "sh", "-c", script]);
    assert_eq!(code(&o), 79, "{}", stderr(&o));
    assert!(stderr(&o).contains("SIGKILL to the command at once"), "{}", stderr(&o));
    assert!(started.elapsed() < Duration::from_secs(11), "{:?}", started.elapsed());
}

/// The supervisor itself killed: `run` kills what the command started and says so (70).
#[test]
fn a_killed_supervisor_takes_the_command_with_it() {
    let e = Env::new();
    let script = job(&e);
    let run = e.spawn(&["run", "job", "--", &script]);
    wait_for(&e.path("started"));
    let pids = [
        pid_in(&e.path("writer.pid")),
        pid_in(&e.path("sleep.pid")),
        pid_in(&e.path("escaped.pid")),
    ];
    let sup = children(run.id());
    assert_eq!(sup.len(), 1, "{sup:?}");
    kill(Pid::from_raw(sup[0]), Signal::SIGKILL).unwrap();
    let o = wait_child(run, Duration::from_secs(30));
    assert_eq!(code(&o), 70, "{}", stderr(&o));
    all_gone(&pids, Duration::from_secs(5));
}

/// With a terminal on stdin, the job's group is the terminal's foreground group: a job that
/// reads the terminal is not stopped by SIGTTIN (`script` gives the run a terminal).
#[test]
fn a_job_that_reads_the_terminal_gets_it() {
    let e = Env::new();
    let inner = format!("'{BIN}' run --store={} ttyjob -- sh -c 'read x; echo got=$x'", e.store());
    let mut c = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .current_dir(e.dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script(1) from util-linux");
    let mut stdin = c.stdin.take().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    use std::io::Write;
    stdin.write_all(b"hello\n").unwrap();
    let o = wait_child(c, Duration::from_secs(20));
    drop(stdin);
    assert!(stdout(&o).contains("got=hello"), "{} {}", stdout(&o), stderr(&o));
}

/// `run` alive but cut off from Redis (its traffic swallowed by a fault proxy) while its
/// command ignores SIGTERM: renewals cannot be confirmed, SIGTERM at the local deadline,
/// SIGKILL the grace later, and a successor that reaches Redis directly is granted the key
/// only after the old command's last write. `--ttl 3s` with the default grace (5 s, which
/// cannot fit, so 670 ms): the case where the SIGKILL used to come 3 s after the successor.
#[test]
fn a_partitioned_run_kills_its_command_before_the_successor_is_granted() {
    use leasehold_testkit::proxy::{Fault, FaultProxy};
    use leasehold_testkit::stores::redis::server::RedisServer;
    let redis = RedisServer::start();
    let direct: std::net::SocketAddr = format!("127.0.0.1:{}", redis.port()).parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build();
    let rt = rt.unwrap();
    let proxy = rt.block_on(FaultProxy::start(direct)).unwrap();
    let e = Env::new();
    let old = "trap '' TERM; touch started; while :; do date +%s%N >> old; sleep 0.01; done";
    let cut = format!("--store=redis://{}", proxy.addr());
    let run = e
        .cmd()
        .args(["run", &cut, "--ttl", "3s", "job", "--", "sh", "-c", old])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&e.path("started"));
    proxy.set(Fault::Blackhole);
    let succ = e
        .cmd()
        .args(["run", &format!("--store=redis://{direct}"), "--wait", "20s", "job", "--"])
        .args(["sh", "-c", "date +%s%N > new"])
        .output()
        .unwrap();
    assert_eq!(code(&succ), 0, "{}", stderr(&succ));
    let granted: u128 = std::fs::read_to_string(e.path("new")).unwrap().trim().parse().unwrap();
    let o = wait_child(run, Duration::from_secs(30));
    assert_eq!(code(&o), 79, "{}", stderr(&o));
    let last_old: u128 = std::fs::read_to_string(e.path("old"))
        .unwrap()
        .lines()
        .filter_map(|l| l.parse().ok())
        .max()
        .unwrap();
    assert!(
        last_old < granted,
        "the old command wrote {} ms after the successor's grant",
        (last_old - granted) / 1_000_000
    );
    assert!(stderr(&o).contains("SIGKILL"), "{}", stderr(&o));
    drop(proxy);
}
