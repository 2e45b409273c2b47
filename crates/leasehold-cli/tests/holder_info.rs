//! Who holds a key, as `lsof` tells for a flock: `run` records its host, pid, start and
//! command line beside the grant, and `status` shows them. This relies on the store keeping
//! `HolderInfo` (the embedded SQLite store here).

mod common;

use common::*;

#[test]
fn status_shows_who_holds_the_key() {
    let e = Env::new();
    let hold = "touch started; while [ ! -e stop ]; do sleep 0.02; done";
    let run = e.spawn(&["run", "nightly", "--", "sh", "-c", hold]);
    wait_for(&e.path("started"));
    let host = nix::unistd::gethostname().unwrap().into_string().unwrap();
    let s = e.run(&["status", "--json", "nightly"]);
    let h: serde_json::Value = serde_json::from_slice(&s.stdout).unwrap();
    let info = &h[0]["info"];
    assert_eq!(info["host"], host.as_str(), "{h}");
    assert_eq!(info["pid"], run.id(), "{h}");
    assert!(info["command"].as_str().unwrap().starts_with("sh -c 'touch started;"), "{h}");
    assert!(info["since_ms"].as_u64().unwrap() > 1_700_000_000_000, "{h}");
    let table = stdout(&e.run(&["status", "nightly"]));
    for want in [host.as_str(), &run.id().to_string(), "ago", "sh -c"] {
        assert!(table.contains(want), "{want:?} not in {table}");
    }
    std::fs::write(e.path("stop"), "").unwrap();
    let o = wait_child(run, std::time::Duration::from_secs(30));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}
