//! Sentinels with a password of their own: asked without one (the default), they refuse,
//! which is a configuration error naming `sentinel_auth=url`; with it, the URL's user and
//! password reach the sentinels too, and the lock works. The password is never printed.

use std::time::Duration;

use leasehold::Locker;
use leasehold_testkit::stores::redis::sentinel::SentinelSet;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinels_with_a_password_need_sentinel_auth_url() {
    let set = tokio::task::spawn_blocking(|| {
        let set = SentinelSet::start();
        // The data nodes: the replica authenticates to the primary, then both want it.
        for node in [&set.replica, &set.primary] {
            assert_eq!(node.cli(&["CONFIG", "SET", "masterauth", "s3cret"]), "OK");
        }
        for node in [&set.replica, &set.primary] {
            assert_eq!(node.cli(&["CONFIG", "SET", "requirepass", "s3cret"]), "OK");
        }
        // The sentinels: they reach the primary with it, and want it from clients.
        for i in 0..set.sentinel_ports().len() {
            let said =
                set.sentinel_cli(i, &["SENTINEL", "SET", "leasehold", "auth-pass", "s3cret"]);
            assert_eq!(said, "OK");
            assert_eq!(set.sentinel_cli(i, &["ACL", "SETUSER", "default", "on", ">s3cret"]), "OK");
        }
        set
    })
    .await
    .unwrap();
    let hosts: Vec<String> =
        set.sentinel_ports().iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let base = format!("redis-sentinel://:s3cret@{}/leasehold", hosts.join(","));

    let e = Locker::connect(&base).await.expect_err("sentinels want a password");
    assert!(e.is_config() && !e.is_unavailable(), "{e:?}");
    assert!(e.to_string().contains("sentinel_auth=url"), "{e}");
    assert!(!format!("{e:?}").contains("s3cret"), "a password in an error: {e:?}");

    let l = Locker::connect(&format!("{base}?sentinel_auth=url")).await.unwrap();
    let lease = l.acquire("k", Duration::from_secs(30)).await.unwrap();
    assert!(lease.release().await.unwrap().is_clean());

    let wrong = base.replace(":s3cret@", ":wrong@") + "?sentinel_auth=url";
    let e = Locker::connect(&wrong).await.expect_err("a wrong password");
    assert!(e.is_config() && !e.is_unavailable(), "{e:?}");
    drop(set);
}
