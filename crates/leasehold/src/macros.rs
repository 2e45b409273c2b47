//! `cfg_*!` macros, as tokio's: each names, once, the stores whose code uses the items it
//! wraps, so a build without those stores does not warn that they are unused. One item per
//! invocation.

/// Items any store uses (its URL options, its errors).
macro_rules! cfg_any_store {
    ($($item:tt)*) => {
        #[cfg_attr(
            not(any(
                feature = "sqlite",
                feature = "file",
                feature = "redis",
                feature = "postgres",
                feature = "mysql",
                feature = "etcd",
                feature = "zookeeper"
            )),
            allow(dead_code, unused_imports)
        )]
        $($item)*
    };
}

/// Items the networked stores use (a server to connect to, probe and time out on).
macro_rules! cfg_networked {
    ($($item:tt)*) => {
        #[cfg_attr(
            not(any(
                feature = "redis",
                feature = "postgres",
                feature = "mysql",
                feature = "etcd",
                feature = "zookeeper"
            )),
            allow(dead_code, unused_imports)
        )]
        $($item)*
    };
}

/// Items the SQL servers' stores use (PostgreSQL, MySQL: sessions, driver options).
macro_rules! cfg_sql {
    ($($item:tt)*) => {
        #[cfg_attr(
            not(any(feature = "postgres", feature = "mysql")),
            allow(dead_code, unused_imports)
        )]
        $($item)*
    };
}

/// Items every fence resource uses (SQLite, Redis, PostgreSQL, MySQL, etcd).
macro_rules! cfg_fence_resource {
    ($($item:tt)*) => {
        #[cfg_attr(
            not(any(
                feature = "sqlite",
                feature = "redis",
                feature = "postgres",
                feature = "mysql",
                feature = "etcd"
            )),
            allow(dead_code, unused_imports)
        )]
        $($item)*
    };
}

/// Items the resources with a claim step use (SQLite, Redis, PostgreSQL, MySQL).
macro_rules! cfg_fence_claim {
    ($($item:tt)*) => {
        #[cfg_attr(
            not(any(
                feature = "sqlite",
                feature = "redis",
                feature = "postgres",
                feature = "mysql"
            )),
            allow(dead_code, unused_imports)
        )]
        $($item)*
    };
}

/// Items the SQL fence tables use (SQLite, PostgreSQL, MySQL).
macro_rules! cfg_fence_table {
    ($($item:tt)*) => {
        #[cfg_attr(
            not(any(feature = "sqlite", feature = "postgres", feature = "mysql")),
            allow(dead_code, unused_imports)
        )]
        $($item)*
    };
}
