//! `chaos` on a password-protected Redis: the password is on no command line the tool
//! starts (what `ps` shows every user), and nothing of the trials is left on the store.

mod common;

use common::*;
use leasehold_testkit::stores::redis::server::RedisServer;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Every process's command line that holds `needle`, read from /proc until `stop`.
fn watch_cmdlines(needle: &'static str, stop: Arc<AtomicBool>) -> Arc<Mutex<Vec<String>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let found = seen.clone();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            for entry in std::fs::read_dir("/proc").unwrap().flatten() {
                let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else { continue };
                let line = String::from_utf8_lossy(&raw).replace('\0', " ");
                // The test's own redis-cli call below names it; everything of leasehold's must not.
                if line.contains(needle) && line.contains("leasehold") {
                    found.lock().unwrap().push(line);
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    seen
}

#[test]
fn chaos_keeps_the_password_off_command_lines_and_cleans_up() {
    const PW: &str = "chaos-s3cret-pw";
    let redis = RedisServer::start();
    assert_eq!(redis.cli(&["CONFIG", "SET", "requirepass", PW]), "OK");
    let store = format!("redis://:{PW}@127.0.0.1:{}", redis.port());
    let stop = Arc::new(AtomicBool::new(false));
    let seen = watch_cmdlines(PW, stop.clone());
    for scenario in ["stalled-holder", "stalled-holder-http"] {
        let out = tempfile::tempdir().unwrap();
        let child = Command::new(BIN)
            .env("LEASEHOLD_STORE", &store)
            .args(["chaos", "--scenario", scenario, "--trials", "2", "--ttl", "300ms", "--out"])
            .arg(out.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let o = wait_child(child, Duration::from_secs(120));
        assert_eq!(code(&o), 0, "{scenario}: {}{}", stdout(&o), stderr(&o));
        assert!(!stdout(&o).contains(PW) && !stderr(&o).contains(PW), "{scenario}: printed");
        let report = std::fs::read_to_string(out.path().join("report.json")).unwrap();
        assert!(!report.contains(PW), "{scenario}: the report holds the password");
    }
    stop.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(20));
    let seen = seen.lock().unwrap();
    assert!(seen.is_empty(), "on a command line: {:?}", &seen[..seen.len().min(3)]);
    let keys = redis.cli(&["--no-auth-warning", "-a", PW, "KEYS", "*"]);
    assert_eq!(keys, "", "left on the store");
}
