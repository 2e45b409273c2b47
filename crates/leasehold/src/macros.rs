//! `cfg_*!` macros, as tokio's: each names, once, the stores whose code uses the items it
//! wraps, so a build without those stores does not warn that they are unused. One item per
//! invocation.

/// `$item`, its dead-code and unused-import warnings silenced in builds where `$cfg` is false.
macro_rules! used_if {
    (($($cfg:tt)*) $($item:tt)*) => {
        #[cfg_attr(not($($cfg)*), allow(dead_code, unused_imports))]
        $($item)*
    };
}

/// Items any store uses (its URL options, its errors).
macro_rules! cfg_any_store {
    ($($item:tt)*) => {
        used_if! {
            (any(
                feature = "sqlite",
                feature = "file",
                feature = "redis",
                feature = "postgres",
                feature = "mysql",
                feature = "etcd",
                feature = "zookeeper",
                feature = "nats",
            ))
            $($item)*
        }
    };
}

/// Items the networked stores use (a server to connect to, probe and time out on).
macro_rules! cfg_networked {
    ($($item:tt)*) => {
        used_if! {
            (any(
                feature = "redis",
                feature = "postgres",
                feature = "mysql",
                feature = "etcd",
                feature = "zookeeper",
                feature = "nats",
            ))
            $($item)*
        }
    };
}

/// Items the SQL servers' stores use (PostgreSQL, MySQL: sessions, driver options).
macro_rules! cfg_sql {
    ($($item:tt)*) => {
        used_if! {
            (any(feature = "postgres", feature = "mysql"))
            $($item)*
        }
    };
}

/// Items the stores whose session lives on their servers use (etcd's lease, ZooKeeper's
/// session): its signals and the shared session-store core.
// Used only by `backends/session.rs`, which builds only with these stores.
#[allow(unused_macros)]
macro_rules! cfg_store_session {
    ($($item:tt)*) => {
        used_if! {
            (any(feature = "etcd", feature = "zookeeper"))
            $($item)*
        }
    };
}

/// Items the stores that undo an abandoned request in the background use (PostgreSQL, MySQL,
/// etcd, ZooKeeper: a release waits until no abandoned request can grab what it frees).
// Used only by `backends/session.rs`, which builds only with these stores.
#[allow(unused_macros)]
macro_rules! cfg_undoing {
    ($($item:tt)*) => {
        used_if! {
            (any(feature = "postgres", feature = "mysql", feature = "etcd", feature = "zookeeper"))
            $($item)*
        }
    };
}

/// Items every fence resource uses (SQLite, Redis, PostgreSQL, MySQL, etcd).
macro_rules! cfg_fence_resource {
    ($($item:tt)*) => {
        used_if! {
            (any(
                feature = "sqlite",
                feature = "redis",
                feature = "postgres",
                feature = "mysql",
                feature = "etcd",
            ))
            $($item)*
        }
    };
}

/// Items the resources with a claim step use (SQLite, Redis, PostgreSQL, MySQL).
macro_rules! cfg_fence_claim {
    ($($item:tt)*) => {
        used_if! {
            (any(
                feature = "sqlite",
                feature = "redis",
                feature = "postgres",
                feature = "mysql",
            ))
            $($item)*
        }
    };
}

/// Items the SQL fence tables use (SQLite, PostgreSQL, MySQL).
macro_rules! cfg_fence_table {
    ($($item:tt)*) => {
        used_if! {
            (any(feature = "sqlite", feature = "postgres", feature = "mysql"))
            $($item)*
        }
    };
}
