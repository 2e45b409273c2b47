//! Test support for leasehold stores.
//!
//! - [`conformance`]: scenarios every store must pass, as plain `async fn`s taking a
//!   [`leasehold::Locker`]; [`conformance_suite!`] turns them into one `#[tokio::test]` each.
//! - [`process`]: scenarios that need several OS processes (mutual exclusion across
//!   processes, the stalled holder) driven through the `lh-worker` binary, with
//!   SIGSTOP/SIGCONT fault injection.
//! - [`history`]: the recorder those processes write and the checker that judges it.
#![deny(missing_docs)]

pub mod conformance;
pub mod history;
pub mod process;
pub mod servers;

/// A store under test plus whatever must live as long as it (a temp dir, a server).
pub struct Fixture {
    /// The locker over the store.
    pub locker: leasehold::Locker,
    /// The store's URL, for scenarios that start other processes.
    pub url: String,
    /// Dropped with the fixture.
    pub guard: Box<dyn std::any::Any + Send>,
}

/// A fixture over a fresh SQLite file in a temp dir.
pub async fn sqlite_fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}/leases.db", dir.path().display());
    Fixture {
        locker: leasehold::Locker::connect(&url).await.expect("open sqlite store"),
        url,
        guard: Box::new(dir),
    }
}

/// A fixture over a fresh `flock` directory in a temp dir.
pub async fn file_fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("file://{}/locks", dir.path().display());
    Fixture {
        locker: leasehold::Locker::connect(&url).await.expect("open file store"),
        url,
        guard: Box::new(dir),
    }
}

/// A fixture over a private `redis-server` started for this test.
pub async fn redis_fixture() -> Fixture {
    let server = servers::RedisServer::start();
    let url = server.url();
    Fixture {
        locker: leasehold::Locker::connect(&url).await.expect("connect redis"),
        url,
        guard: Box::new(server),
    }
}

/// Generates one `#[tokio::test]` per conformance scenario, each on a fresh fixture made by
/// `$fixture` (an expression evaluating to a future of [`Fixture`]).
#[macro_export]
macro_rules! conformance_suite {
    ($fixture:expr) => {
        $crate::conformance_suite!(@tests $fixture;
            rejects_bad_input, busy_when_held, mutual_exclusion_tasks, fences_increase,
            owner_checked_renew_and_release, renew_answered_not_owner_marks_lost, renew_extends,
            auto_renew_keeps_lease, many_leases_auto_renew, lost_fires_by_local_deadline,
            guard_cancels_on_loss, waiter_gets_lease_after_release,
            waiter_gets_lease_after_expiry, dropped_lease_is_released,
            cancelled_acquire_leaves_no_orphan, holders_lists_grant);
    };
    (@tests $fixture:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let fx: $crate::Fixture = $fixture.await;
                $crate::conformance::$name(&fx.locker).await;
            }
        )*
    };
}
