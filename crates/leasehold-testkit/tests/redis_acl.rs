//! The Redis ACL a leasehold user needs, as README.md lists it: an ACL user granted exactly
//! those commands, on the store's key and channel patterns, can do everything a locker does
//! (wait, renew, release, status, readers, permits), and each command on the list is needed:
//! without any one of them something fails, as `Error::Config`.

use std::time::Duration;

use leasehold::{Locker, Wait};
use leasehold_testkit::stores::redis::server::RedisServer;

/// The commands README.md's "Redis" section names (client requests, and the commands the
/// scripts call, which ACLs check too). Kept equal to the README by hand; this test checks the
/// list is enough and that each entry is needed.
const DOCUMENTED: &[&str] = &[
    "evalsha",
    "script|load",
    "get",
    "set",
    "del",
    "incr",
    "pttl",
    "pexpire",
    "time",
    "hget",
    "hgetall",
    "hset",
    "hdel",
    "scan",
    "publish",
    "subscribe",
];

/// Creates (or resets) ACL user `user` with password `pw` and exactly `cmds`, on the store's
/// default key and channel patterns.
fn acl_user(server: &RedisServer, user: &str, cmds: &[&str]) {
    let mut args =
        vec!["ACL", "SETUSER", user, "reset", "on", ">pw", "~leasehold:*", "&leasehold:*"];
    let plus: Vec<String> = cmds.iter().map(|c| format!("+{c}")).collect();
    args.extend(plus.iter().map(String::as_str));
    assert_eq!(server.cli(&args), "OK");
}

/// A failed step's message: its name, and whether the error was `Error::Config`.
fn step(name: &'static str) -> impl FnOnce(leasehold::Error) -> String {
    move |e| format!("{name} (config: {}): {e}", e.is_config())
}

/// A release that found the grant still ours.
fn clean(r: leasehold::Released, name: &str) -> Result<(), String> {
    r.is_clean().then_some(()).ok_or_else(|| format!("{name}: not ours any more"))
}

/// What a locker does, each step bounded; the first failure, named. `job`'s fence counter is
/// set above the clock first (8e15 µs, the year 2223, below
/// `MAX_FENCE`), so its grant takes the `counter + 1` branch of the fence rule.
async fn exercise(server: &RedisServer, url: &str, run: usize) -> Result<(), String> {
    // Keys of their own: a run that failed half-way leaves its grants to their TTL.
    let (job, doc, pool) = (format!("job{run}"), format!("doc{run}"), format!("pool{run}"));
    server.cli(&["SET", &format!("leasehold:{{{job}}}:fence"), "8000000000000000"]);
    let ttl = Duration::from_secs(30);
    let l = Locker::connect(url).await.map_err(step("connect"))?;
    let l = l.with_op_timeout(Duration::from_secs(2));
    let a = l.acquire(&job, ttl).await.map_err(step("acquire"))?;
    if a.fence().get() != 8_000_000_000_000_001 {
        return Err(format!("acquire: fence {} did not follow the counter", a.fence()));
    }
    a.renew().await.map_err(step("renew"))?;
    let h = l.holders(None).await.map_err(step("status"))?;
    if h.is_empty() {
        return Err("status: no holder listed".into());
    }
    let waiter = {
        let l = l.clone();
        tokio::spawn(
            async move { l.acquire(&job, ttl).wait(Wait::For(Duration::from_secs(5))).await },
        )
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t = std::time::Instant::now();
    clean(a.release().await.map_err(step("release"))?, "release")?;
    let b = waiter.await.unwrap().map_err(step("waiting acquire"))?;
    // Woken by the release's message, not by the waiter's poll of the holder's 30 s PTTL.
    if t.elapsed() > Duration::from_secs(2) {
        return Err(format!("the waiter was not woken by the release ({:?})", t.elapsed()));
    }
    clean(b.release().await.map_err(step("release"))?, "release")?;
    let r1 = l.acquire_shared(&doc, ttl).await.map_err(step("reader"))?;
    let r2 = l.acquire_shared(&doc, ttl).await.map_err(step("reader"))?;
    r1.renew().await.map_err(step("reader renew"))?;
    clean(r1.release().await.map_err(step("reader release"))?, "reader release")?;
    clean(r2.release().await.map_err(step("reader release"))?, "reader release")?;
    let w = l.acquire(&doc, ttl).await.map_err(step("writer"))?;
    clean(w.release().await.map_err(step("writer release"))?, "writer release")?;
    let p = l.acquire_permit(&pool, 2, ttl).await.map_err(step("permit"))?;
    p.renew().await.map_err(step("permit renew"))?;
    clean(p.release().await.map_err(step("permit release"))?, "permit release")?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_acl_is_enough_and_each_command_is_needed() {
    let server = RedisServer::start();
    let url = format!("redis://app:pw@127.0.0.1:{}", server.port());
    acl_user(&server, "app", DOCUMENTED);
    exercise(&server, &url, 0).await.expect("the documented ACL");
    let mut not_needed = Vec::new();
    for (i, cmd) in DOCUMENTED.iter().enumerate() {
        let fewer: Vec<&str> =
            DOCUMENTED.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, c)| *c).collect();
        acl_user(&server, "app", &fewer);
        match exercise(&server, &url, i + 1).await {
            Ok(()) => not_needed.push(*cmd),
            // Notified waiting degrades to polling without the pub/sub commands; everything
            // else missing is a configuration error, never an outage.
            Err(e) => assert!(
                e.contains("(config: true)") || e.contains("not woken"),
                "without {cmd}: {e}"
            ),
        }
    }
    assert!(not_needed.is_empty(), "listed but not needed: {not_needed:?}");
}

/// README.md's `ACL SETUSER` line names exactly [`DOCUMENTED`], and so does the error a refused
/// ACL user gets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_and_the_error_name_the_same_commands() {
    let readme = include_str!("../../../README.md");
    let line = readme
        .lines()
        .find(|l| l.starts_with("ACL SETUSER app"))
        .expect("README.md's ACL SETUSER line");
    let mut named: Vec<&str> = line.split(' ').filter_map(|w| w.strip_prefix('+')).collect();
    let mut want = DOCUMENTED.to_vec();
    named.sort();
    want.sort();
    assert_eq!(named, want, "README.md's ACL line");

    let server = RedisServer::start();
    acl_user(&server, "app", &DOCUMENTED[1..]);
    let url = format!("redis://app:pw@127.0.0.1:{}", server.port());
    let e = exercise(&server, &url, 0).await.expect_err("no EVALSHA");
    for cmd in DOCUMENTED {
        assert!(e.to_lowercase().contains(cmd), "the error does not name {cmd}: {e}");
    }
}
