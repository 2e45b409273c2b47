//! Test support for leasehold stores.
//!
//! - [`conformance`]: scenarios every store must pass, as plain `async fn`s taking a
//!   [`leasehold::Locker`]; [`conformance_suite!`] turns them into one `#[tokio::test]` each.
//! - [`primitives`]: scenarios for semaphores, readers and writers, several keys at once;
//!   [`primitives_suite!`] turns them into one `#[tokio::test]` each.
//! - [`counted`]: scenarios that count the requests reaching the store (the auto-renew rate).
//! - [`process`]: scenarios that need several OS processes (mutual exclusion across
//!   processes, the stalled holder) driven through the `lh-worker` binary, with
//!   SIGSTOP/SIGCONT fault injection.
//! - [`torture`]: several worker processes loop acquire → fenced effect → release while the
//!   test fails the store over, and the history is checked (the resource's commit order).
//! - [`history`], [`proxy`], [`stores`], [`failure`], [`spawn`]: re-exported from
//!   `leasehold-harness`, the publishable crate the CLI's tools use (the recorder and
//!   checker, the TCP fault proxy, each store's private servers in its folder, how they fail,
//!   free ports).
#![deny(missing_docs)]

pub mod conformance;
pub mod counted;
mod fixture;
pub mod fixtures;
pub mod primitives;
pub mod process;
pub mod torture;

pub use fixture::Fixture;
pub use fixtures::etcd::etcd_fixture;
pub use fixtures::mysql::{MyDatabase, mysql_fixture, mysql_server, mysql_session_fixture};
pub use fixtures::postgres::{PgSchema, postgres_base, postgres_fixture, postgres_session_fixture};
pub use fixtures::redis::{
    LocalFenceSource, redis_cluster_fixture, redis_fixture, redis_sentinel_fixture,
    redis_tls_fixture, redlock_fixture, redlock_url,
};
pub use fixtures::sqlite::{file_fixture, sqlite_fixture, sqlite_resource};
pub use fixtures::zookeeper::zk_fixture;
pub use leasehold_harness::{failure, history, proxy, spawn, stores};

/// Generates one `#[tokio::test]` per conformance scenario, each on a fresh fixture made by
/// `$fixture` (an expression evaluating to a future of [`Fixture`]).
#[macro_export]
macro_rules! conformance_suite {
    ($fixture:expr) => {
        $crate::conformance_suite!(@tests $fixture;
            rejects_bad_input, busy_when_held, abandoned_wait_does_not_block_others, mutual_exclusion_tasks, fences_increase,
            owner_checked_renew_and_release, renew_answered_not_owner_marks_lost, renew_extends,
            auto_renew_keeps_lease, many_leases_auto_renew, lost_fires_by_local_deadline,
            guard_cancels_on_loss, waiter_gets_lease_after_release,
            waiter_gets_lease_after_expiry, dropped_lease_is_released,
            cancelled_acquire_leaves_no_orphan, holders_lists_grant, holders_show_who_holds, no_self_wait, no_self_wait_in_join,
            no_self_wait_in_join_one_shot, release_is_not_a_loss,
            acquire_right_after_drop, cancelled_release_still_frees);
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

/// The process-level tests of one store, beside [`conformance_suite!`]: `lh-worker`
/// processes excluding each other on one key (`mutex`, one test per fixture); four processes
/// sharing three permits of a semaphore, each slot exclusive and never more than three holders
/// at once by the history checker (`permits`, for a store that holds semaphores); a holder frozen
/// past its lease, whose late write a fenced resource refuses, and the control whose
/// unfenced write lands on the successor's (`stalled`, with the resource to write to:
/// `resource` makes `(guard, spec)` from the store URL, `after` cleans up after it); a frozen session holder
/// keeping its lock (`session`).
///
/// ```ignore
/// process_suite! {
///     mutex { multi_process_mutual_exclusion: redis_fixture() }
///     permits { multi_process_permits: redis_fixture() }
///     stalled redis_fixture(), resource |_| { let r = RedisServer::start(); let u = r.url(); (r, u) };
/// }
/// ```
#[macro_export]
macro_rules! process_suite {
    (
        $(mutex { $($mname:ident: $mfx:expr),* $(,)? })?
        $(permits { $($pname:ident: $pfx:expr),* $(,)? })?
        $(stalled $sfx:expr, resource $res:expr $(, after $after:expr)?;)?
        $(session { $($sname:ident: $ssfx:expr),* $(,)? })?
    ) => {
        fn worker() -> &'static ::std::path::Path {
            ::std::path::Path::new(env!("CARGO_BIN_EXE_lh-worker"))
        }

        $($(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $mname() {
                let fx: $crate::Fixture = $mfx.await;
                $crate::process::multi_process_mutex(&fx.url, worker(), 4, 40).await;
            }
        )*)?

        $($(
            /// Four processes, three permits: each slot exclusive, never more than three at
            /// once.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $pname() {
                let fx: $crate::Fixture = $pfx.await;
                $crate::process::multi_process_permits(&fx.url, worker(), 4, 30, 3).await;
            }
        )*)?

        $(
            /// A frozen holder outlives its lease; a successor gets the key, and the resumed
            /// holder's write is refused by the fenced resource.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn stalled_holder_is_fenced_off() {
                let fx: $crate::Fixture = $sfx.await;
                let (res, spec) = ($res)(fx.url.as_str());
                let r = $crate::process::stalled_holder(&fx.locker, &fx.url, worker(), &spec, true)
                    .await;
                $crate::process::assert_stale_write_rejected(&r);
                $crate::process::assert_release_said_not_ours(&r);
                $(($after)(&res).await;)?
                drop(res);
            }

            /// The control: the resumed holder's unfenced write lands on top of the
            /// successor's.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn stalled_holder_without_fencing_overwrites_successor() {
                let fx: $crate::Fixture = $sfx.await;
                let (res, spec) = ($res)(fx.url.as_str());
                let r =
                    $crate::process::stalled_holder(&fx.locker, &fx.url, worker(), &spec, false)
                        .await;
                $crate::process::assert_stale_write_accepted(&r);
                $(($after)(&res).await;)?
                drop(res);
            }
        )?

        $($(
            /// A frozen session holder keeps its lock until it dies.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $sname() {
                let fx: $crate::Fixture = $ssfx.await;
                $crate::process::stalled_session_holder_keeps_lock(&fx.locker, &fx.url, worker())
                    .await;
            }
        )*)?
    };
}
